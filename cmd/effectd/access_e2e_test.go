package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/providers/sandbox"
)

// The team tokens of the access test, and the names the YAML gives them.
const (
	smsOperatorToken      = "sms-oncall-secret"
	smsViewerToken        = "sms-viewer-secret"
	paymentsOperatorToken = "payments-oncall-secret"
)

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// accessStack is a payment team and an SMS team sharing one effectd: a
// refund and an sms channel against the sandbox, team tokens, and two
// producer roles created as a DBA would.
type accessStack struct {
	env               []string
	pool              *pgxpool.Pool
	payments, smsRole string // producer roles
	migrateOut        string
}

func newAccessStack(t *testing.T) *accessStack {
	t.Helper()
	dsn := pgtest.URL(t)
	sb := sandbox.New(sandbox.Options{})
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := &accessStack{pool: pool}
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000_000)
	s.payments, s.smsRole = "payments_app_"+suffix, "sms_app_"+suffix
	for _, r := range []string{s.payments, s.smsRole} {
		if _, err := pool.Exec(context.Background(), `CREATE ROLE `+r+` LOGIN`); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			pool.Exec(context.Background(), `DROP OWNED BY `+r)
			pool.Exec(context.Background(), `DROP ROLE `+r)
		})
	}
	cfg := filepath.Join(t.TempDir(), "effectd.yaml")
	yaml := fmt.Sprintf(`access:
  tokens:
    - { name: sms-oncall, sha256: %q, role: operator, channels: [sms] }
    - { name: sms-viewer, sha256: %q, role: viewer, channels: ["sms*"] }
    - { name: payments-oncall, sha256: %q, role: operator, channels: [refund, "payout-*"] }
  producers:
    %s: [refund, "payout-*"]
    %s: [sms]
channels:
  sms:
    provider: twilio
    twilio: { from: "+15005550006", base_url: %q }
    redact: [to, body]
  refund:
    provider: stripe
    stripe: { base_url: %q }
`, sha(smsOperatorToken), sha(smsViewerToken), sha(paymentsOperatorToken), s.payments, s.smsRole, srv.URL, srv.URL)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s.env = []string{"DATABASE_URL=" + dsn, "EFFECTD_CONFIG=" + cfg, "EFFECTD_ADMIN_TOKEN=" + adminToken,
		"EFFECTD_READ_TOKEN=" + readToken, "STRIPE_API_KEY=sk_test_x", "TWILIO_ACCOUNT_SID=AC00000000000000000000000000000000",
		"TWILIO_AUTH_TOKEN=t"}
	cmd := exec.Command(binary, "migrate")
	cmd.Env = append(os.Environ(), s.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("effectd migrate: %v\n%s", err, out)
	}
	s.migrateOut = string(out)
	return s
}

// as connects to the stack's database as role.
func (s *accessStack) as(t *testing.T, role string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(s.pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.User = role
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return fmt.Sprint(err)
}

// TestProducerRolesThroughBinary: `effectd migrate` with access.producers lets
// the payments role enqueue refunds and nothing else, and not touch the tables.
func TestProducerRolesThroughBinary(t *testing.T) {
	t.Parallel()
	s := newAccessStack(t)
	ctx := context.Background()
	for _, g := range []string{
		`ALTER FUNCTION effectd.enqueue(text,text,jsonb,timestamp with time zone,timestamp with time zone,text,bigint) SECURITY DEFINER SET search_path = effectd, pg_temp`,
		`REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA effectd FROM PUBLIC`,
		`REVOKE ALL ON ALL TABLES IN SCHEMA effectd FROM "` + s.payments + `"`,
		`GRANT USAGE ON SCHEMA effectd TO "` + s.payments + `"`,
		`GRANT EXECUTE ON FUNCTION effectd.enqueue(text,text,jsonb,timestamp with time zone,timestamp with time zone,text,bigint) TO "` + s.payments + `"`,
	} {
		if !strings.Contains(s.migrateOut, g) {
			t.Errorf("migrate did not print %q:\n%s", g, s.migrateOut)
		}
	}
	pay := s.as(t, s.payments)
	var inserted bool
	err := pay.QueryRow(ctx, `SELECT effectd.enqueue(event_id => 'refund-1', channel => 'refund',
		payload => '{"type":"refund","payment_intent":"pi_1","amount":500}'::jsonb)`).Scan(&inserted)
	if err != nil || !inserted {
		t.Fatalf("payments role enqueues a refund: %v, %v", inserted, err)
	}
	err = pay.QueryRow(ctx, `SELECT effectd.enqueue(event_id => 'sms-1', channel => 'sms',
		payload => '{"to":"+15005550006","body":"hi"}'::jsonb)`).Scan(&inserted)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" || !strings.Contains(pgErr.Message, `channel 'sms'`) {
		t.Errorf("payments role enqueues an SMS: %v, want 42501 naming channel 'sms'", err)
	}
	for _, q := range []string{
		`UPDATE effectd.intents SET status = 'SENT'`,
		`INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key) VALUES ('r', 'refund', '{"type":"refund","charge":"ch_1","amount":-500}', 'k')`,
		`INSERT INTO effectd.audit (actor, action) VALUES ('me', 'nothing')`,
		`SELECT payload FROM effectd.intents`,
	} {
		if _, err := pay.Exec(ctx, q); sqlState(err) != "42501" {
			t.Errorf("payments role: %s: %v, want 42501", q, err)
		}
	}
	// The SMS role may send SMS, even when its app switches role on a pooled connection.
	pooled := s.as(t, s.smsRole)
	if _, err := pooled.Exec(ctx, `SET ROLE `+s.smsRole); err != nil {
		t.Fatal(err)
	}
	if err := pooled.QueryRow(ctx, `SELECT effectd.enqueue(event_id => 'sms-2', channel => 'sms',
		payload => '{"to":"+15005550006","body":"hi"}'::jsonb)`).Scan(&inserted); err != nil || !inserted {
		t.Errorf("sms role enqueues an SMS: %v, %v", inserted, err)
	}
	var got string
	s.pool.QueryRow(ctx, `SELECT string_agg(channel || '/' || event_id, ' ' ORDER BY id) FROM effectd.intents`).Scan(&got)
	if got != "refund/refund-1 sms/sms-2" {
		t.Errorf("intents = %q, want only what each role may enqueue", got)
	}
}

