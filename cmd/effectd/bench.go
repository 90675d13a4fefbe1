package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/effectd/effectd/cmd/effectd/internal/bench"
)

func runBench(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o bench.Options
	scenarios := fs.String("scenarios", "producer,drain,live,slow,memory,startup", "comma-separated: drain, live, slow, producer, memory, startup, soak, scale, citus (a Citus coordinator and two workers on loopback: producer cost against one PostgreSQL, drain with 1 and 3 instances; Citus must be installed, see .ci/citus-install), citus-scale (the reads of scale on the same cluster in the distributed mode, at --citus-scale-rows and a tenth of it, and the day partitions dropped on every shard), breakdown (where each microsecond goes: a backlog of --breakdown-events enqueued and drained, CPU per effect by process, PostgreSQL's statements from pg_stat_statements, effectd serve's CPU profile by feature; then live at --rate for --duration, latency by stage; see docs/performance.md)")
	fs.IntVar(&o.Events, "events", 20000, "drain: backlog size")
	fs.IntVar(&o.Producers, "producers", 32, "concurrent producer connections")
	fs.IntVar(&o.Rate, "rate", 1000, "live: events offered per second")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "live and producer: how long to offer load")
	fs.DurationVar(&o.SlowLatency, "slow-latency", 200*time.Millisecond, "slow: provider latency per call")
	fs.IntVar(&o.SlowEvents, "slow-events", 10000, "slow: backlog size")
	fs.IntVar(&o.Concurrency, "concurrency", 256, "drain, live: in-flight calls per instance")
	fs.IntVar(&o.SlowConc, "slow-concurrency", 1000, "slow: in-flight calls per instance")
	fs.IntVar(&o.MemEvents, "memory-events", 100000, "memory: backlog drained while resident memory is sampled")
	fs.IntVar(&o.StartupEvents, "startup-events", 20000, "startup: backlog waiting when effectd serve starts")
	fs.IntVar(&o.StartupRuns, "startup-runs", 3, "startup: how many starts (min, median and max are printed)")
	fs.IntVar(&o.SoakRate, "soak-rate", 1500, "soak: events offered per second")
	fs.DurationVar(&o.SoakDuration, "soak-duration", 20*time.Minute, "soak: how long to offer load (a line a minute)")
	fs.DurationVar(&o.SoakRetention, "soak-retention", 2*time.Minute, "soak: how long terminal rows are kept before the pruner deletes them")
	fs.IntVar(&o.ScaleRows, "scale-rows", 10_000_000, "scale: retained intents at the larger size (reads are measured at a tenth of it too)")
	fs.IntVar(&o.ScaleRuns, "scale-runs", 21, "scale, citus-scale: calls of each read at each size (the median is printed)")
	fs.IntVar(&o.BreakdownEvents, "breakdown-events", 100_000, "breakdown: backlog enqueued, then drained")
	fs.DurationVar(&o.BreakdownScrape, "breakdown-scrape", 0, "breakdown: scrape serve's /metrics at this interval during the drain, as a Prometheus would (a toggle: compare a run with it to one without)")
	fs.IntVar(&o.CitusScaleRows, "citus-scale-rows", 1_000_000, "citus-scale: retained intents at the larger size, loaded through the coordinator (reads are measured at a tenth of it too)")
	fs.BoolVar(&o.Durable, "durable", false, "fsync and synchronous_commit on (slower on this disk; see docs/performance.md)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the temporary data directory (its pg/server.log is PostgreSQL's log)")
	fs.Func("pg-set", "a name=value setting of the bench's PostgreSQL, applied last (repeatable; for tracing, e.g. log_min_duration_statement=20)", func(v string) error {
		if name, _, ok := strings.Cut(v, "="); !ok || name == "" {
			return fmt.Errorf("want name=value, got %q", v)
		}
		o.PGSettings = append(o.PGSettings, v)
		return nil
	})
	fs.StringVar(&o.Profile, "profile", "", "write CPU profiles (effectd serve per scenario, and this process) into this directory")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	o.Scenarios = strings.Split(*scenarios, ",")
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	o.Binary = bin
	if o.Profile != "" {
		f, err := os.Create(filepath.Join(o.Profile, "bench.pprof"))
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	return bench.Run(ctx, o, stdout)
}
