//go:build citus

package dispatcher_test

import (
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
)

// TestCitusCancelRacesClaim is TestCancelRacesClaim in the distributed mode:
// intents on four buckets, each cancelled on its bucket while a dispatcher
// claims them there.
func TestCitusCancelRacesClaim(t *testing.T) {
	const buckets = 4
	pool := citusPool(t, buckets)
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) { return "ref-" + key, nil }}
	chans := []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: p, Policy: fastPolicy("webhook")}}
	run(t, pool, dispatcher.Config{Channels: chans, Buckets: buckets, BucketLease: 2 * time.Second,
		ReconcileInterval: 50 * time.Millisecond, RefreshInterval: 100 * time.Millisecond})
	cancelRace(t, pool, p, func(i int) *int64 { b := int64(i % buckets); return &b })
}