// TestTeamsThroughBinary: each team's token sees and touches only its
// channels; a viewer sees the SMS fields masked; resolve needs a reason.
func TestTeamsThroughBinary(t *testing.T) {
	t.Parallel()
	s := newAccessStack(t)
	ctx := context.Background()
	// Rows as the dispatcher would leave them: an in-doubt refund, an SMS whose
	// provider error quotes the number.
	refundID := fixture.Intent(t, s.pool, fixture.Event("refund-9"), fixture.Channel("refund"), fixture.Status("IN_DOUBT"),
		fixture.Payload(`{"type":"refund","payment_intent":"pi_9","amount":900}`)).ID
	smsID := fixture.Intent(t, s.pool, fixture.Event("otp-1"), fixture.Channel("sms"), fixture.Status("FAILED"),
		fixture.Payload(`{"to":"+15558675309","body":"Your code is 424242"}`),
		fixture.LastError("twilio 400: The 'To' number +15558675309 is not reachable")).ID
	p, url := startProc(t, s.env, "serve", "--addr", "127.0.0.1:0"), ""
	url = p.waitAdmin(t)
	refund, sms := fmt.Sprintf("/v1/intents/%d", refundID), fmt.Sprintf("/v1/intents/%d", smsID)

	// The SMS team's operator: the refund does not exist for it.
	for _, r := range []struct{ method, path, body string }{
		{"GET", refund, ""},
		{"POST", refund + "/resolve", `{"as":"skip","reason":"not mine"}`},
		{"POST", refund + "/retry", ""},
		{"POST", refund + "/reconcile?dry_run=true", ""},
		{"GET", "/v1/channels/refund", ""},
		{"POST", "/v1/channels/refund/pause", ""},
	} {
		if code, b := do(t, r.method, url+r.path, smsOperatorToken, []byte(r.body)); code != 404 {
			t.Errorf("sms-oncall %s %s: %d %s, want 404", r.method, r.path, code, b)
		}
	}
	for _, path := range []string{"/v1/intents", "/v1/intents?channel=refund", "/v1/channels", "/v1/stats"} {
		if b := mustDo(t, "GET", url+path, smsOperatorToken, nil, 200); strings.Contains(string(b), "refund") {
			t.Errorf("sms-oncall GET %s shows the refund channel: %s", path, b)
		}
	}
	if b := mustDo(t, "GET", url+"/metrics", smsOperatorToken, nil, 200); strings.Contains(string(b), `channel="refund"`) ||
		!strings.Contains(string(b), `channel="sms"`) {
		t.Errorf("sms-oncall /metrics: refund present or sms absent:\n%s", grepLines(string(b), "channel="))
	}
	// Its role may not change policy on its own channel: 403.
	if code, b := do(t, "PATCH", url+"/v1/channels/sms/policy", smsOperatorToken, []byte(`{"max_attempts":3}`)); code != 403 {
		t.Errorf("sms-oncall PATCH sms policy: %d %s, want 403", code, b)
	}

	// Redaction: the viewer sees to and body masked, in the payload and the error; admin and operator do not.
	var view struct {
		Intent struct {
			Payload   map[string]string `json:"payload"`
			LastError string            `json:"last_error"`
		} `json:"intent"`
	}
	for _, tc := range []struct {
		token  string
		masked bool
	}{{smsViewerToken, true}, {readToken, true}, {smsOperatorToken, false}, {adminToken, false}} {
		b := mustDo(t, "GET", url+sms, tc.token, nil, 200)
		if err := json.Unmarshal(b, &view); err != nil {
			t.Fatal(err)
		}
		pl := view.Intent.Payload
		leaked := strings.Contains(string(b), "5558675309") || strings.Contains(string(b), "424242")
		if tc.masked && (pl["to"] != "***" || pl["body"] != "***" || leaked || !strings.Contains(view.Intent.LastError, "***")) {
			t.Errorf("viewer sees %s", b)
		}
		if !tc.masked && (pl["to"] != "+15558675309" || pl["body"] != "Your code is 424242") {
			t.Errorf("token %s sees payload %v, want it unmasked", tc.token, pl)
		}
	}
	if b := mustDo(t, "GET", url+"/v1/intents?channel=sms", smsViewerToken, nil, 200); strings.Contains(string(b), "5558675309") {
		t.Errorf("viewer's list leaks the number: %s", b)
	}
	// The environment's read token is an unscoped viewer: it sees the refund, and may not act (403).
	if code, b := do(t, "POST", url+refund+"/resolve", readToken, []byte(`{"as":"skip","reason":"x"}`)); code != 403 {
		t.Errorf("read token resolves: %d %s, want 403", code, b)
	}
	if code, b := do(t, "POST", url+sms+"/retry", smsViewerToken, nil); code != 403 {
		t.Errorf("sms-viewer retries an SMS: %d %s, want 403", code, b)
	}

	// The payment team's operator resolves its refund: a reason is required and kept.
	code, b := do(t, "POST", url+refund+"/resolve", paymentsOperatorToken, []byte(`{"as":"sent","provider_ref":"re_9"}`))
	if code != 422 || !strings.Contains(string(b), "reason") {
		t.Errorf("resolve without reason: %d %s, want 422 naming reason", code, b)
	}
	mustDo(t, "POST", url+refund+"/resolve", paymentsOperatorToken,
		[]byte(`{"as":"sent","provider_ref":"re_9","reason":"refund re_9 seen in the Stripe dashboard"}`), 200)
	var actor, reason string
	if err := s.pool.QueryRow(ctx, `SELECT actor, reason FROM effectd.audit WHERE intent_id = $1`, refundID).Scan(&actor, &reason); err != nil ||
		actor != "payments-oncall" || reason != "refund re_9 seen in the Stripe dashboard" {
		t.Errorf("audit: actor %q reason %q (%v)", actor, reason, err)
	}
	b = mustDo(t, "GET", url+refund, paymentsOperatorToken, nil, 200)
	if !strings.Contains(string(b), `"reason": "refund re_9 seen in the Stripe dashboard"`) || !strings.Contains(string(b), `"actor": "payments-oncall"`) {
		t.Errorf("the intent's history does not show the reason and actor: %s", b)
	}
	if code, b := do(t, "GET", url+sms, paymentsOperatorToken, nil); code != 404 {
		t.Errorf("payments-oncall GET the SMS: %d %s, want 404", code, b)
	}
	// Operators can tell refusals apart in the metrics, though callers cannot.
	metrics := string(mustDo(t, "GET", url+"/metrics", "", nil, 200))
	for _, want := range []string{`effectd_admin_refused_total{reason="out_of_scope"} 7`, `effectd_admin_refused_total{reason="forbidden"} 3`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(metrics, "effectd_admin_refused_total"))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestAdminTLS: off loopback, serve refuses plain text unless told; with a
// certificate it serves HTTPS.
func TestAdminTLS(t *testing.T) {
	t.Parallel()
	s := newStack(t, pgtest.URL(t))
	cmd := exec.Command(binary, "serve", "--addr", "0.0.0.0:0")
	cmd.Env = append(os.Environ(), s.env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "EFFECTD_ADMIN_TLS_CERT") {
		t.Errorf("serve on 0.0.0.0 without TLS: %v %s; want exit 2 naming EFFECTD_ADMIN_TLS_CERT", err, out)
	}

	certFile, keyFile, pool := selfSigned(t)
	p := startProc(t, append(s.env, "EFFECTD_ADMIN_TLS_CERT="+certFile, "EFFECTD_ADMIN_TLS_KEY="+keyFile),
		"serve", "--addr", "0.0.0.0:0")
	url := p.waitAdmin(t)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("admin URL %q, want https", url)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "https://"))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("GET", "https://127.0.0.1:"+port+"/v1/stats", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /v1/stats over TLS: %d", resp.StatusCode)
	}
	// Plain HTTP to the TLS listener gets nothing useful.
	if resp, err := http.Get("http://127.0.0.1:" + port + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain HTTP to the TLS listener answered 200")
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns a
// pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "effectd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
