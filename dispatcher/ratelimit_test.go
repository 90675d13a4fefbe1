package dispatcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
)

// clocked records when each call happened and which instance made it.
type clocked struct {
	mu    sync.Mutex
	times []time.Time
	by    map[string]int
	first func(n int) error // the error of the n-th call overall, or nil
}

func (c *clocked) send(instance string) dispatcher.Provider {
	return providerFunc(func(ctx context.Context, key string) (string, error) {
		c.mu.Lock()
		c.times = append(c.times, time.Now())
		c.by[instance]++
		n := len(c.times)
		c.mu.Unlock()
		if c.first != nil {
			if err := c.first(n); err != nil {
				return "", err
			}
		}
		return "ref-" + key, nil
	})
}

type providerFunc func(ctx context.Context, key string) (string, error)

func (f providerFunc) Send(ctx context.Context, key string, _ json.RawMessage, _ map[string]string) (string, error) {
	return f(ctx, key)
}

// twoInstances runs two dispatchers on one database and one channel "c".
func twoInstances(t *testing.T, pol policy.Policy, c *clocked) *rig {
	t.Helper()
	pool := pgtest.New(t)
	for _, name := range []string{"a", "b"} {
		run(t, pool, dispatcher.Config{Channels: []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: c.send(name), Policy: pol}}})
	}
	return &rig{pool: pool}
}

// TestRateLimitSharedByInstances: two instances together keep to the
// channel's rate_per_second.
func TestRateLimitSharedByInstances(t *testing.T) {
	t.Parallel()
	const n, perSecond = 60, 20.0
	c := &clocked{by: map[string]int{}}
	pol := fastPolicy("webhook")
	pol.RatePerSecond = perSecond
	r := twoInstances(t, pol, c)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("e%d", i)
	}
	r.enqueue(t, ids...)
	eventually(t, 20*time.Second, "all sent", func() bool {
		var sent int
		r.pool.QueryRow(context.Background(), `SELECT count(*) FROM effectd.intents WHERE status='SENT'`).Scan(&sent)
		return sent == n
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	sort.Slice(c.times, func(i, j int) bool { return c.times[i].Before(c.times[j]) })
	// The bucket starts empty and holds at most 2 tokens (a tenth of a second):
	// n calls need at least (n-2)/rate seconds.
	span := c.times[len(c.times)-1].Sub(c.times[0])
	min := time.Duration(float64(n-2) / perSecond * 0.9 * float64(time.Second))
	if span < min {
		t.Fatalf("%d calls took %s; at %.0f/s they need at least %s", n, span, perSecond, min)
	}
	// No one-second window holds many more than rate + burst calls (unlimited,
	// all 60 would fall in the first tenth of a second).
	for i := range c.times {
		j := sort.Search(len(c.times), func(k int) bool { return c.times[k].Sub(c.times[i]) >= time.Second })
		if j-i > int(perSecond)+6 { // rate + burst, and slack for calls that start late and bunch up
			t.Fatalf("%d calls in the second after call %d, limit %.0f/s", j-i, i, perSecond)
		}
	}
	// Both instances claimed under the one bucket; had one taken every call,
	// this test would show nothing about sharing the rate.
	if c.by["a"] == 0 || c.by["b"] == 0 {
		t.Fatalf("calls by instance: %v; want both instances to have called", c.by)
	}
}

// TestRetryAfterSlowsTheChannel: a 429 with Retry-After stops every instance
// from calling the channel for that long.
func TestRetryAfterSlowsTheChannel(t *testing.T) {
	t.Parallel()
	c := &clocked{by: map[string]int{}, first: func(n int) error {
		if n == 1 {
			return providerErr{retryable: true, after: time.Second}
		}
		return nil
	}}
	pol := fastPolicy("webhook")
	pol.RatePerSecond = 100
	r := twoInstances(t, pol, c)
	r.enqueue(t, "x")
	eventually(t, 10*time.Second, "the first call answered 429", func() bool {
		var outcomes int
		r.pool.QueryRow(context.Background(), `SELECT count(*) FROM effectd.attempts`).Scan(&outcomes)
		return outcomes == 1
	})
	// A new intent, due at once, must still wait out the Retry-After.
	r.enqueue(t, "y")
	r.waitStatus(t, "y", "SENT")
	c.mu.Lock()
	defer c.mu.Unlock()
	if gap := c.times[1].Sub(c.times[0]); gap < 900*time.Millisecond {
		t.Fatalf("next call %s after a 429 with Retry-After 1s", gap)
	}
}

// TestRetryAfterCounted: the back-off a provider asks for with Retry-After
// adds up in effectd_retry_after_seconds_total of its channel, capped at five
// minutes an answer, which the alert rules watch.
func TestRetryAfterCounted(t *testing.T) {
	t.Parallel()
	c := &clocked{by: map[string]int{}, first: func(n int) error {
		if n == 1 {
			return providerErr{retryable: true, after: time.Hour}
		}
		return nil
	}}
	reg := prometheus.NewRegistry()
	pool := pgtest.New(t)
	run(t, pool, dispatcher.Config{Registerer: reg,
		Channels: []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: c.send("a"), Policy: fastPolicy("webhook")}}})
	r := &rig{pool: pool}
	r.enqueue(t, "x")
	var got float64
	eventually(t, 10*time.Second, "the Retry-After counted", func() bool {
		got = retryAfterSeconds(t, reg)
		return got > 0
	})
	if got != 300 {
		t.Fatalf("effectd_retry_after_seconds_total{channel=c} = %v after one Retry-After of an hour; want 300 (the cap)", got)
	}
}

// retryAfterSeconds is the value of effectd_retry_after_seconds_total{channel="c"} in reg, 0 when absent.
func retryAfterSeconds(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "effectd_retry_after_seconds_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "c" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
