package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/providers/sandbox"
)

var binary string // effectd built once for the tests that run it as a process

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "effectd-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "effectd")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building effectd: %v\n%s", err, out)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	pgtest.Main(m)
}

const testSecret = "whsec_ZWZmZWN0ZC10ZXN0LXNlY3JldC1rZXktMTIzNA=="

func mapEnv(m map[string]string) env { return func(k string) string { return m[k] } }

// TestUsageAndExitCodes: --help exits 0, bad usage 2, runtime failure 1, with one line on stderr.
func TestUsageAndExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badCfg := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badCfg, []byte("channels:\n  x:\n    provider: carrier-pigeon\n"), 0o600)
	cases := []struct {
		args   []string
		env    map[string]string
		code   int
		stderr string
	}{
		{[]string{"version"}, nil, 0, ""},
		{[]string{"serve", "--help"}, nil, 0, ""},
		{[]string{"migrate", "--help"}, nil, 0, ""},
		{[]string{"sandbox", "--help"}, nil, 0, ""},
		{[]string{}, nil, 2, "no command"},
		{[]string{"frobnicate"}, nil, 2, "unknown command"},
		{[]string{"serve", "--bogus"}, nil, 2, "flag provided but not defined"},
		{[]string{"migrate"}, nil, 2, "DATABASE_URL is not set"},
		{[]string{"sandbox", "--addr", "0.0.0.0:9999"}, nil, 2, "not a loopback address"},
		{[]string{"serve", "--config", badCfg}, map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x"}, 1, `channels.x.provider: line 3: unknown provider "carrier-pigeon"`},
		{[]string{"migrate"}, map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/x?connect_timeout=1"}, 1, "database"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		// An unreachable database is retried until the context ends: keep it short.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := run(ctx, c.args, mapEnv(c.env), &stdout, &stderr)
		cancel()
		code := exitCode(err, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("effectd %v: exit %d, stderr %q; want exit %d containing %q", c.args, code, stderr.String(), c.code, c.stderr)
		}
	}
}

// proc is an effectd process started by a test.
type proc struct {
	cmd   *exec.Cmd
	admin chan string // the admin API's URL, once printed
	out   *bytes.Buffer
}

func startProc(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	var logs bytes.Buffer
	var mu sync.Mutex
	cmd.Stdout = pw
	cmd.Stderr = &lockedWriter{w: &logs, mu: &mu}
	p := &proc{cmd: cmd, admin: make(chan string, 1), out: &logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "effectd: admin API on "); ok {
				p.admin <- u
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		pw.Close()
		mu.Lock()
		out := logs.String()
		mu.Unlock()
		for _, leak := range leaks(out, cmd.Env) {
			t.Errorf("effectd %v logged %s", args, leak)
		}
		if t.Failed() {
			t.Logf("effectd %v logs:\n%s", args, lastN(out, 4000))
		}
	})
	return p
}

// secretVar names the environment variables whose values must never be logged.
var secretVar = regexp.MustCompile(`(TOKEN|SECRET|API_KEY|PASSWORD)[^=]*$`)

// phoneNumber is a full E.164 number; logs may show at most a masked one.
var phoneNumber = regexp.MustCompile(`\+[1-9][0-9]{7,14}`)

// leaks lists what logs reveal: the value of a secret variable of env, or a
// full phone number.
func leaks(logs string, env []string) []string {
	var out []string
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if secretVar.MatchString(name) && len(value) >= 6 && strings.Contains(logs, value) {
			out = append(out, "the value of "+name)
		}
	}
	if m := phoneNumber.FindString(logs); m != "" {
		out = append(out, "a full phone number ("+m[:4]+"…)")
	}
	return out
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func lastN(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (p *proc) waitAdmin(t *testing.T) string {
	t.Helper()
	select {
	case u := <-p.admin:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("effectd did not start its admin API within 30s")
		return ""
	}
}

func runBinary(t *testing.T, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("effectd %v: %v\n%s", args, err, out)
	}
}

