package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/statemachine"
)

const intentsUsage = `Usage:
  effectd intents list [--status S] [--channel C] [--delivery D] [--q TEXT] [--limit N] [--after ID] [--json]
  effectd intents show ID [--json]
  effectd intents resolve ID --as sent|resend|skip [--ref R] --reason TEXT [--force] [--event-id E] [--json]
  effectd intents retry ID [--reason TEXT] [--force] [--event-id E] [--json]
  effectd intents cancel ID [--reason TEXT] [--event-id E] [--json]
  effectd intents reconcile ID [--dry-run] [--json]

Talks to the admin API at EFFECTD_URL (default http://127.0.0.1:8080) with the
bearer token EFFECTD_TOKEN. An error the API answers exits 1 and prints one line,
error: <code>: <message>. A list that matches nothing says so.
`

const channelsUsage = `Usage:
  effectd channels list [--json]
  effectd channels show NAME [--json]
  effectd channels pause NAME [--json]
  effectd channels resume NAME [--json]

Talks to the admin API at EFFECTD_URL (default http://127.0.0.1:8080) with the
bearer token EFFECTD_TOKEN. An error the API answers exits 1 and prints one line,
error: <code>: <message>.
`

// cli is what every subcommand of intents and channels shares.
type cli struct {
	api    *client.Client
	stdout io.Writer
	json   bool
}

func newCLI(getenv env, stdout io.Writer) *cli {
	return &cli{api: &client.Client{BaseURL: cmpEnv(getenv("EFFECTD_URL"), "http://127.0.0.1:8080"), Token: getenv("EFFECTD_TOKEN")},
		stdout: stdout}
}

// parseArgs parses fs's flags wherever they stand among args, and returns
// exactly want positional arguments (named in names, for the message).
func parseArgs(fs *flag.FlagSet, args []string, stdout io.Writer, names ...string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintf(stdout, "Usage of effectd %s %s:\n", fs.Name(), strings.Join(names, " "))
			fs.PrintDefaults()
			return nil, errHelp
		}
		if err != nil {
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) != len(names) {
		if len(pos) < len(names) {
			return nil, usagef("%s: missing %s", fs.Name(), names[len(pos)])
		}
		return nil, usagef("%s: unexpected argument %q", fs.Name(), pos[len(names)])
	}
	return pos, nil
}

func parseID(cmd, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usagef("%s: ID must be a positive integer, got %q", cmd, s)
	}
	return id, nil
}

// helpOrMissing answers a command group called with no subcommand (usage on
// stderr, a usage error) or with a request for help (usage on stdout); done
// reports whether it answered.
func helpOrMissing(args []string, group, usage string, stdout, stderr io.Writer) (done bool, err error) {
	switch {
	case len(args) == 0:
		fmt.Fprint(stderr, usage)
		return true, usagef("%s: no subcommand given", group)
	case args[0] == "--help" || args[0] == "-h" || args[0] == "help":
		fmt.Fprint(stdout, usage)
		return true, nil
	}
	return false, nil
}

// subcommand runs one subcommand of a group with rest, its arguments; fs is
// named "GROUP SUBCOMMAND" and has --json already.
type subcommand func(ctx context.Context, c *cli, fs *flag.FlagSet, rest []string) error

// runGroup runs effectd GROUP SUBCOMMAND: usage when asked or lost, then the
// subcommand of subs with the --json every subcommand takes.
func runGroup(ctx context.Context, group, usage string, subs map[string]subcommand, args []string, getenv env, stdout, stderr io.Writer) error {
	if done, err := helpOrMissing(args, group, usage, stdout, stderr); done {
		return err
	}
	c := newCLI(getenv, stdout)
	sub, rest := args[0], args[1:]
	run, ok := subs[sub]
	if !ok {
		fmt.Fprint(stderr, usage)
		return usagef("%s: unknown subcommand %q", group, sub)
	}
	fs := flag.NewFlagSet(group+" "+sub, flag.ContinueOnError)
	fs.BoolVar(&c.json, "json", false, "print the API's JSON instead of a table")
	return run(ctx, c, fs, rest)
}

