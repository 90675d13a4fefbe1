package storagetest

import (
	"maps"
	"testing"
	"time"

	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/internal/query/readdb"
)

// sent enqueues event on channel in bucket i, claims it and settles it SENT
// by a provider event with delivery accepted.
func sent(t *testing.T, h Harness, channel, event string, i int) row {
	t.Helper()
	h.Enqueue(t, channel, event, i)
	claim(t, h, channel, 1, time.Minute)
	if !eventSettle(t, h, channel, event, intent(t, h, event).Key, "accepted") {
		t.Fatalf("%s: the event's settlement was fenced out", event)
	}
	return intent(t, h, event)
}

// pollsDueAndRecordFenced: a SENT intent whose delivery is not final is due
// for a poll once its delay passed, with its key and bucket; a poll's record
// moves its delivery only under the intent's key and the delivery it had,
// and a final delivery is polled no more.
func pollsDueAndRecordFenced(t *testing.T, h Harness) {
	r := sent(t, h, "polls", "polls-1", 3)
	if due, err := h.Store.PollDue(testCtx(t), h.Pool, "polls", []time.Duration{time.Hour}, 10); err != nil || len(due) != 0 {
		t.Fatalf("PollDue before the delay = %+v, %v; want none", due, err)
	}
	due, err := h.Store.PollDue(testCtx(t), h.Pool, "polls", []time.Duration{0}, 10)
	if err != nil || len(due) != 1 || due[0].ID != r.ID || due[0].Key != r.Key {
		t.Fatalf("PollDue = %+v, %v; want polls-1 with its key", due, err)
	}
	x := due[0]
	p := intentdb.Poll{IntentID: x.ID, Key: x.Key, Attempts: x.Attempts, From: "accepted", To: "delivered", Detail: "delivered",
		StartedAt: time.Now(), Outcome: "poll: delivered → delivered", ProviderRef: x.ProviderRef}
	other := p
	other.Key = "another intent's key"
	if moved, err := h.Store.RecordPoll(testCtx(t), h.Pool, other, x.Bucket); err != nil || moved {
		t.Errorf("RecordPoll under another key: moved %v, %v; want fenced out", moved, err)
	}
	if moved, err := h.Store.RecordPoll(testCtx(t), h.Pool, p, x.Bucket); err != nil || !moved {
		t.Fatalf("RecordPoll: moved %v, %v; want moved", moved, err)
	}
	if r := intent(t, h, "polls-1"); r.Delivery != "delivered" {
		t.Errorf("polls-1 after the poll: %+v; want delivered", r)
	}
	if due, err := h.Store.PollDue(testCtx(t), h.Pool, "polls", []time.Duration{0, 0}, 10); err != nil || len(due) != 0 {
		t.Errorf("PollDue after a final delivery = %+v, %v; want none", due, err)
	}
}

// pruneRemovesOnlySettledPastRetention: a prune deletes the terminal intents
// last changed more than the retention ago, in batches, and never a row that
// is pending or in flight.
func pruneRemovesOnlySettledPastRetention(t *testing.T, h Harness) {
	sent(t, h, "prune", "prune-sent-1", 0)
	sent(t, h, "prune", "prune-sent-2", 1)
	h.Enqueue(t, "prune", "prune-sending", 2)
	claim(t, h, "prune", 1, time.Minute)
	h.Enqueue(t, "prune", "prune-pending", 3)
	if n, err := h.Store.Prune(testCtx(t), h.Pool, "prune", time.Hour, 1); err != nil || n != 0 {
		t.Fatalf("Prune within the retention = %d, %v; want 0", n, err)
	}
	if n, err := h.Store.Prune(testCtx(t), h.Pool, "prune", 0, 1); err != nil || n != 2 {
		t.Fatalf("Prune past the retention = %d, %v; want the 2 SENT intents, a batch of 1 at a time", n, err)
	}
	var left []string
	rows, _ := h.Pool.Query(testCtx(t), `SELECT event_id || ':' || status FROM effectd.intents WHERE channel = 'prune' ORDER BY event_id`)
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		left = append(left, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0] != "prune-pending:PENDING" || left[1] != "prune-sending:SENDING" {
		t.Errorf("left after the prune: %v; want prune-pending:PENDING and prune-sending:SENDING", left)
	}
}

// dedupeKeysKeptWithinHorizon: a prune of dedupe keys keeps every key whose
// intents partition and horizon remain, so that the event stays deduped.
func dedupeKeysKeptWithinHorizon(t *testing.T, h Harness) {
	h.Enqueue(t, "dedupe", "dedupe-1", 0)
	count := func() (n int) {
		if err := h.Pool.QueryRow(testCtx(t), `SELECT count(*) FROM effectd.dedupe_keys`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	if before == 0 {
		t.Fatal("no dedupe key was written at enqueue")
	}
	if n, err := h.Store.PruneDedupeKeys(testCtx(t), time.Now()); err != nil || n != 0 {
		t.Errorf("PruneDedupeKeys = %d, %v; want 0 (every key within its horizon)", n, err)
	}
	if after := count(); after != before {
		t.Errorf("dedupe keys: %d after the prune, %d before", after, before)
	}
}

// countsAgree: the counts by status operators read (ChannelCounts, and the
// same through Figures) equal a count of the rows, after every behaviour
// before this one changed them.
func countsAgree(t *testing.T, h Harness) {
	rows, err := h.Pool.Query(testCtx(t), `SELECT channel, status, count(*) FROM effectd.intents GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for rows.Next() {
		var channel, status string
		var n int64
		if err := rows.Scan(&channel, &status, &n); err != nil {
			t.Fatal(err)
		}
		want[channel+" "+status] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	counts, err := h.Store.ChannelCounts(testCtx(t), h.Pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	figures, _, err := h.Store.Figures(testCtx(t), h.Pool)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]readdb.StatusCount{"ChannelCounts": counts, "Figures": figures} {
		read := map[string]int64{}
		for _, c := range got {
			read[c.Channel+" "+string(c.Status)] = c.N
		}
		if !maps.Equal(read, want) {
			t.Errorf("%s = %v; the rows say %v", name, read, want)
		}
	}
}
