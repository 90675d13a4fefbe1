package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/cmd/effectd/internal/config"
	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/migrations"
)

func runMigrate(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	cfgPath := fs.String("config", getenv("EFFECTD_CONFIG"), "YAML configuration; its channels are registered and its access.producers granted (env EFFECTD_CONFIG)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	dsn := getenv("DATABASE_URL")
	if dsn == "" {
		return usagef("migrate: DATABASE_URL is not set")
	}
	var chans []dispatcher.Channel
	var access config.Access
	var citus *migrations.Citus
	if *cfgPath != "" {
		var err error
		if chans, err = config.Load(*cfgPath, getenv); err != nil {
			return err
		}
		if access, err = config.LoadAccess(*cfgPath); err != nil {
			return err
		}
		if citus, err = config.LoadCitus(*cfgPath); err != nil {
			return err
		}
	}
	pool, err := connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	m := migrations.New(pool)
	if err := m.Up(ctx); err != nil {
		return err
	}
	if citus != nil {
		done, err := m.Distribute(ctx, *citus)
		if err != nil {
			return err
		}
		for _, d := range done {
			fmt.Fprintf(stdout, "effectd: %s\n", d)
		}
		fmt.Fprintf(stdout, "effectd: distributed mode: %d buckets of %s.%s, partitions of %d days\n", citus.Buckets, citus.Qualified(), citus.Column, citus.Days())
	}
	if err := dispatcher.Register(ctx, pool, chans); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "effectd: schema current; %d channel(s) registered\n", len(chans))
	if *cfgPath == "" {
		return nil
	}
	// The YAML is the whole truth about producer roles: none listed, none kept.
	grants, err := m.SetProducers(ctx, access.Producers)
	if err != nil {
		return err
	}
	for _, g := range grants {
		fmt.Fprintf(stdout, "effectd: %s\n", g)
	}
	if len(access.Producers) > 0 {
		fmt.Fprintf(stdout, "effectd: %d producer role(s) may enqueue only into their channels\n", len(access.Producers))
	}
	return nil
}

// connect opens a pool and waits up to 30 s for the database to answer, so a
// service started beside its database does not fail on the first try. Each
// of tune changes the pool's configuration first.
func connect(ctx context.Context, dsn string, tune ...func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	cfg.MaxConns = max(cfg.MaxConns, 16)
	withoutJIT(cfg)
	preferTLSOnOneConnection(cfg)
	for _, t := range tune {
		t(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = pool.Ping(pctx)
		cancel()
		if err == nil {
			return pool, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			pool.Close()
			return nil, fmt.Errorf("database: %w", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// withoutJIT turns PostgreSQL's JIT compilation off on effectd's connections
// unless the URL sets jit itself. Every statement effectd runs reads a few
// index entries, and JIT only adds compile time to them: a count over every
// channel and day partition is estimated above jit_above_cost, and compiling
// it took 210 ms of a 300 ms read at 10 M retained intents.
// oneConnectionPerWorker has each session of the pool send a statement that
// reads every shard (an operator's read names no bucket) to each Citus worker
// over one connection, its tasks one after another
// (citus.max_adaptive_executor_pool_size = 1), unless the DSN sets it. With
// Citus's default of 16, a read of 32 shards opened up to 16 connections per
// worker and kept citus.max_cached_conns_per_worker of them (1 by default): the
// others were new backends at each read, each loading the catalog entries of
// its shard's day partitions and their indexes before planning. On the
// loopback cluster that made a page of 50 intents take 0.7 to 2 s; over one
// cached connection per worker, 0.15 to 0.3 s (docs/performance.md, "On Citus: measured on
// the loopback cluster").
func oneConnectionPerWorker(cfg *pgxpool.Config) {
	const param = "citus.max_adaptive_executor_pool_size"
	if _, set := cfg.ConnConfig.RuntimeParams[param]; !set {
		cfg.ConnConfig.RuntimeParams[param] = "1"
	}
}

func withoutJIT(cfg *pgxpool.Config) {
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
}
