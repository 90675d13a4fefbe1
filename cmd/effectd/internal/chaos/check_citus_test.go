//go:build citus

package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/effectd/effectd/internal/citustest"
)

// TestCitusCheck is the randomized checker's short run on a Citus cluster on
// loopback, in the distributed mode (make test-citus): producers write
// producer.orders and enqueue with the bucket, at every isolation level,
// with the moved clock (the intent and its key moved on their bucket's
// shard), concurrent redeliveries, enqueue_many batches and cancels with
// the bucket, the rolled-back batch, operators,
// callbacks and Stripe events through the ingress, an id reused before a
// callback, and sweeps, under SIGKILL, SIGSTOP and worker restarts (no
// retention rounds: see docs/checker.md); every invariant judged.
func TestCitusCheck(t *testing.T) {
	citustest.Require(t)
	bin := build(t)
	s := seed(t, 20261205)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Binary: bin, Events: 400, Instances: 2, Duration: 15 * time.Second, Seed: s,
		Faults: []string{FaultKill, FaultStop, FaultPGRestart}, Citus: true, Buckets: 32,
		Lease: 4 * time.Second, DrainTimeout: 5 * time.Minute, Channels: CheckChannels, Actors: true, Batch: 8000,
		Out: &testWriter{t: t},
	})
	if err != nil {
		t.Fatalf("Citus check run (seed %d): %v", s, err)
	}
	if !rep.OK() {
		t.Errorf("an invariant is violated; replay with: go run ./cmd/effectd check --citus --events 400 --duration 15s --faults kill,stop,pgrestart --seed %d", s)
	}
}
