package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/statemachine"
)

func TestStats(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for i, s := range []statemachine.State{statemachine.Pending, statemachine.Pending, statemachine.InDoubt, statemachine.Sending, statemachine.Sent} {
		e.insertIntent(t, "sms", string(rune('a'+i)), s)
	}
	e.insertIntent(t, "refund", "r", statemachine.InDoubt)
	// Due an hour ago; and on refund a PENDING row recorded an hour ago but not due for another hour.
	e.pool.Exec(context.Background(), `UPDATE effectd.intents SET next_attempt_at = now() - interval '1 hour' WHERE event_id = 'a'`)
	later := e.insertIntent(t, "refund", "later", statemachine.Pending)
	e.pool.Exec(context.Background(), `UPDATE effectd.intents SET next_attempt_at = now() + interval '1 hour' WHERE id = $1`, later)
	e.pool.Exec(context.Background(), `UPDATE effectd.intents SET delivery = 'undelivered' WHERE event_id = 'e'`)

	status, body := e.do(t, "GET", "/v1/stats", readToken, "")
	want(t, status, body, http.StatusOK)
	var got effectdtype.Stats
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	sms := got.Channels["sms"]
	if sms.Counts[statemachine.Pending] != 2 || sms.Counts[statemachine.Sent] != 1 || sms.InDoubt != 1 || sms.SendingPastLease != 1 {
		t.Errorf("sms stats %+v", sms)
	}
	if d := sms.Deliveries; d.Undelivered != 1 || d.Delivered != 0 || d.Accepted != 0 || got.Totals.Deliveries.Undelivered != 1 {
		t.Errorf("sms deliveries %+v, totals %+v; want one undelivered", d, got.Totals.Deliveries)
	}
	if sms.OldestPendingAge < 3600 || sms.OldestPendingAge > 3600+300 {
		t.Errorf("sms oldest pending age %v, want about 3600", sms.OldestPendingAge)
	}
	if refund := got.Channels["refund"]; refund.OldestPendingAge != 0 || refund.Counts[statemachine.Pending] != 1 {
		t.Errorf("refund stats %+v: a PENDING row that is not due yet counts as waiting", refund)
	}
	if hook := got.Channels["hook"]; hook.OldestPendingAge != 0 || hook.Counts[statemachine.Pending] != 0 {
		t.Errorf("hook stats %+v, want zeros", hook)
	}
	if got.Totals.InDoubt != 2 || got.Totals.Counts[statemachine.InDoubt] != 2 || got.Totals.Counts[statemachine.Pending] != 3 {
		t.Errorf("totals %+v", got.Totals)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.insertIntent(t, "sms", "a", statemachine.InDoubt)
	e.insertIntent(t, "sms", "b", statemachine.Sending)
	status, body := e.do(t, "GET", "/metrics", "", "")
	want(t, status, body, http.StatusOK)
	for _, line := range []string{
		`effectd_in_doubt{channel="sms"} 1`,
		`effectd_sending_past_lease{channel="sms"} 1`,
		`effectd_in_doubt{channel="refund"} 0`,
		`effectd_oldest_pending_age_seconds{channel="sms"} 0`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("metrics lack %q:\n%s", line, body)
		}
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	e := setup(t)
	status, body := e.do(t, "GET", "/healthz", "", "")
	want(t, status, body, http.StatusOK)
	status, body = e.do(t, "GET", "/readyz", "", "")
	want(t, status, body, http.StatusOK, "ready")

	// A closed pool: the database is unreachable.
	closed, err := pgxpool.New(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	h, err := NewHandler(Config{Pool: closed, InsecureNoAuth: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	status, body = env{h: h}.do(t, "GET", "/readyz", "", "")
	want(t, status, body, http.StatusServiceUnavailable, "unavailable")

	// A pool with no connection to give (its one connection held, as when a
	// failover leaves every connection reconnecting): 503 within readyTimeout,
	// before a probe's own timeout, not an answer that never comes.
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	busy, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	held, err := busy.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	h, err = NewHandler(Config{Pool: busy, InsecureNoAuth: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	status, body = env{h: h}.do(t, "GET", "/readyz", "", "")
	want(t, status, body, http.StatusServiceUnavailable, "unavailable")
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("/readyz answered after %v with no connection free; want within %v", took, readyTimeout)
	}

	// A database without effectd's migrations.
	pool := pgtest.New(t)
	if _, err := pool.Exec(context.Background(), `DROP TABLE effectd.goose_db_version`); err != nil {
		t.Fatal(err)
	}
	h, err = NewHandler(Config{Pool: pool, InsecureNoAuth: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	status, body = env{h: h}.do(t, "GET", "/readyz", "", "")
	want(t, status, body, http.StatusServiceUnavailable)

	status, body = e.do(t, "GET", "/nope", "", "")
	want(t, status, body, http.StatusNotFound)
	status, body = e.do(t, "DELETE", "/v1/stats", adminToken, "")
	want(t, status, body, http.StatusMethodNotAllowed)
}
