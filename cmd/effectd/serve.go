package main

import (
	"context"
	"crypto/tls"
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
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"github.com/effectd/effectd/api"
	"github.com/effectd/effectd/api/console"
	"github.com/effectd/effectd/api/ingress"
	"github.com/effectd/effectd/cmd/effectd/internal/config"
	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/tracing"
	"github.com/effectd/effectd/migrations"
	"github.com/effectd/effectd/operator"
)

func runServe(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfgPath := fs.String("config", getenv("EFFECTD_CONFIG"), "YAML configuration (env EFFECTD_CONFIG)")
	addr := fs.String("addr", cmpEnv(getenv("EFFECTD_ADMIN_ADDR"), "127.0.0.1:8080"), "admin API address (env EFFECTD_ADMIN_ADDR)")
	ingressAddr := fs.String("ingress-addr", getenv("EFFECTD_INGRESS_ADDR"), "provider events listener address; empty: none (env EFFECTD_INGRESS_ADDR)")
	insecure := fs.Bool("insecure-no-auth", false, "serve the admin API without a token (loopback only)")
	plaintext := fs.Bool("insecure-plaintext", false, "serve the admin API without TLS on a non-loopback address (e.g. behind a TLS-terminating proxy)")
	migrate := fs.Bool("migrate", false, "apply migrations before starting")
	drain := fs.Duration("drain", 30*time.Second, "on SIGTERM, how long in-flight calls may finish")
	logLevel := fs.String("log-level", cmpEnv(getenv("EFFECTD_LOG_LEVEL"), "info"), "debug, info, warn or error (env EFFECTD_LOG_LEVEL)")
	cpuProfile := fs.String("cpuprofile", "", "write a pprof CPU profile of the whole run to this file")
	limits := adminLimits
	fs.DurationVar(&limits.ReadTimeout, "http-read-timeout", limits.ReadTimeout, "admin API and ingress, each: longest time to read one request")
	fs.DurationVar(&limits.WriteTimeout, "http-write-timeout", limits.WriteTimeout, "admin API and ingress, each: longest time to answer one request")
	fs.DurationVar(&limits.IdleTimeout, "http-idle-timeout", limits.IdleTimeout, "admin API and ingress, each: how long an idle keep-alive connection stays open")
	fs.IntVar(&limits.MaxConns, "http-max-conns", limits.MaxConns, "admin API and ingress, each: connections served at once")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if getenv("GOGC") == "" {
		// The live heap is small (tens of MB) and churns fast: collect less
		// often and spend the CPU on calls instead. GOGC in the environment wins.
		debug.SetGCPercent(400)
	}
	if limits.ReadTimeout <= 0 || limits.WriteTimeout <= 0 || limits.IdleTimeout <= 0 || limits.MaxConns < 1 {
		return usagef("serve: --http-read-timeout, --http-write-timeout, --http-idle-timeout and --http-max-conns must be positive")
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
	cfg, err := config.LoadAll(*cfgPath, getenv)
	if err != nil {
		return err
	}
	var ingressChans []ingress.Channel
	if *ingressAddr != "" {
		ingressChans = cfg.Ingress
	}
	tokens, err := adminTokens(*cfgPath, getenv, cfg.Access)
	if err != nil {
		return err
	}
	if err := api.CheckBind(*addr, tokens, *insecure); err != nil {
		return usagef("serve: %v", err)
	}
	tlsConfig, err := adminTLS(getenv)
	if err != nil {
		return usagef("serve: %v", err)
	}
	if err := api.CheckTLS(*addr, tlsConfig != nil, *plaintext); err != nil {
		return usagef("serve: %v", err)
	}
	o := serveOptions{dsn: dsn, chans: cfg.Channels, addr: *addr, tokens: tokens, insecure: *insecure,
		tls: tlsConfig, migrate: *migrate, producers: cfg.Access.Producers, drain: *drain, log: log, stdout: stdout, limits: limits,
		ingressAddr: *ingressAddr, ingress: ingressChans, citus: cfg.Citus, storage: cfg.Storage, traceURL: cfg.TraceURL}
	flush, err := startTracing(ctx, getenv, &o)
	if err != nil {
		return usagef("serve: %v", err)
	}
	defer flush()
	return serve(ctx, o)
}

// startCPUProfile writes a pprof CPU profile of the run to path ("" none)
// until the returned stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// startTracing sets up OpenTelemetry from the OTEL_* variables (off unless
// they configure an exporter) as o's tracer, and returns what sends the
// spans of the last calls before the process ends.
func startTracing(ctx context.Context, getenv env, o *serveOptions) (flush func(), err error) {
	tp, err := tracing.Setup(ctx, getenv)
	if err != nil || tp == nil {
		return func() {}, err
	}
	o.tracer = tp
	o.log.Info("tracing on: spans exported by OTLP (docs/tracing.md)")
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			o.log.Warn("tracing: spans not sent at shutdown", "error", err)
		}
	}, nil
}

