//go:build citus

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectd/effectd/internal/citustest"
)

// TestCitusEndToEnd is effectd on a Citus cluster on loopback (a coordinator
// and two workers), in the distributed mode, end to end: producers insert
// into producer.orders (distributed by bucket) and enqueue with the order's
// bucket in one transaction, some committing, some rolling back, some
// redelivering; three effectd serve processes, SIGKILLed, SIGSTOPped past
// their leases and restarted while a worker is restarted now and then. Then
// the checker: every committed effect applied once (0 lost, no duplicate but
// those a channel's policy explains), nothing of a rolled-back order sent;
// and while the instances serve: a redelivered event inserts nothing, the
// hostile enqueue cases are refused with the SQLSTATEs of one node, and the
// admin API and the console answer.
func TestCitusEndToEnd(t *testing.T) {
	citustest.Require(t)
	bin := build(t)
	seed := seed(t, 20261202)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	inspected := false
	rep, err := Run(ctx, Config{
		Binary: bin, Events: 1200, Instances: 3, Duration: 30 * time.Second, Seed: seed,
		Faults: []string{FaultKill, FaultStop, FaultPGRestart}, Citus: true, Buckets: 32,
		// every statement is a hop further than on one PostgreSQL: a lease of
		// 4s (not 2s) keeps calls on a loaded machine within their deadline
		Lease: 4 * time.Second, DrainTimeout: 5 * time.Minute, Out: &testWriter{t: t},
		AfterDrain: func(ctx context.Context, in Inspection) {
			inspected = true
			t.Run("Dedupe", func(t *testing.T) { citusDedupe(ctx, t, in) })
			t.Run("Hostile", func(t *testing.T) { citusHostile(ctx, t, in) })
			t.Run("API", func(t *testing.T) { citusAPI(ctx, t, in) })
		},
	})
	if err != nil {
		t.Fatalf("Citus run (seed %d): %v", seed, err)
	}
	if !inspected {
		t.Error("AfterDrain did not run")
	}
	if rep.Faults[FaultKill] == 0 || rep.Faults[FaultPGRestart] == 0 {
		t.Errorf("faults injected %v: want SIGKILLs and worker restarts", rep.Faults)
	}
	for _, r := range rep.Rows {
		if r.Committed == 0 || r.Lost > 0 || r.Duplicates > r.Explained || r.Unsettled > 0 {
			t.Errorf("%s: %d committed, %d lost, %d duplicates of which %d by the channel's policy, %d unsettled; want some committed, none lost, none unexplained, none unsettled",
				r.Channel.Name, r.Committed, r.Lost, r.Duplicates, r.Explained, r.Unsettled)
		}
	}
	if !rep.OK() {
		t.Errorf("checker failed; replay with: go run ./cmd/effectd chaos --citus --events 1200 --instances 3 --duration 30s --faults kill,stop,pgrestart --lease 4s --seed %d", seed)
	}
}

