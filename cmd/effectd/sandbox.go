package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/effectd/effectd/providers/sandbox"
)

func runSandbox(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9090", "loopback address to listen on")
	secretEnv := fs.String("webhook-secret-env", "SANDBOX_WEBHOOK_SECRET", "environment variable holding the Standard Webhooks secret the receiver verifies (unset: accept unsigned)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if err := loopbackOnly(*addr); err != nil {
		return usagef("sandbox: --addr: %v", err)
	}
	sb := sandbox.New(sandbox.Options{WebhookSecret: getenv(*secretEnv)})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	fmt.Fprintf(stdout, "effectd sandbox: listening on http://%s (ledger at /_sandbox/ledger)\n", ln.Addr())
	return serveHTTP(ctx, ln, sb.Handler(), 5*time.Second)
}

// loopbackOnly refuses an address that is not on the loopback interface.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address", host)
	}
	return nil
}
