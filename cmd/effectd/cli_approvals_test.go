package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/api"
	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
)

// TestCLIApprovals: on a two-person channel effectd intents resolve makes a
// request and says how to approve it; effectd approvals approve refuses the
// requester's own (error: self_approval) and runs it for another person;
// the intent's audit then names both.
func TestCLIApprovals(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	fixture.AddChannel(t, pool, "refund", "stripe", fixture.Policy(`{"approval": "two-person"}`))
	id := fixture.Intent(t, pool, fixture.Event("rf-1"), fixture.Channel("refund"), fixture.Status("IN_DOUBT")).ID
	refund := []string{"refund"}
	h, err := api.NewHandler(api.Config{Pool: pool, Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler),
		Tokens: []api.Token{
			api.NewToken(api.Principal{Name: "alice", Role: api.RoleOperator, Channels: refund, Approves: refund}, "alice-secret"),
			api.NewToken(api.Principal{Name: "bob", Role: api.RoleOperator, Channels: refund, Approves: refund}, "bob-secret")}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cli := func(token string, args ...string) (string, error) {
		var out bytes.Buffer
		getenv := func(k string) string {
			return map[string]string{"EFFECTD_URL": srv.URL, "EFFECTD_TOKEN": token}[k]
		}
		run := runApprovals
		if args[0] == "intents" {
			run = runIntents
		}
		err := run(ctx, args[1:], getenv, &out, io.Discard)
		return out.String(), err
	}

	out, err := cli("alice-secret", "intents", "resolve", fmt.Sprint(id), "--as", "skip", "--reason", "refunded by hand", "--event-id", "rf-1")
	if err != nil || !strings.Contains(out, "approval request 1 awaits") || !strings.Contains(out, "effectd approvals approve 1 --reason") {
		t.Fatalf("intents resolve on a two-person channel: %v\n%s", err, out)
	}
	out, err = cli("bob-secret", "approvals", "list")
	if err != nil || !strings.Contains(out, "intent.resolve_skip") || !strings.Contains(out, "alice") {
		t.Fatalf("approvals list: %v\n%s", err, out)
	}
	_, err = cli("alice-secret", "approvals", "approve", "1", "--reason", "mine")
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "self_approval" || !strings.Contains(apiErr.Message, `made by "alice"`) {
		t.Fatalf("approving one's own request: %v, want self_approval", err)
	}
	if _, err := cli("bob-secret", "approvals", "approve", "1"); err == nil || !strings.Contains(err.Error(), "--reason is required") {
		t.Errorf("approve without --reason: %v", err)
	}
	out, err = cli("bob-secret", "approvals", "approve", "1", "--reason", "checked the dashboard")
	if err != nil || !strings.Contains(out, "approved") || !strings.Contains(out, "decided by bob") || !strings.Contains(out, "IN_DOUBT → SKIPPED") {
		t.Fatalf("approvals approve: %v\n%s", err, out)
	}
	var actor, requester string
	if err := pool.QueryRow(ctx, `SELECT actor, after -> 'approval' ->> 'requested_by' FROM effectd.audit WHERE intent_id = $1`, id).Scan(&actor, &requester); err != nil {
		t.Fatal(err)
	}
	if actor != "bob" || requester != "alice" {
		t.Errorf("audit: actor %q requested by %q, want bob and alice", actor, requester)
	}
}
