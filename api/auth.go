package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Token is a bearer token that may call the API as a Principal. Only the
// SHA-256 of its secret is kept.
type Token struct {
	Principal
	SHA256 [sha256.Size]byte // of the secret
}

// NewToken returns the token whose secret is secret, as p.
func NewToken(p Principal, secret string) Token {
	return Token{Principal: p, SHA256: sha256.Sum256([]byte(secret))}
}

// ParseSHA256 decodes the hex SHA-256 of a token's secret, as the YAML holds it.
func ParseSHA256(s string) ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return h, fmt.Errorf("want %d hex digits (the SHA-256 of the token), got %d characters", 2*sha256.Size, len(s))
	}
	copy(h[:], b)
	return h, nil
}

// TokensFromEnv returns the admin token from EFFECTD_ADMIN_TOKEN (name
// "admin", role admin) and the read-only token from EFFECTD_READ_TOKEN (name
// "read", role viewer), skipping those that are unset.
func TokensFromEnv(getenv func(string) string) []Token {
	var out []Token
	if s := getenv("EFFECTD_ADMIN_TOKEN"); s != "" {
		out = append(out, NewToken(Principal{Name: "admin", Role: RoleAdmin}, s))
	}
	if s := getenv("EFFECTD_READ_TOKEN"); s != "" {
		out = append(out, NewToken(Principal{Name: "read", Role: RoleViewer}, s))
	}
	return out
}

// Tokens is the set of tokens the API accepts.
type Tokens []Token

// Authenticate returns the principal whose token is secret. It hashes secret
// and compares the hash with every token's in constant time, so neither the
// secrets nor which token matched can be timed.
func (ts Tokens) Authenticate(secret string) (Principal, bool) {
	if secret == "" {
		return Principal{}, false
	}
	sum := sha256.Sum256([]byte(secret))
	var found Principal
	ok := 0
	for _, t := range ts {
		eq := subtle.ConstantTimeCompare(sum[:], t.SHA256[:])
		if eq == 1 && ok == 0 {
			found = t.Principal
		}
		ok |= eq
	}
	return found, ok == 1
}

// CheckBind refuses to serve the API on addr without an admin token, and
// without any token (insecureNoAuth) anywhere but a loopback address.
func CheckBind(addr string, tokens []Token, insecureNoAuth bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("admin address %q: %w", addr, err)
	}
	if insecureNoAuth {
		if !loopback(host) {
			return fmt.Errorf("admin address %q: --insecure-no-auth is only allowed on a loopback address", addr)
		}
		return nil
	}
	for _, t := range tokens {
		if t.Role == RoleAdmin {
			return nil
		}
	}
	return fmt.Errorf("admin address %q: no admin token: set EFFECTD_ADMIN_TOKEN or list one with role admin in access.tokens (on a loopback address, --insecure-no-auth serves without tokens)", addr)
}

// CheckTLS refuses to serve bearer tokens in plain text on addr unless addr is
// a loopback address, tls is set, or insecurePlaintext says so.
func CheckTLS(addr string, tls, insecurePlaintext bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("admin address %q: %w", addr, err)
	}
	if tls || insecurePlaintext || loopback(host) {
		return nil
	}
	return fmt.Errorf("admin address %q is not loopback: bearer tokens would cross the network in plain text; set EFFECTD_ADMIN_TLS_CERT and EFFECTD_ADMIN_TLS_KEY, or pass --insecure-plaintext (e.g. behind a TLS-terminating proxy)", addr)
}

// loopback reports whether host names only this machine; an empty host means
// every interface.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// anonymous is every caller when the API serves without tokens.
var anonymous = Principal{Name: "anonymous", Role: RoleAdmin}

// authenticate lets a request through only with a known bearer token, and
// puts its principal on the request's context.
func (h *handler) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := anonymous, h.noAuth
		if ip, isIn := inProcess(r.Context()); isIn {
			p, ok = ip, true
		} else if !h.noAuth {
			p, ok = h.tokens.Authenticate(bearer(r.Header.Get("Authorization")))
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="effectd"`)
			h.fail(w, r, errUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// bearer returns the token of an Authorization header, or "".
func bearer(header string) string {
	scheme, secret, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return secret
}

// require refuses, with 403, a principal whose role does not allow a.
func (h *handler) require(a Action) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if p := principalOf(r); !p.Can(a) {
				h.fail(w, r, fmt.Errorf("%w: role %s may not %s", errForbidden, p.Role, a))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// principalOf returns who made r, as authenticate recorded it.
func principalOf(r *http.Request) Principal {
	p, _ := PrincipalFrom(r.Context())
	return p
}
