package api

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Token is a bearer token that may call the API under Name.
type Token struct {
	Name   string // recorded as the actor in the audit table
	Secret string // never logged
	Admin  bool   // false: read-only, every write answers 403
}

// TokensFromEnv returns the admin token from EFFECTD_ADMIN_TOKEN and the
// read-only token from EFFECTD_READ_TOKEN, skipping those that are unset.
func TokensFromEnv(getenv func(string) string) []Token {
	var out []Token
	if s := getenv("EFFECTD_ADMIN_TOKEN"); s != "" {
		out = append(out, Token{Name: "admin", Secret: s, Admin: true})
	}
	if s := getenv("EFFECTD_READ_TOKEN"); s != "" {
		out = append(out, Token{Name: "read", Secret: s})
	}
	return out
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
		if t.Admin && t.Secret != "" {
			return nil
		}
	}
	return fmt.Errorf("admin address %q: EFFECTD_ADMIN_TOKEN is not set (on a loopback address, --insecure-no-auth serves without tokens)", addr)
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

type actorKey struct{}

// caller is who made a request.
type caller struct {
	name  string
	admin bool
}

// authenticate lets a request through only with a known bearer token, and
// records its name for the audit.
func (h *handler) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := caller{name: "anonymous", admin: true}, h.noAuth
		if !h.noAuth {
			c, ok = h.match(r.Header.Get("Authorization"))
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="effectd"`)
			h.fail(w, r, errUnauthorized)
			return
		}
		if slot, _ := r.Context().Value(actorKey{}).(*caller); slot != nil {
			*slot = c // so that logRequests, outside, sees who it was
		} else {
			r = r.WithContext(context.WithValue(r.Context(), actorKey{}, &c))
		}
		next.ServeHTTP(w, r)
	})
}

// match compares the presented token with every configured one in constant time.
func (h *handler) match(header string) (caller, bool) {
	scheme, secret, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return caller{}, false
	}
	var found caller
	ok := false
	for _, t := range h.tokens {
		if subtle.ConstantTimeCompare([]byte(secret), []byte(t.Secret)) == 1 && !ok {
			found, ok = caller{name: t.Name, admin: t.Admin}, true
		}
	}
	return found, ok
}

// requireAdmin refuses a read-only token.
func (h *handler) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !callerOf(r).admin {
			h.fail(w, r, errForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// callerOf returns who made r, as authenticate recorded it.
func callerOf(r *http.Request) caller {
	if c, _ := r.Context().Value(actorKey{}).(*caller); c != nil {
		return *c
	}
	return caller{}
}