func poll(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSIGKILLLosesNothing: effectd serve is killed with SIGKILL during a burst
// of webhook intents. After a restart every intent ends SENT and each key is
// applied exactly once at the receiver.
func TestSIGKILLLosesNothing(t *testing.T) {
	t.Parallel()
	const events = 1500
	sb := sandbox.New(sandbox.Options{WebhookSecret: testSecret})
	sb.Faults.Set("webhook", sandbox.Fault{Latency: 5 * time.Millisecond})
	srv := httptest.NewServer(sb.Handler())
	defer srv.Close()

	dsn := pgtest.URL(t)
	cfg := filepath.Join(t.TempDir(), "effectd.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`channels:
  hook:
    provider: webhook
    webhook: { url: %q, secret_env: HOOK_SECRET }
    policy: { in_doubt: resend, lease: 2s, concurrency: 32, backoff: { base: 100ms, max: 1s } }
`, srv.URL+"/hooks/crash")), 0o600)
	env := []string{"DATABASE_URL=" + dsn, "HOOK_SECRET=" + testSecret, "EFFECTD_CONFIG=" + cfg}
	runBinary(t, env, "migrate")

	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()

	first := startProc(t, env, "serve", "--addr", "127.0.0.1:0", "--insecure-no-auth")
	first.waitAdmin(t)

	produced := make(chan error, 1)
	go func() {
		for i := range events {
			_, err := pool.Exec(ctx, `SELECT effectd.enqueue(event_id => $1, channel => 'hook', payload => $2::jsonb)`,
				fmt.Sprintf("evt-%d", i), fmt.Sprintf(`{"n":%d}`, i))
			if err != nil {
				produced <- err
				return
			}
		}
		produced <- nil
	}()
	poll(t, 30*time.Second, "some effects applied before the kill", func() bool {
		return len(sb.Ledger.Snapshot("webhook").Effects) >= 200
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.cmd.Wait()
	// What the kill interrupted: only these rows may be delivered twice.
	inFlight := map[string]bool{}
	var sentAtKill int
	rows, err := pool.Query(ctx, `SELECT idempotency_key, status FROM effectd.intents WHERE status IN ('SENDING', 'SENT')`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var key, status string
		if err := rows.Scan(&key, &status); err != nil {
			t.Fatal(err)
		}
		if status == "SENT" {
			sentAtKill++
		} else {
			inFlight[key] = true
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if sentAtKill >= events {
		t.Fatalf("the kill came after the burst: %d of %d intents were SENT already", sentAtKill, events)
	}

	second := startProc(t, env, "serve", "--addr", "127.0.0.1:0", "--insecure-no-auth")
	second.waitAdmin(t)
	poll(t, 60*time.Second, "every intent SENT after the restart", func() bool {
		var n int
		pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE status = 'SENT'`).Scan(&n)
		return n == events
	})
	applied := map[string]int{}
	for _, e := range sb.Ledger.Snapshot("webhook").Effects {
		applied[e.Key] += e.Applied
	}
	if len(applied) != events {
		t.Errorf("receiver applied %d distinct keys, want %d", len(applied), events)
	}
	for k, n := range applied {
		if n != 1 {
			t.Errorf("key %s applied %d times", k, n)
		}
	}
	// The receiver drops a repeated webhook-id, so effects cannot show a
	// duplicate delivery: every delivery that applied nothing must be of a row
	// the kill left SENDING (in_doubt: resend), or of one whose earlier call
	// effectd recorded as not known to have succeeded (a call that timed out
	// on a loaded machine is retried with the same key), and of no other.
	retried := map[string]bool{}
	rows, err = pool.Query(ctx, `SELECT DISTINCT i.idempotency_key FROM effectd.attempts a
		JOIN effectd.intents i ON i.id = a.intent_id WHERE a.kind = 'send' AND a.outcome <> 'sent'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var key string
		if err := rows.Scan(&key); err != nil {
			t.Fatal(err)
		}
		retried[key] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range sb.Ledger.Snapshot("webhook").Calls {
		if !c.Applied && !inFlight[c.Key] && !retried[c.Key] {
			t.Errorf("key %s delivered again (status %d) although it was not in flight at the kill and no earlier call of it was recorded as failed", c.Key, c.Status)
		}
	}
	// SIGTERM drains and exits 0.
	second.cmd.Process.Signal(syscall.SIGTERM)
	if err := second.cmd.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v", err)
	}
}

// TestServeInProcess calls run as main does and polls /readyz.
func TestServeInProcess(t *testing.T) {
	t.Parallel()
	sb := httptest.NewServer(sandbox.New(sandbox.Options{WebhookSecret: testSecret}).Handler())
	defer sb.Close()
	dsn := pgtest.URL(t)
	cfg := filepath.Join(t.TempDir(), "effectd.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("channels:\n  hook:\n    provider: webhook\n    webhook: { url: %q, secret_env: HOOK_SECRET }\n", sb.URL+"/hooks/x")), 0o600)
	vars := map[string]string{"DATABASE_URL": dsn, "HOOK_SECRET": testSecret, "EFFECTD_ADMIN_TOKEN": "s3cret"}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", cfg, "--addr", "127.0.0.1:0", "--migrate"}, mapEnv(vars), pw, io.Discard)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var admin string
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "effectd: admin API on "); ok {
			admin = u
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if admin == "" {
		cancel()
		t.Fatalf("serve exited before listening: %v", <-done)
	}
	poll(t, 10*time.Second, "/readyz answers 200", func() bool {
		resp, err := http.Get(admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	resp, err := http.Get(admin + "/v1/intents")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/v1/intents without a token: %d, want 401", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run returned %v after cancel, want nil", err)
	}
}
