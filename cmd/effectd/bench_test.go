package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/cmd/effectd/internal/bench"
)

// soakLine matches one line of the soak: min, offered, sent, late, p50, p99 |
// intents heap MB, index MB, rows, dead, autovac | attempts MB, dead, autovac | RSS MB.
var soakLine = regexp.MustCompile(`^\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+) \|\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\d+)\s+(\d+) \|\s+([\d.]+)\s+(\d+)\s+(\d+) \|\s+([\d.]+)$`)

// TestBenchSoakAndStartup runs the startup scenario and a few seconds of soak
// with a line every 500 ms: the lines come with plausible figures, every event
// reaches the sandbox once, and the verdict is computed (FAIL here: a run this
// short cannot reach the table's steady size, and says so; its p99 rule may
// fail too on a busy machine).
func TestBenchSoakAndStartup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := bench.Run(ctx, bench.Options{
		Binary: binary, Scenarios: []string{"startup", "soak"}, Producers: 8, Concurrency: 64,
		StartupEvents: 200, StartupRuns: 2,
		SoakRate: 200, SoakDuration: 3 * time.Second, SoakInterval: 500 * time.Millisecond, SoakRetention: time.Second,
	}, &out)
	t.Logf("effectd bench:\n%s", out.String())
	if err == nil || !strings.HasPrefix(err.Error(), "soak: FAIL: ") || !strings.Contains(err.Error(), "too short to judge the size") ||
		strings.Contains(err.Error(), "lost") {
		t.Fatalf("err = %v, want the soak's FAIL for a run too short to judge the size", err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`exec → first provider call: min \d+ ms, median \d+ ms, max \d+ ms`),
		regexp.MustCompile(`exec → /readyz answers 200: min \d+ ms, median \d+ ms, max \d+ ms`),
		regexp.MustCompile(`p99 commit → provider: first 1 lines [\d.]+ ms, last 1 lines [\d.]+ ms`),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("output lacks %q", want)
		}
	}
	var lines, offered, sent int
	var lastHeap float64 // intents heap + indexes on the last line, MB
	for _, l := range strings.Split(out.String(), "\n") {
		m := soakLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		lines++
		f := func(i int) float64 { v, _ := strconv.ParseFloat(m[i], 64); return v }
		if int(f(1)) != lines {
			t.Errorf("line %d numbered %s", lines, m[1])
		}
		offered += int(f(2))
		sent += int(f(3))
		if f(3) > 0 && (f(6) <= 0 || f(6) < f(5) || f(6) > 5000) {
			t.Errorf("implausible p50 %s / p99 %s ms: %q", m[5], m[6], l)
		}
		if f(15) < 5 {
			t.Errorf("effectd serve's RSS under 5 MB: %q", l)
		}
		lastHeap = f(7) + f(8)
	}
	if lastHeap < 0.1 {
		t.Errorf("the intents table and its indexes take %.1f MB after 600 intents", lastHeap)
	}
	// A busy machine may not offer all 600 slots in 3 s (217 under -race beside
	// the other packages' tests on two cores); what it offered must all arrive.
	m := regexp.MustCompile(`(\d+) of 600 events offered; applied once each per the sandbox's ledger: lost 0, duplicates 0`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no integrity line with lost 0, duplicates 0")
	}
	if total, _ := strconv.Atoi(m[1]); lines != 6 || offered != total || sent != total || total < 100 {
		t.Errorf("%d lines offering %d and sending %d of %s offered, want 6 lines and the same figure (at least 100) thrice", lines, offered, sent, m[1])
	}
}

// scaleLine matches one read of the scale scenario: name, median at both
// sizes, ratio, budget.
var scaleLine = regexp.MustCompile(`^  (\S.*?)\s+([\d.]+)ms\s+([\d.]+)ms\s+([\d.]+)x\s+([\d.]+)x\s+(\d+)ms`)

// TestBenchScale runs the scale scenario on a small history: every read is
// timed at both sizes, through the admin API of a real effectd serve (the
// scenario itself fails unless /v1/stats counts what it loaded).
func TestBenchScale(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := bench.Run(ctx, bench.Options{Binary: binary, Scenarios: []string{"scale"}, ScaleRows: 20_000, ScaleRuns: 3,
		Events: 500, Producers: 4, Concurrency: 16, Rate: 100, Duration: time.Second}, &out)
	t.Logf("effectd bench:\n%s", out.String())
	// The verdict on times is the benchmark's, not this test's: on a busy
	// machine a read of a millisecond may take six. Any other error fails.
	if err != nil && !strings.Contains(err.Error(), "figures broke their budget or grew with history") {
		t.Fatalf("scale: %v", err)
	}
	reads := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if m := scaleLine.FindStringSubmatch(l); m != nil {
			reads++
			if v, _ := strconv.ParseFloat(m[3], 64); v <= 0 {
				t.Errorf("read %q timed at %s ms", m[1], m[3])
			}
		}
	}
	if reads < 23 {
		t.Errorf("%d reads timed, want every read of the scenario (23)", reads)
	}
	if !strings.Contains(out.String(), "scale: 20000 retained intents loaded") {
		t.Errorf("output lacks the load of 20,000 intents")
	}
	if !regexp.MustCompile(`drain of 500, two rounds: \d+ · \d+ intents/s on 20000 retained, \d+ · \d+ on an empty table`).MatchString(out.String()) {
		t.Errorf("output lacks the drain on history against an empty table")
	}
	if !regexp.MustCompile(`live at 100/s for 1s, p99 commit → provider, 3 rounds each: [\d.]+ · [\d.]+ · [\d.]+ ms on 20000 retained`).MatchString(out.String()) {
		t.Errorf("output lacks the live latency on history against an empty table")
	}
	if m := regexp.MustCompile(`prune: (\d+) partitions \((\d+) intents, the four oldest days, in 3 rounds\) dropped`).FindStringSubmatch(out.String()); m == nil || m[1] == "0" || m[2] == "0" {
		t.Errorf("output lacks the drop of the four oldest days' partitions, or it dropped no intent")
	}
}
