package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/effectd/effectd/api/client"
)

const approvalsUsage = `Usage:
  effectd approvals list [--channel C] [--after ID] [--limit N] [--json]
  effectd approvals show ID [--json]
  effectd approvals approve ID --reason TEXT [--json]
  effectd approvals reject ID --reason TEXT [--json]

Two-person approval (docs/console.md): on a channel whose policy says
approval: two-person, a resolve as sent or skip, a forced resend, a bulk action
over the channel's threshold and a policy change become requests; another
token with the approve right on the channel approves or rejects them here.
Talks to the admin API at EFFECTD_URL (default http://127.0.0.1:8080) with the
bearer token EFFECTD_TOKEN. An error the API answers exits 1 and prints one
line, error: <code>: <message> (error: self_approval: … for one's own request).
`

// runApprovals runs effectd approvals SUBCOMMAND.
func runApprovals(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	return runGroup(ctx, "approvals", approvalsUsage, map[string]subcommand{
		"list": approvalsList, "show": approvalsShow,
		"approve": approvalsDecide((*client.Client).Approve), "reject": approvalsDecide((*client.Client).Reject),
	}, args, getenv, stdout, stderr)
}

// approvalsList runs effectd approvals list.
func approvalsList(ctx context.Context, c *cli, fs *flag.FlagSet, rest []string) error {
	channel := fs.String("channel", "", "only this channel")
	after := fs.Int64("after", 0, "the next page: the id the previous page printed")
	limit := fs.Int("limit", 100, "at most this many")
	if _, err := parseArgs(fs, rest, c.stdout); err != nil {
		return err
	}
	page, err := c.api.Approvals(ctx, *channel, *after, *limit)
	if err != nil {
		return err
	}
	return c.print(page, func(w io.Writer) {
		if len(page.Requests) == 0 {
			fmt.Fprintln(w, "no pending approval requests")
			return
		}
		printApprovals(w, page.Requests)
		if page.Next > 0 {
			fmt.Fprintf(w, "\nmore: --after %d\n", page.Next)
		}
	})
}

// approvalsShow runs effectd approvals show.
func approvalsShow(ctx context.Context, c *cli, fs *flag.FlagSet, rest []string) error {
	id, err := c.idArg(fs, rest)
	if err != nil {
		return err
	}
	a, err := c.api.Approval(ctx, id)
	if err != nil {
		return err
	}
	return c.printApproval(a)
}

// approvalsDecide is effectd approvals approve or reject.
func approvalsDecide(decide func(*client.Client, context.Context, int64, string) (client.ApprovalRequest, error)) subcommand {
	return func(ctx context.Context, c *cli, fs *flag.FlagSet, rest []string) error {
		reason := fs.String("reason", "", "why, for the audit (required)")
		id, err := c.idArg(fs, rest)
		if err != nil {
			return err
		}
		if strings.TrimSpace(*reason) == "" {
			return usagef("%s: --reason is required: say why, for the audit", fs.Name())
		}
		a, err := decide(c.api, ctx, id, *reason)
		if err != nil {
			return err
		}
		return c.printApproval(a)
	}
}

// printApproval prints one request: a table of one row and its outcome, or its JSON.
func (c *cli) printApproval(a client.ApprovalRequest) error {
	return c.print(a, func(w io.Writer) {
		printApprovals(w, []client.ApprovalRequest{a})
		fmt.Fprintf(w, "\nreason: %s\n", a.Reason)
		if a.Decider != nil {
			fmt.Fprintf(w, "decided by %s: %s\n", *a.Decider, deref(a.DecisionReason))
		}
		if a.Outcome != nil {
			fmt.Fprintf(w, "outcome: %s\n", *a.Outcome)
		}
	})
}

func printApprovals(w io.Writer, list []client.ApprovalRequest) {
	tw := table(w, "ID", "CHANNEL", "ACTION", "INTENT", "REQUESTER", "STATE", "EXPIRES")
	for _, a := range list {
		target := "-"
		if a.Intent != nil {
			target = fmt.Sprintf("%d (%s, %s)", a.Intent.ID, a.Intent.EventID, a.Intent.Status)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Channel, a.Action, target, a.Requester, a.State,
			a.ExpiresAt.UTC().Format(time.RFC3339))
	}
	tw.Flush()
}

// printRequested says that an action became an approval request, which is
// no error: nothing changed yet, and another person decides it.
func (c *cli) printRequested(err error) (bool, error) {
	var r *client.Requested
	if !errors.As(err, &r) {
		return false, err
	}
	return true, c.print(r, func(w io.Writer) {
		fmt.Fprintln(w, r.Message)
		fmt.Fprintf(w, "another person approves it with: effectd approvals approve %d --reason TEXT\n", r.Request.ID)
	})
}
