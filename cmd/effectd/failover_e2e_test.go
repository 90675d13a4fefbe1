package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/localpg"
	"github.com/effectd/effectd/providers/sandbox"
)

// TestServeFollowsFailover: effectd serve, given both servers of a primary and
// its streaming standby with target_session_attrs=read-write, follows the
// standby's promotion without a restart: /readyz answers 503 while the primary
// is dead and 200 once the standby is promoted, the wake-up listener listens
// on the new primary, and an SMS enqueued there is sent and its delivery
// recorded through the ingress.
func TestServeFollowsFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "effectd-failover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the postgres user must reach it when run as root
		t.Fatal(err)
	}
	primary, err := localpg.Start(ctx, filepath.Join(dir, "primary"), localpg.Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { primary.StopImmediate() })
	standby, err := primary.StartStandby(ctx, filepath.Join(dir, "standby"), "standby", localpg.Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { standby.Stop() })
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		primary.Port, standby.Port)

	sb := sandbox.New(sandbox.Options{WebhookSecret: testSecret})
	sb.SetTwilioQueueDelay(50 * time.Millisecond)
	sb.SetTwilioDeliveryDelay(50 * time.Millisecond)
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	ingressAddr := freeAddr(t)
	cfg := filepath.Join(t.TempDir(), "effectd.yaml")
	yaml := fmt.Sprintf(`channels:
  sms:
    provider: twilio
    twilio: { from: "+15005550006", base_url: %q, status_callback: %q }
    policy: { lease: 5s, backoff: { base: 50ms, max: 200ms } }
`, srv.URL, "http://"+ingressAddr+"/ingress/twilio/sms")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"DATABASE_URL=" + dsn, "EFFECTD_CONFIG=" + cfg, "EFFECTD_INGRESS_ADDR=" + ingressAddr,
		"TWILIO_ACCOUNT_SID=" + e2eTwilioSID, "TWILIO_AUTH_TOKEN=" + e2eTwilioToken}
	runBinary(t, env, "migrate")
	admin := startProc(t, env, "serve", "--addr", "127.0.0.1:0", "--insecure-no-auth").waitAdmin(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	readyz := func() int {
		c := http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get(admin + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// delivered enqueues an SMS and waits until the sandbox's status callback,
	// received by the ingress, has recorded it delivered.
	delivered := func(event string, n int) {
		t.Helper()
		poll(t, 10*time.Second, "enqueue "+event, func() bool {
			_, err := pool.Exec(ctx, `SELECT effectd.enqueue(event_id => $1, channel => 'sms', payload => $2::jsonb)`,
				event, fmt.Sprintf(`{"to":"+1555000%04d","body":"failover"}`, n))
			return err == nil
		})
		poll(t, 10*time.Second, event+" delivered", func() bool {
			var delivery string
			pool.QueryRow(ctx, `SELECT coalesce(delivery, '') FROM effectd.intents WHERE event_id = $1`, event).Scan(&delivery)
			return delivery == "delivered"
		})
	}
	listening := func() bool { // on the writable primary, where pool connects
		var n int
		pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN effectd_wakeup'`).Scan(&n)
		return n > 0
	}

	delivered("before", 1)
	if !listening() {
		t.Error("no wake-up listener on the primary")
	}
	if code := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz before the failover: %d", code)
	}
	if err := primary.StopImmediate(); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "/readyz 503 with the primary dead and the standby read-only", func() bool {
		return readyz() == http.StatusServiceUnavailable
	})
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	poll(t, 10*time.Second, "/readyz 200 after the promotion", func() bool { return readyz() == http.StatusOK })
	t.Logf("/readyz 200 %s after the promotion", time.Since(promoted).Round(time.Millisecond))
	poll(t, 10*time.Second, "a wake-up listener on the new primary", func() bool { return listening() })
	delivered("after", 2)
}
