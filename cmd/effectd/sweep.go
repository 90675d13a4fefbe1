package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/effectd/effectd/effectdtype"
)

const sweepUsage = `Usage:
  effectd sweep --channel C --since T [--until T] [--json]

Lists what channel C's provider holds for the intents created from --since to
--until (default now; at most 7 days) and joins it with the table: orphan
(a provider object no intent could own), duplicate (two objects for one
intent), unsettled (a SENDING, IN_DOUBT or FAILED intent whose effect the
provider holds), missing (a SENT intent whose effect the provider holds under
neither its reference nor its identity, whatever its time), uncertain (a SENT
intent whose effect the listing lacks and whose absence the provider could not
prove). Each finding names the operation that would settle it, and none
advises an action that could repeat an effect the provider may hold; the
sweep changes nothing. The report also says which spans of the window the
channel's scheduled sweeps covered.

T is an RFC 3339 time (2026-11-30T12:00:00Z) or a duration before now (90m, 24h).

Talks to the admin API at EFFECTD_URL (default http://127.0.0.1:8080) with the
bearer token EFFECTD_TOKEN. An error the API answers exits 1 and prints one line,
error: <code>: <message>.
`

// runSweep runs effectd sweep.
func runSweep(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(stdout, sweepUsage)
		return nil
	}
	c := newCLI(getenv, stdout)
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.BoolVar(&c.json, "json", false, "print the API's JSON instead of a report")
	channel := fs.String("channel", "", "the channel to sweep (required)")
	sinceFlag := fs.String("since", "", "the window's start: an RFC 3339 time or a duration before now (required)")
	untilFlag := fs.String("until", "", "the window's end: an RFC 3339 time or a duration before now (default now)")
	if _, err := parseArgs(fs, args, stdout); err != nil {
		return err
	}
	now := time.Now()
	if *channel == "" {
		fmt.Fprint(stderr, sweepUsage)
		return usagef("sweep: --channel is required")
	}
	if *sinceFlag == "" {
		fmt.Fprint(stderr, sweepUsage)
		return usagef("sweep: --since is required")
	}
	since, err := parseWhen("--since", *sinceFlag, now)
	if err != nil {
		return err
	}
	var until time.Time
	if *untilFlag != "" {
		if until, err = parseWhen("--until", *untilFlag, now); err != nil {
			return err
		}
	}
	rep, err := c.api.Sweep(ctx, *channel, since, until)
	if err != nil {
		return err
	}
	return c.print(rep, func(w io.Writer) { printSweep(w, rep) })
}

// parseWhen reads a time flag: RFC 3339, or a duration before now.
func parseWhen(flagName, s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("sweep: %s: want an RFC 3339 time (2026-11-30T12:00:00Z) or a duration before now (90m), got %q", flagName, s)
}

// printSweep prints a report for people: the window, the counts, then each
// finding with its provider objects and the operation that settles it.
func printSweep(w io.Writer, rep effectdtype.SweepReport) {
	fmt.Fprintf(w, "channel %s (%s), intents created %s to %s: %d intents, %d provider objects (listed %s to %s)\n",
		rep.Channel, rep.Provider, rep.Since.Format(time.RFC3339), rep.Until.Format(time.RFC3339), rep.Intents, rep.Objects,
		rep.ListedSince.Format(time.RFC3339), rep.ListedUntil.Format(time.RFC3339))
	var counts []string
	for _, k := range effectdtype.FindingKinds {
		counts = append(counts, fmt.Sprintf("%s %d", k, rep.Counts[k]))
	}
	fmt.Fprintln(w, strings.Join(counts, ", "))
	fmt.Fprintln(w, "scheduled sweeps: "+coverage(rep.Scheduled))
	if rep.Unlisted > 0 {
		fmt.Fprintf(w, "%d SENT intents not judged: the listing does not cover their effect\n", rep.Unlisted)
	}
	if len(rep.Findings) == 0 {
		fmt.Fprintln(w, "no findings: the provider and the table agree")
		return
	}
	tw := table(w, "KIND", "INTENT", "EVENT_ID", "STATUS", "PROVIDER_REF", "PROVIDER_OBJECTS")
	for _, f := range rep.Findings {
		var objs []string
		for _, o := range f.Objects {
			objs = append(objs, fmt.Sprintf("%s (%s, %s)", o.Ref, o.Summary, o.Created.UTC().Format(time.RFC3339)))
		}
		intent := "-"
		if f.IntentID != 0 {
			intent = fmt.Sprint(f.IntentID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Kind, intent, dash(f.EventID), dash(string(f.Status)), dash(f.ProviderRef), dash(strings.Join(objs, "; ")))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nwhat to do:")
	for _, f := range rep.Findings {
		who := "orphan " + f.Objects[0].Ref
		if f.IntentID != 0 {
			who = fmt.Sprintf("%s intent %d", f.Kind, f.IntentID)
		}
		fmt.Fprintf(w, "  %s: %s\n", who, f.Operation)
	}
}

// coverage says which spans the scheduled sweeps covered, and the gaps.
func coverage(c effectdtype.SweepCoverage) string {
	spans := func(ws []effectdtype.SweepWindow) string {
		s := make([]string, len(ws))
		for i, w := range ws {
			s[i] = w.Since.Format(time.RFC3339) + " to " + w.Until.Format(time.RFC3339)
		}
		return strings.Join(s, ", ")
	}
	out := "covered none of this window"
	if len(c.Covered) > 0 {
		out = "covered " + spans(c.Covered)
	}
	if len(c.Gaps) > 0 {
		out += "; not covered " + spans(c.Gaps)
	}
	return out
}
