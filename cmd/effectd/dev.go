package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/api"
	"github.com/effectd/effectd/cmd/effectd/internal/config"
	"github.com/effectd/effectd/internal/localpg"
	"github.com/effectd/effectd/providers/sandbox"
)

// devSecrets are the sandbox's credentials, used by `effectd dev` when the
// environment does not set its own. They open nothing but the local sandbox.
var devSecrets = map[string]string{
	"STRIPE_API_KEY":                "sk_test_effectd_sandbox",
	"TWILIO_ACCOUNT_SID":            "AC00000000000000000000000000000000",
	"TWILIO_AUTH_TOKEN":             "sandbox",
	"SANDBOX_WEBHOOK_SECRET":        "whsec_ZWZmZWN0ZC1zYW5kYm94LXNlY3JldC1rZXk=",
	"SANDBOX_STRIPE_WEBHOOK_SECRET": "whsec_ZWZmZWN0ZC1zYW5kYm94LXN0cmlwZS1ldmVudHM=",
}

func runDev(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	data := fs.String("data", ".data", "directory of the throwaway PostgreSQL (used when DATABASE_URL is unset)")
	pgPort := fs.Int("pg-port", 54329, "loopback port of the throwaway PostgreSQL")
	cfgPath := fs.String("config", cmpEnv(getenv("EFFECTD_CONFIG"), "cmd/effectd/effectd.example.yaml"), "YAML configuration")
	sandboxAddr := fs.String("sandbox-addr", "127.0.0.1:9090", "address of the in-process sandbox")
	addr := fs.String("addr", cmpEnv(getenv("EFFECTD_ADMIN_ADDR"), "127.0.0.1:8080"), "admin API address")
	ingressAddr := fs.String("ingress-addr", cmpEnv(getenv("EFFECTD_INGRESS_ADDR"), "127.0.0.1:8081"), "provider events listener address (the example config's status_callback points here)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	getenv = withDefaults(getenv, devSecrets)
	cfg, err := config.LoadAll(*cfgPath, getenv)
	if err != nil {
		return err
	}
	dsn := getenv("DATABASE_URL")
	if dsn == "" {
		pg, err := localpg.Start(ctx, filepath.Join(*data, "pg"), localpg.Options{Port: *pgPort})
		if err != nil {
			return err
		}
		defer pg.Stop()
		if err := createDatabase(ctx, pg.URL("postgres"), "effectd"); err != nil {
			return err
		}
		dsn = pg.URL("effectd")
	}
	ln, err := net.Listen("tcp", *sandboxAddr)
	if err != nil {
		return fmt.Errorf("dev: sandbox: %w", err)
	}
	sb := sandbox.New(sandbox.Options{WebhookSecret: getenv("SANDBOX_WEBHOOK_SECRET")})
	// The sandbox's Stripe sends its events to the ingress, as a Stripe
	// endpoint registered in the dashboard would.
	for _, c := range cfg.Ingress {
		if c.Provider == "stripe" {
			sb.SetStripeWebhook("http://"+*ingressAddr+"/ingress/stripe/"+c.Name, c.StripeSecret)
			break // one endpoint: the sandbox has one account
		}
	}
	go serveHTTP(ctx, ln, sb.Handler(), time.Second)

	tokens, err := adminTokens(*cfgPath, getenv, cfg.Access)
	if err != nil {
		return err
	}
	insecure := len(tokens) == 0
	if err := api.CheckBind(*addr, tokens, insecure); err != nil {
		return usagef("dev: %v", err)
	}
	fmt.Fprintf(stdout, `effectd dev:
  database   %s
  sandbox    http://%s   (ledger: curl http://%s/_sandbox/ledger)
  admin API  http://%s   (auth: %s)
  ingress    http://%s   (provider events: /ingress/twilio/{channel}, /ingress/stripe/{channel})
  try:       psql '%s' -c "SELECT effectd.enqueue(event_id => 'evt-1', channel => 'demo-hook', payload => '{\"hello\":\"world\"}')"
`, dsn, ln.Addr(), ln.Addr(), *addr, map[bool]string{true: "none, loopback only", false: "bearer token"}[insecure], *ingressAddr, dsn)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return serve(ctx, serveOptions{dsn: dsn, chans: cfg.Channels, addr: *addr, tokens: tokens, insecure: insecure,
		migrate: true, producers: cfg.Access.Producers, drain: 10 * time.Second, log: log, stdout: stdout, ingressAddr: *ingressAddr, ingress: cfg.Ingress})
}

func withDefaults(getenv env, defaults map[string]string) env {
	return func(k string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return defaults[k]
	}
}

// createDatabase creates name on the server unless it exists.
func createDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}
