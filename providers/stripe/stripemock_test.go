package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stripeMockVersion is the stripe-mock this test installs when none is found.
const stripeMockVersion = "v0.203.0"

// stripeMockBinary finds stripe-mock on PATH or in GOPATH/bin, or installs it
// into a temporary GOBIN. It skips the test when neither works.
func stripeMockBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			if p := filepath.Join(dir, "bin", "stripe-mock"); isExecutable(p) {
				return p
			}
		}
	}
	gobin := t.TempDir()
	cmd := exec.Command("go", "install", "github.com/stripe/stripe-mock@"+stripeMockVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("stripe-mock is not on PATH or in GOPATH/bin, and `go install github.com/stripe/stripe-mock@%s` failed (%v): %s",
			stripeMockVersion, err, out)
	}
	t.Logf("installed stripe-mock %s in %v", stripeMockVersion, time.Since(start).Round(time.Millisecond))
	return filepath.Join(gobin, "stripe-mock")
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// startStripeMock runs stripe-mock on a free loopback port and returns its URL.
func startStripeMock(t *testing.T) string {
	t.Helper()
	bin := stripeMockBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-http-port", strconv.Itoa(port))
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stripe-mock: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return "http://" + addr
		}
		select {
		case <-exited:
			t.Fatalf("stripe-mock exited before listening on %s: %s", addr, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("stripe-mock did not listen on %s within 30s: %s", addr, logs.String())
		}
	}
}

// TestStripeMock sends each effect to stripe-mock, which validates every
// request against Stripe's OpenAPI description: a 2xx proves its shape.
func TestStripeMock(t *testing.T) {
	if testing.Short() {
		t.Skip("stripe-mock test skipped in -short mode")
	}
	url := startStripeMock(t)
	p, err := New(Config{APIKey: "sk_test_123", BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ payload, prefix string }{
		{`{"type":"refund","payment_intent":"pi_123","amount":500,"reason":"requested_by_customer"}`, "re_"},
		{`{"type":"refund","charge":"ch_123"}`, "re_"},
		{`{"type":"payment_intent","amount":1200,"currency":"usd","customer":"cus_123","payment_method":"pm_card_visa","confirm":true,"off_session":true}`, "pi_"},
		{`{"type":"transfer","amount":700,"currency":"usd","destination":"acct_123"}`, "tr_"},
	} {
		ref, err := p.Send(context.Background(), "refunds:evt-"+tc.prefix, json.RawMessage(tc.payload), meta("evt-"+tc.prefix))
		if err != nil {
			t.Errorf("stripe-mock refused %s: %v", tc.payload, err)
			continue
		}
		if !strings.HasPrefix(ref, tc.prefix) {
			t.Errorf("%s: ref %q, want prefix %q", tc.payload, ref, tc.prefix)
		}
	}
	// The list and search requests of Lookup must be valid too. stripe-mock's
	// fixtures carry none of our metadata: a list proves the refund, transfer or
	// payment intent absent; a search, being eventually consistent, cannot tell.
	old := time.Now().Add(-48 * time.Hour)
	for _, c := range []struct{ payload, wantErr string }{
		{`{"type":"refund","payment_intent":"pi_123"}`, ""},
		{`{"type":"transfer","amount":700,"currency":"usd","destination":"acct_123"}`, ""},
		{`{"type":"payment_intent","amount":1200,"currency":"usd","customer":"cus_123"}`, ""},
		{`{"type":"payment_intent","amount":1200,"currency":"usd"}`, "eventually consistent"},
	} {
		ref, found, err := p.Lookup(context.Background(), "k", json.RawMessage(c.payload), meta("evt-lookup"), old, old)
		var se *Error
		switch {
		case errors.As(err, &se):
			t.Errorf("stripe-mock refused the lookup of %s: %v", c.payload, err)
		case c.wantErr == "" && (err != nil || found):
			t.Errorf("lookup of %s = %q, %v, %v; want absent", c.payload, ref, found, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("lookup of %s: %v; want an error saying %q", c.payload, err, c.wantErr)
		}
	}
}
