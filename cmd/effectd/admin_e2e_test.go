package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/localpg"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/providers/sandbox"
)

// The tokens of the end-to-end tests; the API records them as "admin" and "read".
const (
	adminToken = "admin-e2e-token"
	readToken  = "read-e2e-token"
)

// stack is a sandbox, a configuration with two webhook channels (hook and
// other) pointing at it, and the environment that serve needs, on dsn.
type stack struct {
	sb   *sandbox.Server
	dsn  string
	env  []string
	pool *pgxpool.Pool
}

// newStack migrates dsn for the two channels and opens a pool on it.
func newStack(t *testing.T, dsn string) *stack {
	t.Helper()
	sb := sandbox.New(sandbox.Options{WebhookSecret: testSecret})
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	cfg := filepath.Join(t.TempDir(), "effectd.yaml")
	yaml := fmt.Sprintf(`channels:
  hook:
    provider: webhook
    webhook: { url: %q, secret_env: HOOK_SECRET }
    policy: { in_doubt: resend, lease: 2s, backoff: { base: 50ms, max: 200ms } }
  other:
    provider: webhook
    webhook: { url: %q, secret_env: HOOK_SECRET }
    policy: { in_doubt: resend, lease: 2s, backoff: { base: 50ms, max: 200ms } }
`, srv.URL+"/hooks/hook", srv.URL+"/hooks/other")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &stack{sb: sb, dsn: dsn, env: []string{"DATABASE_URL=" + dsn, "HOOK_SECRET=" + testSecret, "EFFECTD_CONFIG=" + cfg,
		"EFFECTD_ADMIN_TOKEN=" + adminToken, "EFFECTD_READ_TOKEN=" + readToken}}
	runBinary(t, s.env, "migrate")
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s.pool = pool
	return s
}

// serve starts effectd serve on a free loopback port and returns it with its admin URL.
func (s *stack) serve(t *testing.T) (*proc, string) {
	t.Helper()
	p := startProc(t, s.env, "serve", "--addr", "127.0.0.1:0")
	return p, p.waitAdmin(t)
}

// enqueue records an intent through the SQL function; occurredAgo > 0 backdates it.
func (s *stack) enqueue(t *testing.T, event, channel string, occurredAgo time.Duration) {
	t.Helper()
	if err := s.tryEnqueue(event, channel, occurredAgo); err != nil {
		t.Fatal(err)
	}
}

// tryEnqueue is enqueue that returns its error.
func (s *stack) tryEnqueue(event, channel string, occurredAgo time.Duration) error {
	var occurred *time.Time
	if occurredAgo > 0 {
		at := time.Now().Add(-occurredAgo)
		occurred = &at
	}
	var inserted bool
	err := s.pool.QueryRow(context.Background(), `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => '{"n":1}'::jsonb, occurred_at => $3)`,
		event, channel, occurred).Scan(&inserted)
	if err != nil || !inserted {
		return fmt.Errorf("enqueue %s on %s: %v, %v", event, channel, inserted, err)
	}
	return nil
}

// status returns the status of the intent (event, channel), "" when absent.
func (s *stack) status(t *testing.T, event, channel string) string {
	t.Helper()
	var st string
	s.pool.QueryRow(context.Background(), `SELECT status FROM effectd.intents WHERE event_id = $1 AND channel = $2`, event, channel).Scan(&st)
	return st
}

// do sends an admin API request with token ("" for none) and returns the status and body.
func do(t *testing.T, method, url, token string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// mustDo is do that fails the test unless the answer has status want.
func mustDo(t *testing.T, method, url, token string, body []byte, want int) []byte {
	t.Helper()
	code, b := do(t, method, url, token, body)
	if code != want {
		t.Fatalf("%s %s: %d %s; want %d", method, url, code, b, want)
	}
	return b
}

// logged reports whether p has written a JSON log line with msg about channel.
func (p *proc) logged(msg, channel string) bool {
	lw := p.cmd.Stderr.(*lockedWriter)
	lw.mu.Lock()
	logs := p.out.String()
	lw.mu.Unlock()
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, `"msg":"`+msg+`"`) && strings.Contains(line, `"channel":"`+channel+`"`) {
			return true
		}
	}
	return false
}