// runIntents runs effectd intents SUBCOMMAND.
func runIntents(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	return runGroup(ctx, "intents", intentsUsage, map[string]subcommand{
		"list": intentsList, "show": intentsShow, "resolve": intentsResolve,
		"retry": intentsRetry, "cancel": intentsCancel, "reconcile": intentsReconcile,
	}, args, getenv, stdout, stderr)
}

// runChannels runs effectd channels SUBCOMMAND.
func runChannels(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	return runGroup(ctx, "channels", channelsUsage, map[string]subcommand{
		"list": channelsList, "show": channelOp((*client.Client).Channel),
		"pause": channelOp((*client.Client).Pause), "resume": channelOp((*client.Client).Resume),
	}, args, getenv, stdout, stderr)
}

// idArg parses fs's flags among args and returns the one positional argument, an intent ID.
func (c *cli) idArg(fs *flag.FlagSet, args []string) (int64, error) {
	pos, err := parseArgs(fs, args, c.stdout, "ID")
	if err != nil {
		return 0, err
	}
	return parseID(fs.Name(), pos[0])
}

// printIntent prints one intent: as a table of one row, or its JSON.
func (c *cli) printIntent(in client.IntentRow) error {
	return c.print(in, func(w io.Writer) { printIntents(w, []client.IntentRow{in}) })
}

// intentsList runs effectd intents list.
func intentsList(ctx context.Context, c *cli, fs *flag.FlagSet, rest []string) error {
	var f client.Filter
	fs.StringVar(&f.Status, "status", "", "only this status ("+stateNames()+")")
	fs.StringVar(&f.Channel, "channel", "", "only this channel")
	fs.StringVar(&f.Delivery, "delivery", "", "only this delivery (accepted, delivered, undelivered)")
	fs.StringVar(&f.Q, "q", "", "an event id, idempotency key or provider reference")
	fs.IntVar(&f.Limit, "limit", 100, "at most this many")
	fs.Int64Var(&f.After, "after", 0, "the next page: the id the previous page printed")
	if _, err := parseArgs(fs, rest, c.stdout); err != nil {
		return err
	}
	page, err := c.api.ListIntents(ctx, f)
	if err != nil {
		return err
	}
	return c.print(page, func(w io.Writer) {
		if len(page.Intents) == 0 {
			fmt.Fprintln(w, noneMatch("intents", f))
			return
		}
		printIntents(w, page.Intents)
		if page.Next != nil {
			fmt.Fprintf(w, "\nmore: --after %d\n", *page.Next)
		}
	})
}

// intentsShow runs effectd intents show.
func intentsShow(ctx context.Context, c *cli, fs *flag.FlagSet, rest []string) error {
	id, err := c.idArg(fs, rest)
	if err != nil {
		return err
	}
	d, err := c.api.Intent(ctx, id)
	if err != nil {
		return err
	}
	return c.print(d, func(w io.Writer) { printDetail(w, d) })
}

// intentsResolve runs effectd intents resolve.
func intentsResolve(ctx context.Context, c *cli, fs *flag.FlagSet, rest []string) error {
	as := fs.String("as", "", "sent (with --ref), resend or skip")
	ref := fs.String("ref", "", "the provider's reference of the effect, with --as sent")
	reason := fs.String("reason", "", "why, for the audit (required)")
	force := fs.Bool("force", false, "with --as resend: send again past the provider's idempotency-key window")
	shown := fs.String("event-id", "", "the event id you were shown: act only while the id still names it")
	id, err := c.idArg(fs, rest)
	if err != nil {
		return err
	}
	switch {
	case *as != "sent" && *as != "resend" && *as != "skip":
		return usagef("%s: --as must be sent, resend or skip, got %q", fs.Name(), *as)
	case *as == "sent" && *ref == "":
		return usagef("%s: --as sent needs --ref, the provider's reference", fs.Name())
	case strings.TrimSpace(*reason) == "":
		return usagef("%s: --reason is required: say why, for the audit", fs.Name())
	}
	if *shown != "" {
		ctx = client.ShownEvent(ctx, *shown)
	}
	in, err := c.api.Resolve(ctx, id, client.Resolution{As: *as, ProviderRef: *ref, Reason: *reason, Force: *force})
	if done, err := c.printRequested(err); done || err != nil {
		return err
	}
	return c.printIntent(in)
}