func connect(ctx context.Context, t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// citusDedupe: a committed event delivered again, with its order row and its
// bucket, inserts no intent, and the intents of that (event, channel) stay
// one. The same event under another bucket is tried in a transaction rolled
// back, and what it did is logged (docs/scale.md, "Dedupe", says what holds).
func citusDedupe(ctx context.Context, t *testing.T, in Inspection) {
	conn := connect(ctx, t, in.DSN)
	var ev, ch, payload string
	var bucket int
	err := conn.QueryRow(ctx, `SELECT event_id, channel, payload::text, bucket FROM effectd.intents
		WHERE status = 'SENT' ORDER BY id LIMIT 1`).Scan(&ev, &ch, &payload, &bucket)
	if err != nil {
		t.Fatalf("a settled intent: %v", err)
	}
	if bucket != bucketOf(ev, in.Buckets) {
		t.Errorf("intent of %s is in bucket %d, the producer's is %d", ev, bucket, bucketOf(ev, in.Buckets))
	}
	intents := func() int {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE event_id = $1 AND channel = $2`, ev, ch).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, citusRecordSQL, bucket, "redelivery-"+ev, ev); err != nil {
		t.Fatal(err)
	}
	var inserted bool
	if err := tx.QueryRow(ctx, citusEnqueueSQL, ev, ch, payload, bucket, nil).Scan(&inserted); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if inserted || intents() != 1 {
		t.Errorf("redelivery of %s/%s: enqueue returned %t, %d intents; want false and 1", ch, ev, inserted, intents())
	}

	other := (bucket + 1) % in.Buckets
	tx, err = conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := tx.QueryRow(ctx, citusEnqueueSQL, ev, ch, payload, other, nil).Scan(&inserted); err != nil {
		t.Logf("the same event under bucket %d (its own is %d): refused: %v", other, bucket, err)
		return
	}
	t.Logf("the same event under bucket %d (its own is %d): enqueue returned %t (rolled back)", other, bucket, inserted)
}

// citusHostile: the bad inputs of dispatcher's TestEnqueueBadInput, through
// the SQL function with a valid bucket, are refused as on one node (22023
// naming the field; the malformed JSON fails its ::jsonb cast, 22P02, before
// enqueue runs), and so are a missing or out-of-range bucket; nothing is
// inserted.
func citusHostile(ctx context.Context, t *testing.T, in Inspection) {
	conn := connect(ctx, t, in.DSN)
	big := `{"x":"` + strings.Repeat("a", 70<<10) + `"}`
	ok := 0
	long := time.Now().Add(-400 * time.Hour)
	cases := []struct {
		name, event, channel, payload string
		occurred                      *time.Time
		bucket                        *int
		code, field                   string
	}{
		{"empty event_id", "", "hook", `{}`, nil, &ok, "22023", "event_id"},
		{"long event_id", strings.Repeat("e", 256), "hook", `{}`, nil, &ok, "22023", "event_id"},
		{"unknown channel", "hostile", "nope", `{}`, nil, &ok, "22023", "channel"},
		{"array payload", "hostile", "hook", `[1,2]`, nil, &ok, "22023", "payload"},
		{"string payload", "hostile", "hook", `"x"`, nil, &ok, "22023", "payload"},
		{"invalid json", "hostile", "hook", `{`, nil, &ok, "22P02", ""},
		{"oversized payload", "hostile", "hook", big, nil, &ok, "22023", "payload"},
		{"sms without to", "hostile", "sms-lookup", `{"body":"hi"}`, nil, &ok, "22023", "payload.to"},
		{"sms empty body", "hostile", "sms-lookup", `{"to":"+15005550006","body":""}`, nil, &ok, "22023", "payload.body"},
		{"sms numeric to", "hostile", "sms-lookup", `{"to":15005550006,"body":"x"}`, nil, &ok, "22023", "payload.to"},
		{"stripe unknown type", "hostile", "refund", `{"type":"charge"}`, nil, &ok, "22023", "payload.type"},
		{"refund without target", "hostile", "refund", `{"type":"refund","amount":5}`, nil, &ok, "22023", "payload.payment_intent"},
		{"refund zero amount", "hostile", "refund", `{"type":"refund","payment_intent":"pi_1","amount":0}`, nil, &ok, "22023", "payload.amount"},
		{"refund fractional amount", "hostile", "refund", `{"type":"refund","payment_intent":"pi_1","amount":1.5}`, nil, &ok, "22023", "payload.amount"},
		{"occurred long ago", "hostile", "hook", `{}`, &long, &ok, "22023", "occurred_at"},
		{"missing bucket", "hostile", "hook", `{}`, nil, nil, "22023", "bucket"},
		{"bucket too large", "hostile", "hook", `{}`, nil, ptr(in.Buckets), "22023", "bucket"},
		{"negative bucket", "hostile", "hook", `{}`, nil, ptr(-1), "22023", "bucket"},
	}
	const q = `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => $3::jsonb, occurred_at => $4, bucket => $5)`
	for _, c := range cases {
		var inserted bool
		err := conn.QueryRow(ctx, q, c.event, c.channel, c.payload, c.occurred, c.bucket).Scan(&inserted)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != c.code || !strings.Contains(pgErr.Message, c.field) {
			t.Errorf("%s: got %v, %v; want SQLSTATE %s naming %q", c.name, inserted, err, c.code, c.field)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE event_id IN ('', 'hostile') OR length(event_id) > 255`).Scan(&n); err != nil || n != 0 {
		t.Errorf("intents of hostile enqueues: %d, %v; want none", n, err)
	}
}

func ptr(n int) *int { return &n }

// citusAPI: the admin API's reads and the console's pages answer 200 on every
// instance, and the stats say what kind of counts they give (counts_kind).
func citusAPI(ctx context.Context, t *testing.T, in Inspection) {
	if len(in.Admin) == 0 {
		t.Fatal("no instance's admin API")
	}
	var id int64
	conn := connect(ctx, t, in.DSN)
	if err := conn.QueryRow(ctx, `SELECT id FROM effectd.intents ORDER BY id LIMIT 1`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for _, base := range in.Admin {
		for _, path := range []string{"/v1/stats", "/v1/intents", "/v1/intents?status=SENT&channel=hook",
			fmt.Sprintf("/v1/intents/%d", id), "/v1/channels", "/v1/channels/hook",
			"/ui/", "/ui/intents", fmt.Sprintf("/ui/intents/%d", id), "/ui/channels/hook"} {
			body, status := get(ctx, t, base+path)
			if status != http.StatusOK {
				t.Errorf("GET %s%s: %d %.300s", base, path, status, body)
			}
			if path == "/v1/stats" && base == in.Admin[0] {
				var stats struct {
					Totals struct {
						Counts     map[string]int64 `json:"counts"`
						CountsKind string           `json:"counts_kind"`
					} `json:"totals"`
				}
				if err := json.Unmarshal(body, &stats); err != nil || stats.Totals.CountsKind == "" {
					t.Errorf("/v1/stats: %v, counts_kind %q: want it to say what its counts are: %.300s", err, stats.Totals.CountsKind, body)
				}
				t.Logf("/v1/stats on Citus: totals %v, counts_kind %q", stats.Totals.Counts, stats.Totals.CountsKind)
			}
		}
	}
}

func get(ctx context.Context, t *testing.T, url string) ([]byte, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return nil, 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b, resp.StatusCode
}