// TestPolicyChangeReachesOtherInstance: a pause and a policy PATCH sent to
// instance A change what instance B does within 5 s, and the audit records
// both under the token's name. A is stopped after the requests, so every
// effect afterwards is B's doing.
func TestPolicyChangeReachesOtherInstance(t *testing.T) {
	t.Parallel()
	s := newStack(t, pgtest.URL(t))
	a, aURL := s.serve(t)
	b, bURL := s.serve(t)

	changed := time.Now()
	mustDo(t, "POST", aURL+"/v1/channels/hook/pause", adminToken, nil, 200)
	mustDo(t, "PATCH", aURL+"/v1/channels/hook/policy", adminToken, []byte(`{"max_age":"30s"}`), 200)
	a.cmd.Process.Signal(syscall.SIGTERM)
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("instance A after SIGTERM: %v", err)
	}
	poll(t, 5*time.Second-time.Since(changed), "instance B logs the pause and the new policy of hook", func() bool {
		return b.logged("channel pause changed", "hook") && b.logged("channel policy changed", "hook")
	})
	t.Logf("instance B picked the change up %s after the requests to A", time.Since(changed).Round(time.Millisecond))

	// Paused: B sends other's intent but not hook's.
	s.enqueue(t, "late", "hook", time.Minute) // older than the new max_age
	s.enqueue(t, "probe", "other", 0)
	poll(t, 10*time.Second, "B sends the intent of the unpaused channel", func() bool { return s.status(t, "probe", "other") == "SENT" })
	if st := s.status(t, "late", "hook"); st != "PENDING" {
		t.Fatalf("intent on the paused channel is %s, want PENDING", st)
	}
	// Resumed (through B): max_age 30s, set through A, skips the minute-old intent.
	mustDo(t, "POST", bURL+"/v1/channels/hook/resume", adminToken, nil, 200)
	poll(t, 5*time.Second, "B skips the intent older than max_age", func() bool { return s.status(t, "late", "hook") == "SKIPPED" })
	for _, e := range s.sb.Ledger.Snapshot("webhook").Effects {
		if strings.HasSuffix(e.Key, ":late") {
			t.Errorf("the skipped intent reached the receiver: %+v", e)
		}
	}

	// The audit: who changed what, with the policy before and after.
	rows, err := s.pool.Query(context.Background(), `
SELECT actor, action, coalesce(before #>> '{policy,max_age}', ''), coalesce(after #>> '{policy,max_age}', ''), (after ->> 'paused')::bool
FROM effectd.audit WHERE channel = 'hook' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var actor, action, before, after string
		var paused bool
		if err := rows.Scan(&actor, &action, &before, &after, &paused); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s max_age %s→%s paused=%v", actor, action, before, after, paused))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"admin channel.pause max_age 0s→0s paused=true",
		"admin channel.policy max_age 0s→30s paused=true",
		"admin channel.resume max_age 30s→30s paused=false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit of hook:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Both instances answer with the stored policy.
	var ch struct {
		Paused bool `json:"paused"`
		Policy struct {
			MaxAge string `json:"max_age"`
		} `json:"policy"`
	}
	if err := json.Unmarshal(mustDo(t, "GET", bURL+"/v1/channels/hook", readToken, nil, 200), &ch); err != nil {
		t.Fatal(err)
	}
	if ch.Paused || ch.Policy.MaxAge != "30s" {
		t.Errorf("GET /v1/channels/hook on B = %+v", ch)
	}
}

// TestMetricsSeries: after some traffic (retries, a lease-expired row settled
// by the reconciler, a paused channel with a PENDING row, an IN_DOUBT row),
// /metrics shows every per-channel series of issue 4.
func TestMetricsSeries(t *testing.T) {
	t.Parallel()
	s := newStack(t, pgtest.URL(t))
	// The first calls fail, so retries are certain and no intent can exhaust
	// its attempts (a random error rate left a small chance of either).
	s.sb.Faults.Set("webhook", sandbox.Fault{ErrorRate: 1, ErrorStatus: 503, Times: 6})
	p, url := s.serve(t)
	ctx := context.Background()

	mustDo(t, "POST", url+"/v1/channels/hook/pause", adminToken, nil, 200)
	poll(t, 5*time.Second, "the dispatcher sees hook paused", func() bool { return p.logged("channel pause changed", "hook") })
	s.enqueue(t, "waiting", "hook", 0)
	// A SENDING row whose lease expired (a crashed worker) and an IN_DOUBT row.
	claimed := time.Now().Add(-3 * time.Second)
	fixture.Intent(t, s.pool, fixture.Event("crashed"), fixture.Channel("other"), fixture.Status("SENDING"),
		fixture.ClaimedAt(claimed), fixture.Lease(time.Now().Add(-time.Second)))
	fixture.Intent(t, s.pool, fixture.Event("unsure"), fixture.Channel("hook"), fixture.Status("IN_DOUBT"), fixture.ClaimedAt(claimed))
	for i := range 20 {
		s.enqueue(t, fmt.Sprintf("evt-%d", i), "other", 0)
	}
	var notSent string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("intents not SENT: %s", notSent)
		}
	})
	poll(t, 20*time.Second, "every intent of other SENT", func() bool {
		s.pool.QueryRow(ctx, `SELECT coalesce(string_agg(event_id || '=' || status || '/' || attempts, ' '), '')
FROM effectd.intents WHERE channel = 'other' AND status <> 'SENT'`).Scan(&notSent)
		return notSent == ""
	})

	want := []struct{ series, pattern string }{
		{"intents by outcome", `effectd_intents_total\{channel="other",outcome="sent"\} [1-9]`},
		{"provider call latency", `effectd_provider_call_seconds_bucket\{channel="other",le="\+Inf"\} [1-9]`},
		{"oldest PENDING age", `effectd_oldest_pending_age_seconds\{channel="hook"\} [0-9.e+-]*[1-9]`},
		{"SENDING past lease", `effectd_sending_past_lease\{channel="other"\} 0`},
		{"IN_DOUBT count", `effectd_in_doubt\{channel="hook"\} 1`},
		{"lookup outcomes", `effectd_lookups_total\{channel="other",outcome="[a-z_]+"\} 1`},
		{"retries", `effectd_retries_total\{channel="other"\} [1-9]`},
	}
	// The counters are written as completions land: poll until all are there.
	var body []byte
	missing := func() []string {
		body = mustDo(t, "GET", url+"/metrics", "", nil, 200)
		var out []string
		for _, w := range want {
			if !regexp.MustCompile(`(?m)^` + w.pattern).Match(body) {
				out = append(out, w.series+" ("+w.pattern+")")
			}
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for m := missing(); len(m) > 0; m = missing() {
		if time.Now().After(deadline) {
			var ours []string
			for line := range strings.SplitSeq(string(body), "\n") {
				if strings.HasPrefix(line, "effectd_") {
					ours = append(ours, line)
				}
			}
			t.Fatalf("/metrics lacks:\n%s\nits effectd series:\n%s", strings.Join(m, "\n"), strings.Join(ours, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadyzFollowsPostgres: readyz answers 503 while PostgreSQL is stopped
// and 200 once it is back, and serve itself survives the outage: an intent
// enqueued afterwards is sent. It needs a cluster of its own.
func TestReadyzFollowsPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := pgtest.Cluster(t, "readyz")
	s := newStack(t, pg.URL("postgres"))
	_, url := s.serve(t)

	readyz := func() int {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			t.Fatalf("readyz: %v", err) // serve must stay up
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	poll(t, 10*time.Second, "readyz 200 with PostgreSQL up", func() bool { return readyz() == 200 })
	s.enqueue(t, "before", "hook", 0)
	poll(t, 10*time.Second, "an intent SENT before the outage", func() bool { return s.status(t, "before", "hook") == "SENT" })

	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	poll(t, 15*time.Second, "readyz 503 with PostgreSQL stopped", func() bool { return readyz() == 503 })

	// Start again on the same directory and port.
	if _, err := localpg.Start(ctx, pg.Dir, localpg.Options{Port: pg.Port, Fast: true}); err != nil {
		t.Fatal(err)
	}
	poll(t, 15*time.Second, "readyz 200 with PostgreSQL back", func() bool { return readyz() == 200 })
	// The test's own pool may hold a connection that the restart closed.
	poll(t, 5*time.Second, "enqueue after the outage", func() bool { return s.tryEnqueue("after", "hook", 0) == nil })
	poll(t, 15*time.Second, "an intent enqueued after the outage SENT", func() bool { return s.status(t, "after", "hook") == "SENT" })
}

// TestAdminAuthThroughBinary: without a token every /v1 route answers 401,
// with the read-only token every write answers 403 and every read 200.
func TestAdminAuthThroughBinary(t *testing.T) {
	t.Parallel()
	s := newStack(t, pgtest.URL(t))
	_, url := s.serve(t)
	// Not due for an hour, so it stays PENDING unless a refused write moved it
	// (a cancel would make it CANCELLED).
	var id int64
	if err := s.pool.QueryRow(context.Background(), `SELECT effectd.enqueue(event_id => 'one', channel => 'hook', payload => '{}'::jsonb,
		not_before => now() + interval '1 hour')`).Scan(new(bool)); err != nil {
		t.Fatal(err)
	}
	if err := s.pool.QueryRow(context.Background(), `SELECT id FROM effectd.intents WHERE event_id = 'one'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	reads := []string{"/v1/intents", fmt.Sprintf("/v1/intents/%d", id), "/v1/channels", "/v1/channels/hook", "/v1/stats"}
	writes := []struct{ method, path, body string }{
		{"POST", fmt.Sprintf("/v1/intents/%d/retry", id), ``},
		{"POST", fmt.Sprintf("/v1/intents/%d/cancel", id), ``},
		{"POST", fmt.Sprintf("/v1/intents/%d/resolve", id), `{"as":"skip"}`},
		{"POST", fmt.Sprintf("/v1/intents/%d/reconcile", id), ``},
		{"PATCH", "/v1/channels/hook/policy", `{"max_attempts":2}`},
		{"POST", "/v1/channels/hook/pause", ``},
		{"POST", "/v1/channels/hook/resume", ``},
	}
	type errBody struct {
		Error struct{ Code string } `json:"error"`
	}
	check := func(method, path, token string, body []byte, want int, wantCode string) {
		code, b := do(t, method, url+path, token, body)
		var e errBody
		json.Unmarshal(b, &e)
		if code != want || e.Error.Code != wantCode {
			t.Errorf("%s %s with token %q: %d %s; want %d %q", method, path, token, code, b, want, wantCode)
		}
	}
	for _, p := range reads {
		check("GET", p, "", nil, 401, "unauthorized")
		check("GET", p, "wrong-token", nil, 401, "unauthorized")
		check("GET", p, readToken, nil, 200, "")
	}
	for _, w := range writes {
		check(w.method, w.path, "", []byte(w.body), 401, "unauthorized")
		check(w.method, w.path, readToken, []byte(w.body), 403, "forbidden")
	}
	// The refused writes changed nothing.
	var st string
	var audits int
	if err := s.pool.QueryRow(context.Background(), `SELECT status, (SELECT count(*) FROM effectd.audit) FROM effectd.intents WHERE id = $1`, id).Scan(&st, &audits); err != nil {
		t.Fatal(err)
	}
	if st != "PENDING" || audits != 0 {
		t.Errorf("after refused writes: intent %s, %d audit rows; want PENDING and none", st, audits)
	}
	var paused bool
	var override string
	s.pool.QueryRow(context.Background(), `SELECT paused, policy_override::text FROM effectd.channels WHERE name = 'hook'`).Scan(&paused, &override)
	if paused || override != "{}" {
		t.Errorf("channel hook after refused writes: paused %v, override %s", paused, override)
	}
}
