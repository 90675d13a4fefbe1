package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// mutation is one deliberate break of a guarantee, and the tests that must
// notice it.
type mutation struct {
	name string // what breaks, e.g. "complete: fence on attempts removed"
	file string // the file to mutate, from the repository's root; a glob picks the last match holding from
	from string // a small, stable snippet that must occur exactly once in the file
	to   string // what replaces it
	pkg  string // the package whose tests must fail, e.g. ./dispatcher/
	run  string // go test -run pattern
	tags string // go test -tags, e.g. citus for the distributed mode's tests (the *_citus_test.go files); "" for none
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	only := fs.String("only", "", "run only the mutations whose name matches this regular expression")
	list := fs.Bool("list", false, "print the mutations and exit")
	check := fs.Bool("check", false, "only check that every snippet is found exactly once (fast; no tests run)")
	race := fs.Bool("race", false, "run the tests with -race (slower)")
	verbose := fs.Bool("v", false, "print the test output of every mutation")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound on each mutation's go test")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	root, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 1
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		fmt.Fprintln(stderr, "mutate: run it from the repository's root (no go.mod here)")
		return 2
	}
	todo, err := pick(*only)
	if err != nil {
		fmt.Fprintln(stderr, "mutate: -only:", err)
		return 2
	}
	switch {
	case *list:
		for _, m := range todo {
			fmt.Fprintf(stdout, "%-58s %s  go test%s -run '%s' %s\n", m.name, m.file, tagsFlag(m.tags), m.run, m.pkg)
		}
		return 0
	case *check:
		return checkStale(root, todo, stdout)
	}
	return runAll(root, todo, *race, *verbose, *timeout, stdout, stderr)
}

// pick returns the mutations whose name matches the regular expression only
// (every mutation when only is empty).
func pick(only string) ([]mutation, error) {
	if only == "" {
		return mutations, nil
	}
	re, err := regexp.Compile(only)
	if err != nil {
		return nil, err
	}
	var todo []mutation
	for _, m := range mutations {
		if re.MatchString(m.name) {
			todo = append(todo, m)
		}
	}
	return todo, nil
}

// checkStale reports each mutation of todo whose snippet is not found exactly
// once; it exits 1 when one is.
func checkStale(root string, todo []mutation, stdout io.Writer) int {
	stale := 0
	for _, m := range todo {
		if _, _, err := locate(root, m); err != nil {
			fmt.Fprintf(stdout, "stale     %-58s %v\n", m.name, err)
			stale++
		}
	}
	fmt.Fprintf(stdout, "%d mutations, %d stale\n", len(todo), stale)
	if stale > 0 {
		return 1
	}
	return 0
}

// runAll applies each mutation of todo in turn, runs its tests, and prints
// its verdict; it exits 1 when one was not killed.
func runAll(root string, todo []mutation, race, verbose bool, timeout time.Duration, stdout, stderr io.Writer) int {
	scratch, err := os.MkdirTemp("", "effectd-mutate-")
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 1
	}
	defer os.RemoveAll(scratch)

	start := time.Now()
	counts := map[string]int{}
	var bad []string
	for i, m := range todo {
		t0 := time.Now()
		verdict, detail, out := try(root, scratch, i, m, race, timeout)
		counts[verdict]++
		fmt.Fprintf(stdout, "%-9s %-58s %6.1fs  %s\n", verdict, m.name, time.Since(t0).Seconds(), detail)
		if verdict != "killed" {
			bad = append(bad, m.name)
		}
		if verbose || verdict == "invalid" {
			fmt.Fprintln(stdout, indent(out))
		}
	}
	fmt.Fprintf(stdout, "\n%d mutations in %s: %d killed, %d survived, %d stale, %d invalid\n",
		len(todo), time.Since(start).Round(time.Second), counts["killed"], counts["survived"], counts["stale"], counts["invalid"])
	if len(bad) > 0 {
		fmt.Fprintf(stdout, "not killed: %s\n", strings.Join(bad, "; "))
		return 1
	}
	return 0
}

