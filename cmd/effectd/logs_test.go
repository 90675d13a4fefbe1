package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/providers/sandbox"
)

// TestLeaksFinds: the log scan that every test running effectd serve applies
// (startProc) finds a secret's value and a full phone number.
func TestLeaksFinds(t *testing.T) {
	env := []string{"STRIPE_API_KEY=sk_test_abcdef", "EFFECTD_ADMIN_TOKEN=admin-xyz", "HOOK_SECRET=whsec_123456", "DATABASE_URL=postgres://x"}
	got := leaks(`{"msg":"x","key":"sk_test_abcdef","to":"+15005550006"} Bearer admin-xyz`, env)
	if len(got) != 3 {
		t.Fatalf("leaks = %q; want the Stripe key, the admin token and the phone number", got)
	}
	if got := leaks(`{"msg":"sent","to":"+1500***0006","port":54321}`, env); len(got) != 0 {
		t.Fatalf("leaks in a clean log = %q", got)
	}
}

// TestServeLogsRevealNoSecrets: effectd serve at debug level sends SMS and
// refunds that succeed, fail and are retried, with every secret set; its
// logs (scanned by startProc when the test ends) show no secret, token or full
// phone number.
func TestServeLogsRevealNoSecrets(t *testing.T) {
	t.Parallel()
	sb := sandbox.New(sandbox.Options{})
	sb.Faults.Set("stripe", sandbox.Fault{ErrorRate: 1, ErrorStatus: 503, Times: 2})
	srv := httptest.NewServer(sb.Handler())
	defer srv.Close()
	dsn := pgtest.URL(t)
	cfg := filepath.Join(t.TempDir(), "effectd.yaml")
	yaml := fmt.Sprintf(`channels:
  sms:
    provider: twilio
    twilio: { from: "+15005550006", base_url: %q }
    policy: { backoff: { base: 10ms, max: 50ms } }
  refund:
    provider: stripe
    stripe: { base_url: %q }
    policy: { backoff: { base: 10ms, max: 50ms } }
`, srv.URL, srv.URL)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"DATABASE_URL=" + dsn, "EFFECTD_CONFIG=" + cfg, "EFFECTD_LOG_LEVEL=debug",
		"STRIPE_API_KEY=sk_test_logscan_secret", "TWILIO_ACCOUNT_SID=AC" + strings.Repeat("7", 32), "TWILIO_AUTH_TOKEN=twiliologscansecret",
		"EFFECTD_ADMIN_TOKEN=admin-logscan-token"}
	runBinary(t, env, "migrate")
	p := startProc(t, env, "serve", "--addr", "127.0.0.1:0")
	admin := p.waitAdmin(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()
	for _, e := range []struct{ event, channel, payload string }{
		{"sms-ok", "sms", `{"to":"+15005550006","body":"Your code is 123456"}`},
		{"sms-invalid", "sms", `{"to":"+15005550001","body":"Your code is 654321"}`}, // 21211: invalid number
		{"refund-retried", "refund", `{"type":"refund","payment_intent":"pi_logs","amount":500}`},
	} {
		if _, err := pool.Exec(ctx, `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => $3::jsonb)`, e.event, e.channel, e.payload); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, 20*time.Second, "every intent settled", func() bool {
		var open int
		pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE status NOT IN ('SENT', 'FAILED')`).Scan(&open)
		return open == 0
	})
	// An admin request that fails, so the API logs too.
	do(t, "GET", admin+"/v1/intents/999999", "admin-logscan-token", nil)
	do(t, "GET", admin+"/v1/intents", "wrong-token", nil)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
	var failed int
	pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE status = 'FAILED' AND event_id = 'sms-invalid'`).Scan(&failed)
	if failed != 1 {
		t.Errorf("the SMS to an invalid number did not fail: the logs saw no provider error")
	}
}

// TestPublicAddressWithoutToken: effectd serve on a non-loopback address
// without an admin token exits 2 with one line saying why, and listens on
// nothing; --insecure-no-auth does not change that off loopback.
func TestPublicAddressWithoutToken(t *testing.T) {
	t.Parallel()
	dsn := pgtest.URL(t)
	cfg := filepath.Join(t.TempDir(), "effectd.yaml")
	if err := os.WriteFile(cfg, []byte("channels:\n  hook:\n    provider: webhook\n    webhook: { url: 'http://127.0.0.1:1/x', secret_env: HOOK_SECRET }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve", "--addr", "0.0.0.0:0"},
		{"serve", "--addr", "0.0.0.0:0", "--insecure-no-auth"},
	} {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "EFFECTD_CONFIG="+cfg, "HOOK_SECRET="+testSecret, "EFFECTD_READ_TOKEN=read-only-token")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], "0.0.0.0:0") || strings.Contains(stdout.String(), "admin API on") {
			t.Errorf("effectd %v: exit %d, stderr %q, stdout %q; want exit 2 with one line naming the address", args, code, stderr.String(), stdout.String())
		}
	}
}