type serveOptions struct {
	dsn      string
	chans    []dispatcher.Channel
	addr     string
	tokens   []api.Token
	insecure bool
	tls      *tls.Config // nil: plain HTTP
	migrate  bool
	// producers are granted after migrating (see migrations.Migrator.SetProducers).
	producers []migrations.Producer
	drain     time.Duration
	log       *slog.Logger
	stdout    io.Writer
	limits    httpLimits // of the admin API; zero: adminLimits

	ingressAddr string            // "": no ingress listener
	ingress     []ingress.Channel // the channels whose events it receives

	citus   *migrations.Citus // database.citus; nil: single-node mode
	storage config.Storage    // database.storage; "": auto

	tracer   trace.TracerProvider // nil: tracing is off
	traceURL string               // tracing.ui_url: the console links trace ids to it
}

// serve runs the dispatcher and the admin API until ctx ends, then drains.
func serve(ctx context.Context, o serveOptions) error {
	if o.limits == (httpLimits{}) {
		o.limits = adminLimits
	}
	var tune []func(*pgxpool.Config)
	if o.citus != nil {
		tune = append(tune, oneConnectionPerWorker)
	}
	pool, err := connect(ctx, o.dsn, tune...)
	if err != nil {
		return err
	}
	defer pool.Close()
	buckets, err := prepareDatabase(ctx, pool, o)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d, err := dispatcher.New(pool, dispatcher.Config{Channels: o.chans, Logger: o.log, Registerer: reg, Buckets: buckets,
		TracerProvider: o.tracer})
	if err != nil {
		return err
	}
	h, err := adminHandler(pool, d, reg, o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("serve: admin API: %w", err)
	}
	if o.ingressAddr != "" {
		stopIngress, err := startIngress(ctx, d, reg, o)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopIngress() // before the pool closes
	}
	if err := d.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	scheme := "http"
	if o.tls != nil {
		ln, scheme = tls.NewListener(ln, o.tls), "https"
	}
	o.log.Info("effectd serving", "admin", scheme+"://"+ln.Addr().String(), "channels", len(o.chans), "version", buildVersion())
	fmt.Fprintf(o.stdout, "effectd: admin API on %s://%s\n", scheme, ln.Addr())
	httpErr := serveLimited(ctx, ln, h, 5*time.Second, o.limits)
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

// prepareDatabase migrates (and distributes, with database.citus) and grants
// the producer roles when asked, checks that the schema is current, decides
// the storage mode (storageMode), and registers the channels. It returns the
// distributed mode's bucket count, 0 in single-node mode.
func prepareDatabase(ctx context.Context, pool *pgxpool.Pool, o serveOptions) (buckets int, err error) {
	if o.migrate {
		m := migrations.New(pool)
		if err := m.Up(ctx); err != nil {
			return 0, err
		}
		if o.citus != nil {
			if _, err := m.Distribute(ctx, *o.citus); err != nil {
				return 0, err
			}
		}
		grants, err := m.SetProducers(ctx, o.producers)
		if err != nil {
			return 0, err
		}
		for _, g := range grants {
			o.log.Info("producer roles", "statement", g)
		}
	}
	if current, err := migrations.Current(ctx, pool); err != nil {
		return 0, err
	} else if !current {
		return 0, errors.New("serve: the database schema is behind: run effectd migrate (or serve --migrate)")
	}
	if buckets, err = storageMode(ctx, pool, o); err != nil {
		return 0, err
	}
	return buckets, dispatcher.Register(ctx, pool, o.chans)
}

// storageMode decides the storage mode once, at start-up: it reads the mode
// the database is in (migrations.Mode, the one place that asks), refuses it
// when database.storage names the other one or database.citus does not
// describe it, and logs it. It returns the bucket count, 0 in single-node mode.
func storageMode(ctx context.Context, pool *pgxpool.Pool, o serveOptions) (int, error) {
	have, err := migrations.Mode(ctx, pool)
	if err != nil {
		return 0, err
	}
	mode, source := effectdtype.SingleNode, "detected"
	if have != nil {
		mode = effectdtype.Citus
	}
	if o.storage != "" && o.storage != config.StorageAuto {
		source = "configured"
		if string(o.storage) != mode.String() {
			return 0, fmt.Errorf("serve: database.storage is %s, but the database is in %s mode: %s", o.storage, mode, storageAdvice[o.storage])
		}
	}
	buckets, err := checkMode(have, o.citus)
	if err != nil {
		return 0, err
	}
	o.log.Info("storage mode", "mode", mode.String(), "source", source, "buckets", buckets)
	return buckets, nil
}

// storageAdvice is what to do when database.storage names a mode the
// database is not in.
var storageAdvice = map[config.Storage]string{
	config.StorageCitus:  "run effectd migrate --config (or serve --migrate) against the Citus coordinator, or set database.storage: auto",
	config.StorageSingle: "a distributed database needs database.storage: citus (or auto) and database.citus",
}

// checkMode compares the mode the database is in (have, from migrations.Mode)
// with the YAML's database.citus, and returns the bucket count, 0 in
// single-node mode.
func checkMode(have, want *migrations.Citus) (int, error) {
	switch {
	case have == nil && want == nil:
		return 0, nil
	case have == nil:
		return 0, errors.New("serve: database.citus is set, but the database is not distributed: run effectd migrate --config (or serve --migrate) against the Citus coordinator")
	case want == nil:
		return 0, fmt.Errorf("serve: the database is distributed (co-located with %s): set database.citus in the configuration", have.Qualified())
	case have.Buckets != want.Buckets || have.Qualified() != want.Qualified() || have.Column != want.Column:
		return 0, fmt.Errorf("serve: database.citus says %d buckets of %s.%s, the database %d of %s.%s: run effectd migrate --config",
			want.Buckets, want.Qualified(), want.Column, have.Buckets, have.Qualified(), have.Column)
	case have.Days() != want.Days():
		return 0, fmt.Errorf("serve: database.citus.partition_days says %d, the database makes partitions of %d days: run effectd migrate --config",
			want.Days(), have.Days())
	}
	return have.Buckets, nil
}

// adminHandler serves the console under /ui/ and the admin API elsewhere.
func adminHandler(pool *pgxpool.Pool, d *dispatcher.Dispatcher, reg *prometheus.Registry, o serveOptions) (http.Handler, error) {
	apiHandler, err := api.NewHandler(api.Config{Pool: pool, Operator: operator.New(pool, d.Store()), Tokens: o.tokens, InsecureNoAuth: o.insecure,
		Reconciler: d, Sweeper: d, Registry: reg, Logger: o.log})
	if err != nil {
		return nil, err
	}
	ui, err := console.New(console.Config{Pool: pool, API: apiHandler, Tokens: o.tokens, InsecureNoAuth: o.insecure,
		SecureCookie: o.tls != nil, Logger: o.log, Registerer: reg, TraceURL: o.traceURL})
	if err != nil {
		return nil, err
	}
	h := http.NewServeMux()
	h.Handle("/ui/", ui)
	h.Handle("/", apiHandler)
	return h, nil
}

// startIngress serves the provider events listener on o.ingressAddr until
// the returned stop is called.
func startIngress(ctx context.Context, d *dispatcher.Dispatcher, reg *prometheus.Registry, o serveOptions) (stop func(), err error) {
	ih, err := ingress.NewHandler(ingress.Config{Channels: o.ingress, Recorder: d.Events(), Logger: o.log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	iln, err := net.Listen("tcp", o.ingressAddr)
	if err != nil {
		return nil, fmt.Errorf("serve: ingress: %w", err)
	}
	ictx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- serveLimited(ictx, iln, ih, 5*time.Second, o.limits) }()
	o.log.Info("ingress listening", "addr", "http://"+iln.Addr().String(), "channels", len(o.ingress))
	fmt.Fprintf(o.stdout, "effectd: ingress on http://%s\n", iln.Addr())
	return func() { cancel(); <-done }, nil
}

// adminTokens returns the admin API's tokens — EFFECTD_ADMIN_TOKEN's,
// EFFECTD_READ_TOKEN's and the YAML's access.tokens, refusing a name used
// twice.
func adminTokens(cfgPath string, getenv env, access config.Access) ([]api.Token, error) {
	tokens := api.TokensFromEnv(getenv)
	for _, t := range access.Tokens {
		for _, e := range tokens {
			if e.Name == t.Name {
				return nil, fmt.Errorf("config %s: access.tokens: name %q is taken by the token of EFFECTD_%s_TOKEN", cfgPath, t.Name, strings.ToUpper(t.Name))
			}
		}
	}
	return append(tokens, access.Tokens...), nil
}

// adminTLS loads the admin listener's certificate from EFFECTD_ADMIN_TLS_CERT
// and EFFECTD_ADMIN_TLS_KEY (PEM files); nil when neither is set.
func adminTLS(getenv env) (*tls.Config, error) {
	cert, key := getenv("EFFECTD_ADMIN_TLS_CERT"), getenv("EFFECTD_ADMIN_TLS_KEY")
	switch {
	case cert == "" && key == "":
		return nil, nil
	case cert == "":
		return nil, errors.New("EFFECTD_ADMIN_TLS_KEY is set but EFFECTD_ADMIN_TLS_CERT is not")
	case key == "":
		return nil, errors.New("EFFECTD_ADMIN_TLS_CERT is set but EFFECTD_ADMIN_TLS_KEY is not")
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("EFFECTD_ADMIN_TLS_CERT/EFFECTD_ADMIN_TLS_KEY: %v", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
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
