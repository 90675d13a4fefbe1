package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestCheck is the randomized checker's short run in `make test`: two fixed
// seeds and one drawn from the clock (printed), each 300 events over 8s on 2
// instances with every fault but the failover and every actor (isolation
// levels, a moved clock, concurrent redeliveries, enqueue_many batches and
// producers' cancels, a rolled-back batch of 8,000 enqueues, operators, retention rounds racing a requeue, Twilio
// callbacks and Stripe events through the ingress, an id handed to another
// intent before a callback, sweeps), then every invariant judged. The long
// run is `effectd check --events 100000` (docs/checker.md).
// EFFECTD_CHAOS_SEED replaces the fixed seeds with one.
func TestCheck(t *testing.T) {
	bin := build(t)
	seeds := []uint64{20261203, 20261204, uint64(time.Now().UnixNano())}
	if s := seed(t, 0); s != 0 {
		seeds = []uint64{s}
	}
	for i, s := range seeds {
		name := fmt.Sprintf("seed=%d", s)
		if i == 2 {
			name = fmt.Sprintf("random seed=%d", s)
		}
		t.Run(name, func(t *testing.T) {
			t.Logf("seed %d", s)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			rep, err := Run(ctx, Config{
				Binary: bin, Events: 300, Instances: 2, Duration: 8 * time.Second, Seed: s,
				Faults: AllFaults, Channels: CheckChannels, Actors: true, Batch: 16000, DrainTimeout: time.Minute,
				Out: &testWriter{t: t},
			})
			if err != nil {
				t.Fatalf("check run (seed %d): %v", s, err)
			}
			if rep.Invariants == nil {
				t.Error("no per-invariant summary in the report")
			}
			if !rep.OK() {
				t.Errorf("an invariant is violated; replay with: go run ./cmd/effectd check --events 300 --duration 8s --faults all --seed %d", s)
			}
		})
	}
}
