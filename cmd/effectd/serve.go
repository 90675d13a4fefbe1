package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/effectd/effectd/api"
	"github.com/effectd/effectd/api/console"
	"github.com/effectd/effectd/cmd/effectd/internal/config"
	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/migrations"
)

func runServe(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfgPath := fs.String("config", getenv("EFFECTD_CONFIG"), "YAML configuration (env EFFECTD_CONFIG)")
	addr := fs.String("addr", cmpEnv(getenv("EFFECTD_ADMIN_ADDR"), "127.0.0.1:8080"), "admin API address (env EFFECTD_ADMIN_ADDR)")
	insecure := fs.Bool("insecure-no-auth", false, "serve the admin API without a token (loopback only)")
	migrate := fs.Bool("migrate", false, "apply migrations before starting")
	drain := fs.Duration("drain", 30*time.Second, "on SIGTERM, how long in-flight calls may finish")
	logLevel := fs.String("log-level", cmpEnv(getenv("EFFECTD_LOG_LEVEL"), "info"), "debug, info, warn or error (env EFFECTD_LOG_LEVEL)")
	cpuProfile := fs.String("cpuprofile", "", "write a pprof CPU profile of the whole run to this file")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if getenv("GOGC") == "" {
		// The live heap is small (tens of MB) and churns fast: collect less
		// often and spend the CPU on calls instead. GOGC in the environment wins.
		debug.SetGCPercent(400)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usagef("serve: --log-level: %v", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	dsn := getenv("DATABASE_URL")
	if dsn == "" {
		return usagef("serve: DATABASE_URL is not set")
	}
	if *cfgPath == "" {
		return usagef("serve: no configuration: pass --config or set EFFECTD_CONFIG")
	}
	chans, err := config.Load(*cfgPath, getenv)
	if err != nil {
		return err
	}
	tokens := api.TokensFromEnv(getenv)
	if err := api.CheckBind(*addr, tokens, *insecure); err != nil {
		return usagef("serve: %v", err)
	}
	return serve(ctx, serveOptions{dsn: dsn, chans: chans, addr: *addr, tokens: tokens, insecure: *insecure,
		migrate: *migrate, drain: *drain, log: log, stdout: stdout})
}

type serveOptions struct {
	dsn      string
	chans    []dispatcher.Channel
	addr     string
	tokens   []api.Token
	insecure bool
	migrate  bool
	drain    time.Duration
	log      *slog.Logger
	stdout   io.Writer
}

// serve runs the dispatcher and the admin API until ctx ends, then drains.
func serve(ctx context.Context, o serveOptions) error {
	pool, err := connect(ctx, o.dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	if o.migrate {
		if err := migrations.Up(ctx, pool); err != nil {
			return err
		}
	}
	if current, err := migrations.Current(ctx, pool); err != nil {
		return err
	} else if !current {
		return errors.New("serve: the database schema is behind: run effectd migrate (or serve --migrate)")
	}
	if err := dispatcher.Register(ctx, pool, o.chans); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d, err := dispatcher.New(pool, dispatcher.Config{Channels: o.chans, Logger: o.log, Registerer: reg})
	if err != nil {
		return err
	}
	apiHandler, err := api.NewHandler(api.Config{Pool: pool, Tokens: o.tokens, InsecureNoAuth: o.insecure,
		Reconciler: d, Registry: reg, Logger: o.log})
	if err != nil {
		return err
	}
	ui, err := console.New(console.Config{Pool: pool, API: apiHandler, Tokens: o.tokens, InsecureNoAuth: o.insecure, Logger: o.log})
	if err != nil {
		return err
	}
	h := http.NewServeMux()
	h.Handle("/ui/", ui)
	h.Handle("/", apiHandler)
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("serve: admin API: %w", err)
	}
	if err := d.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	o.log.Info("effectd serving", "admin", "http://"+ln.Addr().String(), "channels", len(o.chans), "version", buildVersion())
	fmt.Fprintf(o.stdout, "effectd: admin API on http://%s\n", ln.Addr())
	httpErr := serveHTTP(ctx, ln, h, 5*time.Second)
	// The admin API is down (shutdown or failure): stop claiming, drain calls.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.drain)
	defer cancel()
	stopErr := d.Stop(dctx)
	o.log.Info("effectd stopped", "drain_error", errString(stopErr))
	if httpErr != nil && !errors.Is(httpErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: admin API: %w", httpErr)
	}
	return nil
}

func cmpEnv(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
