package bench

import (
	"testing"
	"time"
)

// TestPGDelta: a process living through the phase counts its difference, one
// born in it all of its CPU, and one that exited what the postmaster reaped
// less what it had spent before the phase.
func TestPGDelta(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	a := pgSnapshot{own: 10 * ms, reaped: 100 * ms, pids: map[int]pgProc{
		1: {"client backends", 50 * ms},  // lives on
		2: {"client backends", 30 * ms},  // exits having spent 45 ms in all
		3: {"walwriter", 5 * ms},         // lives on
		4: {"autovacuum worker", 7 * ms}, // exits having spent 7 ms: nothing in the phase
	}}
	b := pgSnapshot{own: 12 * ms, reaped: 100*ms + 45*ms + 7*ms, pids: map[int]pgProc{
		1: {"client backends", 80 * ms},
		3: {"walwriter", 9 * ms},
		5: {"client backends", 20 * ms}, // born in the phase
	}}
	got := pgDelta(a, b)
	want := map[string]time.Duration{"postmaster": 2 * ms, "client backends": 50 * ms, "walwriter": 4 * ms, pgExited: 15 * ms}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

// TestBucketOf: a sample goes to the feature nearest its leaf, so an
// allocation or a system call is the cost of the feature that made it, and a
// sample under no feature to the runtime's buckets.
func TestBucketOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		stack []string // leaf first
		want  string
	}{
		{[]string{"runtime.mallocgc", "github.com/jackc/pgx/v5/pgproto3.(*Frontend).Receive", "github.com/effectd/effectd/dispatcher.(*Dispatcher).claim"}, "pgx encode/decode and protocol"},
		{[]string{"syscall.write", "net.(*conn).Write", "bufio.(*Writer).Flush", "net/http.(*persistConn).writeLoop"}, "HTTP client (net/http)"},
		{[]string{"crypto/sha256.block", "crypto/hmac.(*hmac).Write", "github.com/standard-webhooks/standard-webhooks/libraries/go.(*Webhook).Sign", "github.com/effectd/effectd/providers/webhook.(*Provider).Send"}, "signing (Standard Webhooks HMAC)"},
		{[]string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"}, bucketGC},
		{[]string{"runtime.futex", "runtime.notesleep", "runtime.stopm", "runtime.findRunnable", "runtime.schedule"}, bucketSyscall},
		{[]string{"runtime.findRunnable", "runtime.schedule", "runtime.park_m", "runtime.mcall"}, bucketScheduler},
	} {
		if got := bucketOf(c.stack); got != c.want {
			t.Errorf("%v: %q, want %q", c.stack, got, c.want)
		}
	}
}
