package chaos

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/localpg"
)

// testWriter sends the run's log to t.Log, one line at a time.
type testWriter struct {
	t   *testing.T
	mu  sync.Mutex
	buf []byte
}

func (w *testWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.t.Log(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

// TestChaos is the short run of `make test`: 1,500 events, 2 instances, every
// fault mixed, then the checker. The release check is `effectd chaos` with at
// least 5,000 events (see docs/testing.md, "Chaos").
func TestChaos(t *testing.T) {
	bin := build(t)
	seed := seed(t, 20261130)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Binary: bin, Events: 1500, Instances: 2, Duration: 35 * time.Second, Seed: seed,
		Faults: AllFaults, Out: &testWriter{t: t},
	})
	if err != nil {
		t.Fatalf("chaos run (seed %d): %v", seed, err)
	}
	if !rep.OK() {
		t.Errorf("checker failed; replay with: go run ./cmd/effectd chaos --events 1500 --instances 2 --duration 35s --faults all --seed %d", seed)
	}
}

// TestChaosFailover is the failover's short run in `make test`: 600 events,
// 2 instances, the primary killed mid-burst and its standby promoted, behind a
// link holding WAL for 20ms. Asynchronous: every loss is accounted for by the
// checker. Synchronous (remote_apply): nothing lost, and nothing applied twice
// but by a channel's resend policy (a call answered while no primary could
// record it, whose lease ended first).
// Either way effectd serves the new primary within 10s, and the reconciliation
// sweep of every Stripe and Twilio channel finds exactly what the checker
// counts: each effect without an intent an orphan, each intent sent twice a
// duplicate, and after a synchronous failover nothing but those resends. The long run is
// `effectd chaos --faults failover` (see docs/deployment.md, "Failover").
func TestChaosFailover(t *testing.T) {
	bin := build(t)
	seed := seed(t, 20261201)
	for _, sync := range []bool{false, true} {
		t.Run(map[bool]string{false: "async", true: "sync"}[sync], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			rep, err := Run(ctx, Config{
				Binary: bin, Events: 600, Instances: 2, Duration: 8 * time.Second, Seed: seed,
				Faults: []string{FaultFailover}, Sync: sync, ReplicationLag: 20 * time.Millisecond, Out: &testWriter{t: t},
			})
			if err != nil {
				t.Fatalf("chaos run (seed %d): %v", seed, err)
			}
			if rep.Failover == nil {
				t.Fatal("no failover in the report")
			}
			for _, r := range rep.Rows {
				if sync && (r.EnqueuesLost > 0 || r.Duplicates > r.Explained) {
					t.Errorf("%s, synchronous: %d enqueues lost, %d duplicate effects of which %d by the channel's policy; want none lost and none unexplained",
						r.Channel.Name, r.EnqueuesLost, r.Duplicates, r.Explained)
				}
			}
			// the sweep an operator runs after the failover sees what the checker
			// counts; what a synchronous failover may leave is the checker's rule
			// (compareSweeps), reported among its sweep violations
			if len(rep.Sweep) != 4 {
				t.Errorf("sweeps of %d channels, want refund and the 3 SMS channels: %+v", len(rep.Sweep), rep.Sweep)
			}
			for _, s := range rep.Sweep {
				for _, k := range effectdtype.FindingKinds {
					if s.Found[k] != s.Expected[k] {
						t.Errorf("%s: sweep found %d %s findings, the checker expects %d", s.Channel.Name, s.Found[k], k, s.Expected[k])
					}
				}
			}
			for _, v := range rep.Violations {
				if strings.HasPrefix(v.Rule, "sweep") {
					t.Errorf("%s: %s: %v", v.Channel, v.Rule, v.Keys)
				}
			}
			if !rep.OK() {
				t.Errorf("checker failed; replay with: go run ./cmd/effectd chaos --events 600 --instances 2 --duration 8s --faults failover --replication-lag 20ms --sync=%t --seed %d", sync, seed)
			}
		})
	}
}

// build builds effectd for the runs, skipping without PostgreSQL or in -short mode.
func build(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("chaos run skipped in -short mode")
	}
	if _, err := exec.LookPath("pg_ctl"); err != nil {
		if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(dirs) == 0 {
			t.Skip(localpg.ErrNoPostgres)
		}
	}
	bin := filepath.Join(t.TempDir(), "effectd")
	build := exec.Command("go", "build", "-o", bin, "github.com/effectd/effectd/cmd/effectd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building effectd: %v\n%s", err, out)
	}
	return bin
}

// seed is def, a fixed schedule so that a run in CI is comparable with the
// last; EFFECTD_CHAOS_SEED=random (or a number) explores others.
func seed(t *testing.T, def uint64) uint64 {
	switch v := os.Getenv("EFFECTD_CHAOS_SEED"); v {
	case "":
		return def
	case "random":
		return uint64(time.Now().UnixNano())
	default:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("EFFECTD_CHAOS_SEED=%q: want a number or random", v)
		}
		return n
	}
}

// TestParseFaults: names, all, none, and an unknown name.
func TestParseFaults(t *testing.T) {
	for in, want := range map[string]int{"all": len(AllFaults), "none": 0, "kill,stop,kill": 2, "drop": 1} {
		got, err := ParseFaults(in)
		if err != nil || len(got) != want {
			t.Errorf("ParseFaults(%q) = %v, %v; want %d faults", in, got, err, want)
		}
	}
	if _, err := ParseFaults("kill,meteor"); err == nil {
		t.Error("ParseFaults accepted an unknown fault")
	}
	if got, err := ParseFaults("failover,kill"); err != nil || len(got) != 2 {
		t.Errorf("ParseFaults(failover,kill) = %v, %v", got, err)
	}
	if _, err := ParseFaults("failover,pgrestart"); err == nil {
		t.Error("ParseFaults accepted failover with pgrestart")
	}
}
