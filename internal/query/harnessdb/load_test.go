package harnessdb

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/statemachine"
)

// TestLoadHistory: two loads into day partitions make the history the scale
// bench reads (intents settled, one in 3,000 FAILED, 3 IN_DOUBT once, an
// attempt each), and the whole-table reads and sizes see it.
func TestLoadHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t)
	if err := AddChannels(ctx, pool, map[string]string{"bench": "webhook", "pay": "stripe", "sms": "twilio"}); err != nil {
		t.Fatal(err)
	}
	if err := DayPartitions(ctx, pool, 15); err != nil {
		t.Fatal(err)
	}
	for _, h := range []History{{From: 0, N: 3000, Final: 6000}, {From: 3000, N: 3000, Final: 6000}} {
		if err := LoadHistory(ctx, pool, h); err != nil {
			t.Fatalf("%+v: %v", h, err)
		}
	}
	if err := VacuumHistory(ctx, pool); err != nil {
		t.Fatal(err)
	}

	tallies, err := TallyIntents(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	states := map[statemachine.State]int{}
	for _, in := range tallies {
		states[in.Status]++
		if in.Status == statemachine.Sent && (in.ProviderRef == "" || in.IdempotencyKey != in.Channel+":"+in.EventID) {
			t.Errorf("SENT intent %+v: want a provider reference and its key", in)
		}
	}
	if want := map[statemachine.State]int{"SENT": 5998, "FAILED": 2, "IN_DOUBT": 3}; len(states) != len(want) ||
		states["SENT"] != want["SENT"] || states["FAILED"] != want["FAILED"] || states["IN_DOUBT"] != want["IN_DOUBT"] {
		t.Errorf("states %v, want %v", states, want)
	}
	statuses, err := IntentStatuses(ctx, pool)
	if err != nil || len(statuses) != 6003 || statuses[0].Attempts != 1 {
		t.Errorf("IntentStatuses: %d rows (first %+v), %v; want 6003 with one claim each", len(statuses), statuses[0], err)
	}
	if open, err := CountOpen(ctx, pool); err != nil || open != 0 {
		t.Errorf("CountOpen = %d, %v; want 0", open, err)
	}
	if late, err := LateCompletions(ctx, pool); err != nil || len(late) != 0 {
		t.Errorf("LateCompletions = %+v, %v; want none", late, err)
	}
	trail, err := AttemptTrails(ctx, pool, []int64{tallies[0].ID})
	if err != nil || len(trail) != 1 || trail[0].Attempt != 1 || trail[0].Kind != "send" || trail[0].Finished == "-" {
		t.Errorf("AttemptTrails = %+v, %v; want the one send", trail, err)
	}

	rows, err := pool.Query(ctx, `SELECT name FROM effectd.partitions WHERE parent = 'intents'`)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(parts) < 16 {
		t.Fatalf("intents partitions %v, %v; want one for each of the 16 days to today at least", parts, err)
	}
	var total int64
	for _, p := range parts {
		n, err := PartitionRows(ctx, pool, p)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != 6003 {
		t.Errorf("the partitions hold %d rows, want 6003", total)
	}
	for _, table := range []string{"intents", "attempts", "provider_events"} {
		if heap, idx, err := TableSize(ctx, pool, table); err != nil || heap == 0 || idx == 0 {
			t.Errorf("TableSize(%s) = %d, %d, %v", table, heap, idx, err)
		}
	}
	if s, err := ReadTableStats(ctx, pool); err != nil || s.IntentsTotal < s.IntentsHeap || s.IntentsHeap == 0 || s.AttemptsTotal == 0 {
		t.Errorf("ReadTableStats = %+v, %v", s, err)
	}
}

// TestBareIntentAndAgeing: a bare insert adds a PENDING intent once, and
// once the ageing trigger is installed an intent that becomes terminal is
// dated back.
func TestBareIntentAndAgeing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t)
	if err := AddChannels(ctx, pool, map[string]string{"bench": "webhook"}); err != nil {
		t.Fatal(err)
	}
	if err := AddChannels(ctx, pool, map[string]string{"bench": "stripe"}); err != nil {
		t.Fatalf("a registered channel again: %v", err)
	}
	in := BareIntent{EventID: "e1", Channel: "bench", Payload: `{"n":1}`, IdempotencyKey: "bench:e1"}
	for range 2 {
		if err := InsertBareIntent(ctx, pool, in); err != nil {
			t.Fatal(err)
		}
	}
	if open, err := CountOpen(ctx, pool); err != nil || open != 1 {
		t.Fatalf("CountOpen = %d, %v; want the one PENDING intent", open, err)
	}
	if err := AgeTerminal(ctx, pool, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	var age float64 // seconds
	if err := pool.QueryRow(ctx, `UPDATE effectd.intents SET status = 'CANCELLED' WHERE event_id = 'e1'
		RETURNING extract(epoch FROM now() - updated_at)::float8`).Scan(&age); err != nil {
		t.Fatal(err)
	}
	if age < 29*60 {
		t.Errorf("a cancelled intent is %.0fs old, want 30 minutes", age)
	}
}
