package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/effectd/effectd/cmd/effectd/internal/chaos"
)

// runCheck is `effectd check`: the randomized checker (docs/checker.md), a
// chaos run with every actor (isolation levels, a moved clock, concurrent
// redeliveries, a rolled-back batch, operators, retention rounds, provider
// events and callbacks through the ingress, an id reused before a callback,
// sweeps) whose history is judged invariant by invariant. It exits nonzero on a violation.
func runCheck(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	seed := fs.Uint64("seed", 0, "seed of the plan, the actors and the fault schedule (0: from the clock; printed)")
	events := fs.Int("events", 2000, "events to produce")
	faults := fs.String("faults", "all", "comma-separated faults: kill, stop, pgrestart, latency, 5xx, 429, hang, drop; all; none; failover (with remote_apply: nothing acknowledged may be lost; not with pgrestart); every (all but pgrestart, and failover)")
	instances := fs.Int("instances", 2, "effectd serve processes")
	duration := fs.Duration("duration", 0, "fault phase (producers spread events over 75% of it; default: 20ms an event, at least 20s)")
	drainTimeout := fs.Duration("drain-timeout", 5*time.Minute, "how long the instances may take to settle every intent")
	citus := fs.Bool("citus", false, "run on a Citus cluster on loopback in the distributed mode (see effectd chaos --citus); not with failover")
	dir := fs.String("dir", "", "work directory (default: a temporary one, kept on failure)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	spec := *faults
	if spec == "every" {
		spec = "kill,stop,latency,5xx,429,hang,drop,failover"
	}
	list, err := chaos.ParseFaults(spec)
	if err != nil {
		return usagef("check: --faults: %v", err)
	}
	failover := slices.Contains(list, chaos.FaultFailover)
	if *citus && failover {
		return usagef("check: --citus and failover do not mix (the Citus nodes have no standbys)")
	}
	if *events < 1 || *instances < 1 || *instances > 10 || *duration < 0 {
		return usagef("check: --events must be positive, --instances between 1 and 10, --duration not negative")
	}
	if *duration == 0 {
		*duration = max(20*time.Second, time.Duration(*events)*20*time.Millisecond)
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("check: finding the effectd binary: %w", err)
	}
	fmt.Fprintf(stdout, "effectd check --seed %d --events %d --faults %s (pass the seed to replay the plan, the actors and the fault schedule)\n", *seed, *events, *faults)
	rep, err := chaos.Run(ctx, chaos.Config{Binary: bin, Events: *events, Instances: *instances, Duration: *duration,
		Seed: *seed, Faults: list, Sync: failover, DrainTimeout: *drainTimeout, Dir: *dir, Out: stdout,
		Citus: *citus, Channels: chaos.CheckChannels, Actors: true})
	if err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("check: seed %d: %w", *seed, errViolation)
	}
	return nil
}

// errViolation is the checker's verdict that an invariant is broken.
var errViolation = errors.New("an invariant is violated (summary above)")
