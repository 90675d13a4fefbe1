package bench

import (
	"strings"
	"testing"
	"time"
)

// line returns a soak line with count calls of latency lat and a size in MB.
func line(count int, lat time.Duration, sizeMB int64) soakMinute {
	m := soakMinute{Sent: count}
	m.IntentsTotal = sizeMB << 20
	for range count {
		m.lat = append(m.lat, lat)
	}
	return m
}

// run builds n lines from f.
func run(n int, f func(i int) soakMinute) []soakMinute {
	var out []soakMinute
	for i := range n {
		m := f(i)
		m.Minute = i + 1
		out = append(out, m)
	}
	return out
}

func TestJudgeSoak(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	cases := []struct {
		name   string
		lines  []soakMinute
		steady int
		fail   string // "" for PASS, else a part of the failure
	}{
		{"steady", run(20, func(int) soakMinute { return line(100, 10*ms, 40) }), 3, ""},
		{"p99 at 1.5× the first passes", run(20, func(i int) soakMinute {
			if i >= 15 {
				return line(100, 15*ms, 40)
			}
			return line(100, 10*ms, 40)
		}), 3, ""},
		{"p99 past 1.5× the first fails", run(20, func(i int) soakMinute {
			if i >= 15 {
				return line(100, 16*ms, 40)
			}
			return line(100, 10*ms, 40)
		}), 3, "last p99 16.0 ms > 1.5 × first p99 10.0 ms"},
		{"p99 over the window's calls, not the worst line's", run(20, func(i int) soakMinute {
			if i == 17 {
				return line(5, 100*ms, 40) // 5 of 405 calls: under 1%
			}
			return line(100, 10*ms, 40)
		}), 3, ""},
		{"a table still growing fails", run(20, func(i int) soakMinute { return line(100, 10*ms, int64(10+5*i)) }), 3,
			"size 105.0 MB in the last window > 1.5 × 45.0 MB"},
		{"growth before steady size is not held against it", run(20, func(i int) soakMinute {
			if i < 5 {
				return line(100, 10*ms, 10)
			}
			return line(100, 10*ms, 60)
		}), 5, ""},
		{"under ten lines, fifths: the first and last line", run(6, func(i int) soakMinute {
			switch i {
			case 0:
				return line(100, 5*ms, 40)
			case 5:
				return line(100, 8*ms, 40)
			}
			return line(100, 100*ms, 40) // not in either window
		}), 2, "last p99 8.0 ms > 1.5 × first p99 5.0 ms"},
		{"too short to judge the size", run(4, func(int) soakMinute { return line(100, 10*ms, 40) }), 3, "too short to judge the size"},
		{"no call in the last window", run(12, func(i int) soakMinute {
			if i >= 7 {
				return line(0, 0, 40)
			}
			return line(100, 10*ms, 40)
		}), 1, "no call reached the provider in the last window"},
		{"no line", nil, 0, "no lines"},
		{"a rate not kept fails", run(20, func(i int) soakMinute {
			m := line(100, 10*ms, 40)
			m.Offered, m.Late = 100, map[bool]int{true: 25}[i == 0] // 25 of 2,000: 1.25%
			return m
		}), 3, "the rate was not kept: 25 of 2000 commits"},
		{"a rate kept within 1% passes", run(20, func(i int) soakMinute {
			m := line(100, 10*ms, 40)
			m.Offered, m.Late = 100, map[bool]int{true: 20}[i == 0]
			return m
		}), 3, ""},
	}
	for _, c := range cases {
		v := judgeSoak(c.lines, c.steady)
		got := strings.Join(v.Failures, "; ")
		switch {
		case c.fail == "" && !v.pass():
			t.Errorf("%s: FAIL (%s), want PASS", c.name, got)
		case c.fail != "" && v.pass():
			t.Errorf("%s: PASS, want FAIL with %q", c.name, c.fail)
		case c.fail != "" && !strings.Contains(got, c.fail):
			t.Errorf("%s: FAIL (%s), want %q", c.name, got, c.fail)
		}
	}
}

func TestSoakWindow(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{1: 1, 4: 1, 5: 1, 6: 1, 9: 1, 10: 5, 20: 5, 60: 5} {
		if got := soakWindow(n); got != want {
			t.Errorf("soakWindow(%d) = %d, want %d", n, got, want)
		}
	}
}
