package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/cmd/effectd/internal/bench"
)

// TestBenchBreakdown runs the breakdown scenario on 500 intents and a live
// part of 2 s, serve's /metrics scraped during the drain: every section is
// printed, and every figure in it is a finite, non-negative number, with the
// rows each section must have.
func TestBenchBreakdown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := bench.Run(ctx, bench.Options{Binary: binary, Scenarios: []string{"breakdown"}, BreakdownEvents: 500,
		Producers: 4, Concurrency: 16, Rate: 100, Duration: 2 * time.Second, BreakdownScrape: 50 * time.Millisecond}, &out)
	t.Logf("effectd bench:\n%s", out.String())
	if err != nil {
		t.Fatalf("breakdown: %v", err)
	}
	for _, problem := range checkBreakdown(out.String(), 200) {
		t.Error(problem)
	}
	if m := regexp.MustCompile(`serve's /metrics scraped every 50ms during the drain, (\d+) times`).FindStringSubmatch(out.String()); m == nil || m[1] == "0" {
		t.Errorf("no scrape of /metrics during the drain reported: %v", m)
	}
}

// breakdownSections are the headings of the breakdown's tables (their
// start), with the rows (by their first cell's start) each must hold.
var breakdownSections = []struct {
	heading string
	rows    []string
}{
	{"CPU by process", []string{"effectd serve", "PostgreSQL: client backends", "PostgreSQL, all processes", "bench process", "total"}},
	{"PostgreSQL statements in the enqueue", []string{"Calls effectd.enqueue", "all top-level statements"}},
	{"PostgreSQL statements in the drain", []string{"Claim up to", "Applies a batch of dispatcher outcomes", "all top-level statements"}},
	{"effectd serve CPU by feature", []string{"signing", "JSON", "metrics", "tracing", "pgx", "HTTP client", "dispatcher loops",
		"GC and allocation", "system calls", "Go scheduler", "total sampled"}},
	{"Live latency by stage", []string{"commit → claim starts", "claim starts → call starts", "call starts → provider receives",
		"provider receives → answer back", "answer back → completion starts", "total: commit → provider receives", "total: commit → completion starts"}},
}

// checkBreakdown lists what is wrong with a breakdown's output whose live
// part offered live events: a section or row missing, a figure negative or
// not finite, totals that are zero, or a stage whose p99 is under its p50.
func checkBreakdown(out string, live int) []string {
	var problems []string
	tables := breakdownTables(out)
	for _, s := range breakdownSections {
		rows, ok := tables[s.heading]
		if !ok {
			problems = append(problems, fmt.Sprintf("no section %q", s.heading))
			continue
		}
		for _, want := range s.rows {
			if _, ok := rows[want]; !ok {
				problems = append(problems, fmt.Sprintf("section %q lacks the row %q", s.heading, want))
			}
		}
		for label, figures := range rows {
			for _, f := range figures {
				if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
					problems = append(problems, fmt.Sprintf("section %q, row %q: figure %v", s.heading, label, f))
				}
			}
		}
	}
	positive := func(section, row string, col int) {
		if f := tables[section][row]; len(f) <= col || f[col] <= 0 {
			problems = append(problems, fmt.Sprintf("section %q, row %q: figure %d is %v, want above 0", section, row, col, f))
		}
	}
	// The statements run inside enqueue are listed too (track = all): begin,
	// the call, commit, and at least the intent's and its key's inserts.
	if n := len(tables["PostgreSQL statements in the enqueue"]); n < 7 {
		problems = append(problems, fmt.Sprintf("the enqueue's table has %d rows, want the nested statements too", n))
	}
	positive("CPU by process", "effectd serve", 0)
	positive("CPU by process", "PostgreSQL, all processes", 1)
	positive("PostgreSQL statements in the enqueue", "all top-level statements", 1)
	positive("PostgreSQL statements in the drain", "all top-level statements", 1)
	positive("effectd serve CPU by feature", "total sampled", 0)
	for label, f := range tables["Live latency by stage"] {
		if len(f) != 2 || f[1] < f[0] {
			problems = append(problems, fmt.Sprintf("stage %q: p50, p99 = %v", label, f))
		}
	}
	if !strings.Contains(out, fmt.Sprintf("%d events at 100/s for 2s on the same database, %d of them recorded", live, live)) {
		problems = append(problems, fmt.Sprintf("the live part did not record all %d events' stages", live))
	}
	return problems
}

// breakdownTables reads the breakdown's Markdown tables by section heading
// (as breakdownSections names them), each row's figures under its label: the
// first cell, shortened to the row name of breakdownSections it starts with.
// A cell that is not a number is left out; a table's header row is skipped.
func breakdownTables(out string) map[string]map[string][]float64 {
	tables := map[string]map[string][]float64{}
	var current map[string][]float64
	var wants []string
	header := false
	for _, line := range strings.Split(out, "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			current, wants, header = nil, nil, true
			for _, s := range breakdownSections {
				if strings.HasPrefix(h, s.heading) {
					current, wants = map[string][]float64{}, s.rows
					tables[s.heading] = current
				}
			}
			continue
		}
		if current == nil || !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "|---") {
			continue
		}
		if header {
			header = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		label := strings.TrimSpace(cells[0])
		for _, want := range wants {
			if strings.HasPrefix(label, want) {
				label = want
				break
			}
		}
		var figures []float64
		for _, c := range cells[1:] {
			c = strings.TrimSuffix(strings.TrimSpace(c), "%")
			if f, err := strconv.ParseFloat(c, 64); err == nil {
				figures = append(figures, f)
			}
		}
		current[label] = figures
	}
	return tables
}