// intentsRetry runs effectd intents retry.
func intentsRetry(ctx context.Context, c *cli, fs *flag.FlagSet, rest []string) error {
	reason := fs.String("reason", "", "why, for the audit")
	force := fs.Bool("force", false, "send again past the provider's idempotency-key window (needs --reason)")
	shown := fs.String("event-id", "", "the event id you were shown: act only while the id still names it")
	id, err := c.idArg(fs, rest)
	if err != nil {
		return err
	}
	if *shown != "" {
		ctx = client.ShownEvent(ctx, *shown)
	}
	in, err := c.api.Retry(ctx, id, *reason, *force)
	if done, err := c.printRequested(err); done || err != nil {
		return err
	}
	return c.printIntent(in)
}

// intentsCancel runs effectd intents cancel.
func intentsCancel(ctx context.Context, c *cli, fs *flag.FlagSet, rest []string) error {
	reason := fs.String("reason", "", "why, for the audit")
	shown := fs.String("event-id", "", "the event id you were shown: act only while the id still names it")
	id, err := c.idArg(fs, rest)
	if err != nil {
		return err
	}
	if *shown != "" {
		ctx = client.ShownEvent(ctx, *shown)
	}
	in, err := c.api.Cancel(ctx, id, *reason)
	if err != nil {
		return err
	}
	return c.printIntent(in)
}

// intentsReconcile runs effectd intents reconcile.
func intentsReconcile(ctx context.Context, c *cli, fs *flag.FlagSet, rest []string) error {
	dry := fs.Bool("dry-run", false, "report what the lookup finds without changing anything")
	id, err := c.idArg(fs, rest)
	if err != nil {
		return err
	}
	s, err := c.api.Reconcile(ctx, id, *dry)
	if err != nil {
		return err
	}
	return c.print(s, func(w io.Writer) {
		tw := table(w, "INTENT", "OUTCOME", "FROM", "TO", "PROVIDER_REF", "APPLIED")
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%t\n", s.IntentID, s.Outcome, s.From, s.To, dash(s.ProviderRef), s.Applied)
		tw.Flush()
		if s.Error != "" {
			fmt.Fprintln(w, "error:", s.Error)
		}
	})
}

// channelsList runs effectd channels list.
func channelsList(ctx context.Context, c *cli, fs *flag.FlagSet, rest []string) error {
	if _, err := parseArgs(fs, rest, c.stdout); err != nil {
		return err
	}
	chans, err := c.api.Channels(ctx)
	if err != nil {
		return err
	}
	return c.print(map[string]any{"channels": chans}, func(w io.Writer) {
		if len(chans) == 0 {
			fmt.Fprintln(w, "no channels: none is configured, or this token sees none")
			return
		}
		printChannels(w, chans)
	})
}

// channelOp is effectd channels show, pause or resume: op on the named
// channel, which it answers, printed with its effective policy.
func channelOp(op func(*client.Client, context.Context, string) (client.Channel, error)) subcommand {
	return func(ctx context.Context, c *cli, fs *flag.FlagSet, rest []string) error {
		pos, err := parseArgs(fs, rest, c.stdout, "NAME")
		if err != nil {
			return err
		}
		ch, err := op(c.api, ctx, pos[0])
		if err != nil {
			return err
		}
		return c.print(ch, func(w io.Writer) {
			printChannels(w, []client.Channel{ch})
			p, _ := json.MarshalIndent(ch.Policy, "", "  ")
			fmt.Fprintf(w, "\npolicy (effective):\n%s\n", p)
		})
	}
}

// print writes v as indented JSON with --json, else as people read it.
func (c *cli) print(v any, human func(io.Writer)) error {
	if c.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	human(c.stdout)
	return nil
}

