package bench

import (
	"testing"
	"time"
)

// TestSecondsP99: each second's p99 is of the events committed in it, by
// their commit time, not of the latencies in the order they came.
func TestSecondsP99(t *testing.T) {
	start := time.Unix(1000, 0)
	var commits []time.Time
	var lat []time.Duration
	for i := range 300 {
		commits = append(commits, start.Add(time.Duration(i)*10*time.Millisecond)) // 100 a second
		d := time.Millisecond
		if i >= 100 && i < 200 {
			d = time.Duration(i) * time.Millisecond // the second second is slow
		}
		lat = append(lat, d)
	}
	got := secondsP99(start, commits, lat)
	if len(got) != 3 || got[0] != 1 || got[1] != 198 || got[2] != 1 {
		t.Fatalf("p99 by second %v, want [1 198 1]", got)
	}
}
