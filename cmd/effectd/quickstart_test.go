package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/internal/pgtest"
)

// TestReadmeQuickStart runs the README's first commands as a newcomer runs
// them with `make run` going: the enqueue, the sandbox's ledger, the intents
// table and the admin API; then the first commands of the command line from
// docs/operating.md ("Try it under `make run`"), until they show the intent
// SENT. The commands are read from the pages and run by bash as written; only
// the addresses `make run` uses are replaced by the test's own.
func TestReadmeQuickStart(t *testing.T) {
	for _, tool := range []string{"bash", "psql", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil && os.Getenv("CI") != "" {
			t.Fatalf("%s is not on PATH: the quick start uses it (.ci/run installs it)", tool)
		} else if err != nil {
			t.Skipf("%s is not on PATH: the quick start uses it", tool)
		}
	}
	t.Parallel()
	dsn := pgtest.URL(t)
	sandbox := freeLoopbackAddr(t)
	p := startProc(t, []string{"DATABASE_URL=" + dsn, "EFFECTD_CONFIG=effectd.example.yaml"}, "dev",
		"--addr", "127.0.0.1:0", "--ingress-addr", "127.0.0.1:0", "--sandbox-addr", sandbox)
	admin := p.waitAdmin(t)
	dir := t.TempDir() // the repository's root as the pages see it: ./effectd is the binary
	if err := os.Symlink(binary, filepath.Join(dir, "effectd")); err != nil {
		t.Fatal(err)
	}
	ours := strings.NewReplacer(
		"postgres://postgres@127.0.0.1:54329/effectd", dsn,
		"http://127.0.0.1:9090", "http://"+sandbox,
		"http://127.0.0.1:8080", admin,
	)
	run := func(script string) string {
		t.Helper()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", ours.Replace(script))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "EFFECTD_URL="+admin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v running:\n%s\noutput:\n%s", err, script, out)
		}
		return string(out)
	}

	out := run(shellBlock(t, "../../README.md", "effectd.enqueue(event_id => 'evt-1'"))
	if !regexp.MustCompile(`(?m)^ t$`).MatchString(out) {
		t.Errorf("the README's enqueue did not answer t:\n%s", out)
	}
	cli := shellBlock(t, "../../docs/operating.md", "./effectd intents list ")
	poll(t, 30*time.Second, "the command line showing evt-1 SENT", func() bool {
		out = run(cli)
		return strings.Contains(out, "evt-1") && strings.Contains(out, "SENT") && strings.Contains(out, "demo-hook")
	})
}

// shellBlock is the fenced sh block of the Markdown file at path that holds
// marker.
func shellBlock(t *testing.T, path, marker string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(block[1], marker) {
			return block[1]
		}
	}
	t.Fatalf("%s: no sh block holds %q", path, marker)
	return ""
}

// freeLoopbackAddr is a loopback address no listener holds right now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
