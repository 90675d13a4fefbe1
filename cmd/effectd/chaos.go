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

func runChaos(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	events := fs.Int("events", 5000, "events to produce")
	instances := fs.Int("instances", 3, "effectd serve processes")
	duration := fs.Duration("duration", 2*time.Minute, "how long faults are injected (producers spread events over 75% of it)")
	seed := fs.Uint64("seed", 0, "seed of the event plan and the fault schedule (0: from the clock; printed)")
	faults := fs.String("faults", "all", "comma-separated faults: kill, stop, pgrestart, latency, 5xx, 429, hang, drop; all (all of these); none; failover (a streaming standby promoted once the primary is killed mid-burst, then the reconciliation sweep of every Stripe and Twilio channel checked against the checker; not with pgrestart)")
	syncRep := fs.Bool("sync", false, "with failover: the standby is synchronous (synchronous_commit=remote_apply)")
	lag := fs.Duration("replication-lag", 0, "with failover: how long the link to the standby holds the primary's WAL (loopback's own lag is microseconds)")
	drainTimeout := fs.Duration("drain-timeout", 5*time.Minute, "how long the instances may take to settle every intent")
	citus := fs.Bool("citus", false, "run on a Citus cluster on loopback (a coordinator and two workers; Citus must be installed, see .ci/citus-install) in the distributed mode: producers write producer.orders distributed by bucket and enqueue with the bucket; pgrestart restarts a worker; not with failover")
	lease := fs.Duration("lease", 2*time.Second, "every channel's lease (short, so that faults turn into in-doubt rows quickly)")
	buckets := fs.Int("buckets", 32, "with --citus: the producer's buckets (database.citus.buckets)")
	dir := fs.String("dir", "", "work directory for PostgreSQL and the instances' logs (default: a temporary one, kept on failure)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	list, err := chaos.ParseFaults(*faults)
	if err != nil {
		return usagef("chaos: --faults: %v", err)
	}
	if (*syncRep || *lag != 0) && !slices.Contains(list, chaos.FaultFailover) {
		return usagef("chaos: --sync and --replication-lag need --faults failover")
	}
	if *citus && slices.Contains(list, chaos.FaultFailover) {
		return usagef("chaos: --citus and --faults failover do not mix (the Citus nodes have no standbys)")
	}
	if *buckets < 1 || *lease <= 0 {
		return usagef("chaos: --buckets and --lease must be positive")
	}
	if *lag < 0 {
		return usagef("chaos: --replication-lag must not be negative")
	}
	if *events < 1 || *instances < 1 || *instances > 10 || *duration <= 0 {
		return usagef("chaos: --events must be positive, --instances between 1 and 10, --duration positive")
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("chaos: finding the effectd binary: %w", err)
	}
	fmt.Fprintf(stdout, "effectd chaos --seed %d (pass it to replay the plan and the fault schedule)\n", *seed)
	rep, err := chaos.Run(ctx, chaos.Config{Binary: bin, Events: *events, Instances: *instances, Duration: *duration,
		Seed: *seed, Faults: list, Sync: *syncRep, ReplicationLag: *lag, DrainTimeout: *drainTimeout, Dir: *dir, Out: stdout,
		Citus: *citus, Buckets: *buckets, Lease: *lease})
	if err != nil {
		return err
	}
	if !rep.OK() {
		return errors.New("chaos: the checker found broken rules (table above)")
	}
	return nil
}