// noneMatch says that a list of what came back empty, naming the filters as
// they were typed: "no intents match --status IN_DOUBT --channel sms".
func noneMatch(what string, f client.Filter) string {
	var flags []string
	for _, kv := range [][2]string{{"status", f.Status}, {"channel", f.Channel}, {"delivery", f.Delivery}, {"q", f.Q}} {
		if kv[1] != "" {
			flags = append(flags, "--"+kv[0]+" "+shellWord(kv[1]))
		}
	}
	if f.After > 0 {
		flags = append(flags, "--after "+strconv.FormatInt(f.After, 10))
	}
	if len(flags) == 0 {
		return "no " + what
	}
	return "no " + what + " match " + strings.Join(flags, " ")
}

// shellWord returns s as a shell reads it back: quoted when it holds anything
// but letters, digits and -_.:+@/*.
func shellWord(s string) string {
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("-_.:+@/*", c)) {
			return strconv.Quote(s)
		}
	}
	return s
}

func table(w io.Writer, headers ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(headers, "\t"))
	return tw
}

func printIntents(w io.Writer, intents []client.IntentRow) {
	tw := table(w, "ID", "CHANNEL", "EVENT_ID", "STATUS", "DELIVERY", "ATTEMPTS", "PROVIDER_REF", "UPDATED")
	for _, in := range intents {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", in.ID, in.Channel, in.EventID, in.Status,
			dash(deref(in.Delivery)), in.Attempts, dash(deref(in.ProviderRef)), in.UpdatedAt.UTC().Format(time.RFC3339))
	}
	tw.Flush()
}

func printDetail(w io.Writer, d client.IntentDetail) {
	in := d.Intent
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"id", strconv.FormatInt(in.ID, 10)}, {"event_id", in.EventID}, {"channel", in.Channel},
		{"status", string(in.Status)}, {"delivery", strings.TrimSuffix(dash(deref(in.Delivery))+" ("+dispatcher.DeliveryNote(deref(in.DeliveryDetail), deref(in.Delivery))+")", " ()")},
		{"attempts", strconv.Itoa(in.Attempts)}, {"idempotency_key", in.IdempotencyKey},
		{"provider_ref", dash(deref(in.ProviderRef))}, {"last_error", dash(deref(in.LastError))},
		{"created_at", in.CreatedAt.UTC().Format(time.RFC3339)}, {"updated_at", in.UpdatedAt.UTC().Format(time.RFC3339)},
		{"payload", string(in.Payload)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], strings.TrimSpace(kv[1]))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nattempts:")
	tw = table(w, "  #", "KIND", "STARTED", "OUTCOME", "ERROR", "PROVIDER_REF")
	for _, a := range d.Attempts {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, a.Kind, a.StartedAt.UTC().Format(time.RFC3339),
			a.Outcome, dash(deref(a.Error)), dash(deref(a.ProviderRef)))
	}
	tw.Flush()
	fmt.Fprintln(w, "\naudit:")
	tw = table(w, "  AT", "ACTOR", "ACTION", "REASON")
	for _, a := range d.Audit {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", a.At.UTC().Format(time.RFC3339), a.Actor, a.Action, dash(auditReason(a)))
	}
	tw.Flush()
}

// auditReason returns the reason of an audit entry: its column, or the one
// kept with the state after.
func auditReason(a client.AuditEntry) string {
	if a.Reason != nil {
		return *a.Reason
	}
	var after struct {
		Reason string `json:"reason"`
	}
	json.Unmarshal(a.After, &after)
	return after.Reason
}

func printChannels(w io.Writer, chans []client.Channel) {
	tw := table(w, "NAME", "PROVIDER", "PAUSED", "PENDING", "SENDING", "IN_DOUBT", "FAILED", "SENT", "RATE/S", "CONCURRENCY")
	for _, c := range chans {
		fmt.Fprintf(tw, "%s\t%s\t%t\t%d\t%d\t%d\t%d\t%d\t%g\t%d\n", c.Name, c.Provider, c.Paused,
			c.Counts[statemachine.Pending], c.Counts[statemachine.Sending], c.Counts[statemachine.InDoubt],
			c.Counts[statemachine.Failed], c.Counts[statemachine.Sent], c.Policy.RatePerSecond, c.Policy.Concurrency)
	}
	tw.Flush()
}

func stateNames() string {
	s := make([]string, len(statemachine.States))
	for i, x := range statemachine.States {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
