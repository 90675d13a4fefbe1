package dispatcher_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// checkDivision fails unless the instances' buckets are disjoint and, when
// settled, cover 0..buckets-1 and differ in count by at most one; it returns
// each instance's count. (While buckets change hands one may be unserved for
// a round: given up by one instance, not yet taken by the other.)
func checkDivision(t *testing.T, buckets int, settled bool, ls ...*dispatcher.BucketLeases) []int {
	t.Helper()
	seen := map[int]int{}
	var counts []int
	for i, l := range ls {
		owned := l.Owned()
		counts = append(counts, len(owned))
		for _, b := range owned {
			if j, dup := seen[b]; dup {
				t.Fatalf("bucket %d served by instances %d and %d", b, j, i)
			}
			seen[b] = i
		}
	}
	if !settled {
		return counts
	}
	if len(seen) != buckets {
		t.Fatalf("%d of %d buckets served (counts %v)", len(seen), buckets, counts)
	}
	if slices.Max(counts)-slices.Min(counts) > 1 {
		t.Fatalf("unfair division: %v", counts)
	}
	return counts
}

// rounds runs a round of each instance, n times.
func rounds(t *testing.T, n int, ls ...*dispatcher.BucketLeases) {
	t.Helper()
	for range n {
		for _, l := range ls {
			if err := l.Rebalance(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestBucketLeases: one instance serves every bucket; a second joining gets
// its fair share from the first (rebalance on join) without a bucket ever
// served by both; a third too; when one stops renewing, its buckets are
// taken over once its leases expire, not before, and counted as takeovers;
// one that stops gives its buckets up at once.
func TestBucketLeases(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	clk := &fakeClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	const buckets, ttl = 32, 15 * time.Second
	a := dispatcher.NewBucketLeases(pool, buckets, ttl, clk.now)
	rounds(t, 1, a)
	if got := checkDivision(t, buckets, true, a); got[0] != buckets || a.Gauge() != buckets {
		t.Fatalf("one instance serves %v buckets (gauge %v); want all %d", got, a.Gauge(), buckets)
	}

	b := dispatcher.NewBucketLeases(pool, buckets, ttl, clk.now)
	rounds(t, 1, b) // b sees a, and every bucket taken: it waits for a to give its share up
	if len(b.Owned()) != 0 {
		t.Fatalf("b took %v while a held every lease", b.Owned())
	}
	checkDivision(t, buckets, false, a, b)
	for range 2 {
		clk.add(ttl / 3)
		rounds(t, 1, a, b)
		checkDivision(t, buckets, false, a, b)
	}
	checkDivision(t, buckets, true, a, b)

	c := dispatcher.NewBucketLeases(pool, buckets, ttl, clk.now)
	for range 3 {
		clk.add(ttl / 3)
		rounds(t, 1, c, a, b)
		checkDivision(t, buckets, false, a, b, c)
	}
	if got := checkDivision(t, buckets, true, a, b, c); slices.Max(got) != 11 {
		t.Fatalf("3 instances of 32 buckets hold %v; want 11, 11, 10", got)
	}
	if a.Takeovers()+b.Takeovers()+c.Takeovers() != 0 {
		t.Fatal("a rebalance between live instances counted as a takeover")
	}

	// c stops renewing (it died): until its leases expire nobody serves its
	// buckets twice; then a and b take them over.
	dead := c.Owned()
	clk.add(ttl / 3)
	rounds(t, 1, a, b)
	for _, l := range []*dispatcher.BucketLeases{a, b} {
		for _, x := range l.Owned() {
			if slices.Contains(dead, x) {
				t.Fatalf("bucket %d taken before its lease expired", x)
			}
		}
	}
	for range 3 { // a and b keep renewing theirs
		clk.add(ttl / 3)
		rounds(t, 1, a, b)
		checkDivision(t, buckets, false, a, b)
	}
	rounds(t, 1, a, b)
	if len(c.Owned()) != 0 {
		t.Fatalf("c still believes it serves %v after its leases ran out", c.Owned())
	}
	checkDivision(t, buckets, true, a, b)
	if got := a.Takeovers() + b.Takeovers(); got != float64(len(dead)) {
		t.Fatalf("takeovers = %v; want %d (c's buckets)", got, len(dead))
	}

	// b leaves cleanly: a serves everything on its next round, without waiting.
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rounds(t, 1, a)
	checkDivision(t, buckets, true, a)
}

// TestBucketLeasesConcurrent: instances running their rounds at once, under
// the database's own clock, never serve a bucket twice and end up serving
// every bucket fairly.
func TestBucketLeasesConcurrent(t *testing.T) {
	pool := pgtest.New(t)
	const buckets = 7
	ls := make([]*dispatcher.BucketLeases, 4)
	for i := range ls {
		ls[i] = dispatcher.NewBucketLeases(pool, buckets, time.Minute, nil)
	}
	for range 5 {
		var wg sync.WaitGroup
		for _, l := range ls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.Rebalance(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		// disjoint at every step, even before the division settles
		seen := map[int]bool{}
		for _, l := range ls {
			for _, b := range l.Owned() {
				if seen[b] {
					t.Fatalf("bucket %d served twice", b)
				}
				seen[b] = true
			}
		}
	}
	checkDivision(t, buckets, true, ls...)
}
