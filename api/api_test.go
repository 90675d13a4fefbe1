package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/statemachine"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	adminToken = "admin-secret-0123456789"
	readToken  = "read-secret-0123456789"
)

// fakeReconciler returns a canned settlement and records what it was asked.
type fakeReconciler struct {
	calls  []bool
	actors []string
}

func (f *fakeReconciler) Reconcile(_ context.Context, id int64, dryRun bool, actor string) (effectdtype.ReconcileResult, error) {
	f.calls = append(f.calls, dryRun)
	f.actors = append(f.actors, actor)
	return effectdtype.ReconcileResult{IntentID: id, From: statemachine.InDoubt, To: statemachine.Sent,
		Outcome: dispatcher.LookupFound, ProviderRef: "re_found", Applied: !dryRun}, nil
}

// env is what a test needs: a migrated database with three channels and the API on it.
type env struct {
	pool  *pgxpool.Pool
	h     http.Handler
	recon *fakeReconciler
}

func setup(t *testing.T) env {
	t.Helper()
	pool := pgtest.New(t)
	fixture.AddChannel(t, pool, "hook", "webhook")
	fixture.AddChannel(t, pool, "refund", "stripe", fixture.Policy(`{"in_doubt": "lookup", "lookup_fallback": "manual"}`))
	fixture.AddChannel(t, pool, "sms", "twilio", fixture.Policy(`{"max_attempts": 5, "lease": "20s"}`))
	recon := &fakeReconciler{}
	h, err := NewHandler(Config{
		Pool: pool,
		Tokens: []Token{NewToken(Principal{Name: "admin", Role: RoleAdmin}, adminToken),
			NewToken(Principal{Name: "read", Role: RoleViewer}, readToken)},
		Reconciler: recon,
		Registry:   prometheus.NewRegistry(),
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return env{pool: pool, h: h, recon: recon}
}

// do sends a request with token (none when empty) and returns the status and body.
func (e env) do(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// want checks a response's status and, for errors, that the message mentions each of mention.
func want(t *testing.T, status int, body string, wantStatus int, mention ...string) {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("status %d, want %d; body: %s", status, wantStatus, body)
	}
	for _, m := range mention {
		if !strings.Contains(body, m) {
			t.Errorf("body does not mention %q: %s", m, body)
		}
	}
	if status >= 400 {
		var e errorBody
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Errorf("error body is not {\"error\":{\"code\",\"message\"}}: %s", body)
		}
	}
}

// insertIntent writes an intent straight into the table in state s; SENDING
// rows get an expired lease.
func (e env) insertIntent(t *testing.T, channel, eventID string, s statemachine.State) int64 {
	t.Helper()
	opts := []fixture.IntentOption{fixture.Channel(channel), fixture.Event(eventID), fixture.Status(string(s)),
		fixture.Payload(`{"to": "+15005550006", "body": "hi"}`), fixture.CreatedAt(time.Now().Add(-time.Hour))}
	if s == statemachine.Sending {
		opts = append(opts, fixture.Lease(time.Now().Add(-time.Minute)))
	}
	return fixture.Intent(t, e.pool, opts...).ID
}

// routes returns every method and pattern of the router.
func routeList(t *testing.T, h http.Handler) [][2]string {
	t.Helper()
	var out [][2]string
	err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out = append(out, [2]string{method, route})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func concrete(route string) string {
	return strings.NewReplacer("{id}", "1", "{name}", "sms", "{snapshot}", "00000000-0000-0000-0000-000000000000").Replace(route)
}

func TestAuth(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.insertIntent(t, "sms", "ev-1", statemachine.InDoubt)
	var v1, writes int
	for _, r := range routeList(t, e.h) {
		method, path := r[0], concrete(r[1])
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		v1++
		for _, tok := range []string{"", "wrong", "Basic " + adminToken} {
			status, body := e.do(t, method, path, tok, "{}")
			if status != http.StatusUnauthorized {
				t.Errorf("%s %s with token %q: %d, want 401: %s", method, path, tok, status, body)
			}
		}
		if method == http.MethodGet {
			continue
		}
		writes++
		status, body := e.do(t, method, path, readToken, `{"as":"skip"}`)
		if status != http.StatusForbidden {
			t.Errorf("%s %s with the read token: %d, want 403: %s", method, path, status, body)
		}
	}
	if v1 != 21 || writes != 12 {
		t.Errorf("walked %d /v1 routes and %d writes, want 21 and 12", v1, writes)
	}
	// The read token reads; the admin token writes.
	status, body := e.do(t, "GET", "/v1/intents/1", readToken, "")
	want(t, status, body, http.StatusOK)
	status, body = e.do(t, "POST", "/v1/intents/1/resolve", adminToken, `{"as":"skip","reason":"never sent"}`)
	want(t, status, body, http.StatusOK, `"status": "SKIPPED"`)
}

func TestInsecureNoAuth(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	h, err := NewHandler(Config{Pool: pool, InsecureNoAuth: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	e := env{pool: pool, h: h}
	fixture.AddChannel(t, pool, "sms", "twilio")
	status, body := e.do(t, "POST", "/v1/channels/sms/pause", "", "")
	want(t, status, body, http.StatusOK, `"paused": true`)
	var actor string
	if err := pool.QueryRow(context.Background(), `SELECT actor FROM effectd.audit`).Scan(&actor); err != nil || actor != "anonymous" {
		t.Errorf("audit actor %q (%v), want anonymous", actor, err)
	}
	if _, err := NewHandler(Config{Pool: pool}); err == nil {
		t.Error("NewHandler without tokens and without InsecureNoAuth: no error")
	}
}

func TestCheckBind(t *testing.T) {
	t.Parallel()
	admin := []Token{NewToken(Principal{Name: "admin", Role: RoleAdmin}, "s")}
	read := []Token{NewToken(Principal{Name: "read", Role: RoleViewer}, "s")}
	tests := []struct {
		addr   string
		tokens []Token
		noAuth bool
		ok     bool
	}{
		{"127.0.0.1:8080", admin, false, true},
		{"0.0.0.0:8080", admin, false, true},
		{":8080", admin, false, true},
		{"127.0.0.1:8080", nil, false, false},
		{"127.0.0.1:8080", read, false, false},
		{"127.0.0.1:8080", nil, true, true},
		{"[::1]:8080", nil, true, true},
		{"localhost:8080", nil, true, true},
		{"0.0.0.0:8080", nil, true, false},
		{":8080", nil, true, false},
		{"10.0.0.1:8080", admin, true, false},
		{"no-port", admin, false, false},
	}
	for _, tt := range tests {
		if err := CheckBind(tt.addr, tt.tokens, tt.noAuth); (err == nil) != tt.ok {
			t.Errorf("CheckBind(%q, %d tokens, %v) = %v, want ok=%v", tt.addr, len(tt.tokens), tt.noAuth, err, tt.ok)
		}
	}
}

func TestTokensFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"EFFECTD_ADMIN_TOKEN": "a", "EFFECTD_READ_TOKEN": "r"}
	got := TokensFromEnv(func(k string) string { return env[k] })
	if len(got) != 2 {
		t.Fatalf("TokensFromEnv = %+v, want two tokens", got)
	}
	for _, tt := range []struct {
		secret string
		want   Principal
	}{{"a", Principal{Name: "admin", Role: RoleAdmin}}, {"r", Principal{Name: "read", Role: RoleViewer}}} {
		if p, ok := Tokens(got).Authenticate(tt.secret); !ok || p.Name != tt.want.Name || p.Role != tt.want.Role || p.Channels != nil {
			t.Errorf("Authenticate(%q) = %+v, %v; want %+v", tt.secret, p, ok, tt.want)
		}
	}
	if p, ok := Tokens(got).Authenticate("x"); ok {
		t.Errorf("Authenticate of an unknown token = %+v", p)
	}
	if got := TokensFromEnv(func(string) string { return "" }); len(got) != 0 {
		t.Errorf("TokensFromEnv with nothing set = %+v", got)
	}
}