// try applies m in an overlay and runs its tests. verdict is killed,
// survived, stale (the snippet is not in the file exactly once) or invalid
// (the mutated tree does not build).
func try(root, scratch string, i int, m mutation, race bool, timeout time.Duration) (verdict, detail, out string) {
	path, src, err := locate(root, m)
	if err != nil {
		return "stale", err.Error(), ""
	}
	mutated := strings.Replace(src, m.from, m.to, 1)
	dir := filepath.Join(scratch, fmt.Sprint(i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "invalid", err.Error(), ""
	}
	copyPath := filepath.Join(dir, filepath.Base(path))
	overlay := filepath.Join(dir, "overlay.json")
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {path: copyPath}})
	if err := errors.Join(os.WriteFile(copyPath, []byte(mutated), 0o644), os.WriteFile(overlay, ov, 0o644)); err != nil {
		return "invalid", err.Error(), ""
	}
	args := []string{"test", "-count=1", "-timeout", timeout.String(), "-run", m.run}
	if race {
		args = append(args, "-race")
	}
	if m.tags != "" {
		args = append(args, "-tags", m.tags)
	}
	args = append(args, m.pkg)
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	// The overlay goes through GOFLAGS rather than the command line, so that a
	// test which builds effectd itself (go build in cmd/effectd's TestMain)
	// builds and runs the mutated binary too.
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -overlay="+overlay))
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	out = buf.String()
	rel, _ := filepath.Rel(root, path)
	switch {
	case err == nil:
		if strings.Contains(out, "no tests to run") {
			return "invalid", rel + ": -run " + m.run + " matches no test", out
		}
		return "survived", rel + ": go test" + tagsFlag(m.tags) + " -run '" + m.run + "' " + m.pkg + " passed", out
	case strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]") || strings.Contains(out, "build failed"):
		return "invalid", rel + ": the mutated tree does not build", out
	}
	return "killed", rel + ": " + failed(out), out
}

// locate returns the file m mutates and its text: the file itself, or for a
// glob the last match (in name order, so the latest migration) that holds the
// snippet. The snippet must occur exactly once there.
func locate(root string, m mutation) (string, string, error) {
	matches, err := filepath.Glob(filepath.Join(root, m.file))
	if err != nil {
		return "", "", err
	}
	sort.Strings(matches)
	for j := len(matches) - 1; j >= 0; j-- {
		b, err := os.ReadFile(matches[j])
		if err != nil {
			return "", "", err
		}
		switch n := strings.Count(string(b), m.from); {
		case n == 1:
			if err := inForce(matches[j], string(b), m.from); err != nil {
				return "", "", err
			}
			return matches[j], string(b), nil
		case n > 1:
			return "", "", fmt.Errorf("%s: snippet %q occurs %d times; make it unique", m.file, m.from, n)
		}
	}
	return "", "", fmt.Errorf("%s: snippet %q not found; update the mutation list", m.file, m.from)
}

var (
	createStatement = regexp.MustCompile(`(?m)^CREATE `)
	createFunction  = regexp.MustCompile(`(?m)^CREATE (?:OR REPLACE )?FUNCTION\s+([\w.]+)\s*\(`)
)

// inForce refuses a snippet of a migration that lies in a function a later
// migration of the same directory defines again: the mutated function would
// be replaced before any test ran, and the mutation would survive for
// nothing (the enqueue's key boundary was once aimed at 014's enqueue, which
// 017 replaces). A snippet outside a function, or in one defined last here,
// is in force.
func inForce(file, text, from string) error {
	if !strings.HasSuffix(file, ".up.sql") {
		return nil
	}
	at := strings.Index(text, from)
	// the statement the snippet is in: the last to start at or before it
	last := -1
	for _, st := range createStatement.FindAllStringIndex(text[:at+len(from)], -1) {
		if st[0] <= at {
			last = st[0]
		}
	}
	if last < 0 {
		return nil
	}
	fn := createFunction.FindStringSubmatch(text[last : at+len(from)])
	if fn == nil {
		return nil
	}
	later, err := filepath.Glob(filepath.Join(filepath.Dir(file), "*.up.sql"))
	if err != nil {
		return err
	}
	sort.Strings(later)
	again := regexp.MustCompile(`(?m)^CREATE (?:OR REPLACE )?FUNCTION\s+` + regexp.QuoteMeta(fn[1]) + `\s*\(`)
	for _, l := range later {
		if l <= file {
			continue
		}
		b, err := os.ReadFile(l)
		if err != nil {
			return err
		}
		if again.Match(b) {
			return fmt.Errorf("%s: snippet %q is in %s, which %s defines again: mutate the function in force",
				filepath.Base(file), from, fn[1], filepath.Base(l))
		}
	}
	return nil
}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// failed names the tests that failed, or says what else ended the run.
func failed(out string) string {
	var names []string
	for _, m := range failLine.FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	switch {
	case len(names) > 0:
		if len(names) > 4 {
			names = append(names[:4], "…")
		}
		return "failed " + strings.Join(names, ", ")
	case strings.Contains(out, "panic: test timed out"):
		return "timed out"
	case strings.Contains(out, "panic:"):
		return "panicked"
	}
	return "failed"
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// tagsFlag is the -tags flag of a mutation's go test, as printed.
func tagsFlag(tags string) string {
	if tags == "" {
		return ""
	}
	return " -tags " + tags
}
