package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
)

// cliRun runs the effectd binary with env and args and returns its exit
// code, stdout and stderr.
func cliRun(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("effectd %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// insertInDoubt records an intent that a crashed call left IN_DOUBT, with
// the send attempt and the lookup that could not tell.
func (s *stack) insertInDoubt(t *testing.T, channel, event string) int64 {
	t.Helper()
	now := time.Now()
	id := fixture.Intent(t, s.pool, fixture.Event(event), fixture.Channel(channel), fixture.Status("IN_DOUBT"),
		fixture.Payload(`{"to":"+15005550006","body":"Your code is 123456"}`),
		fixture.LastError("lease expired mid-call; lookup ambiguous")).ID
	fixture.AddAttempts(t, s.pool,
		fixture.Attempt{IntentID: id, Kind: "send", StartedAt: now.Add(-2 * time.Minute), Unfinished: true, Outcome: "maybe_sent",
			Error: "worker lost its lease mid-call"},
		fixture.Attempt{IntentID: id, Kind: "lookup", StartedAt: now.Add(-time.Minute), Outcome: "ambiguous",
			Error: "two messages match the body"})
	return id
}

// TestCLIThroughBinary: the command line lists and resolves through the
// admin API, prints tables or --json, and exits 0, 1 (API error: one line,
// "error: <code>: <message>", in the API's words) or 2 (bad usage).
func TestCLIThroughBinary(t *testing.T) {
	t.Parallel()
	s := newStack(t, pgtest.URL(t))
	_, url := s.serve(t)
	id := s.insertInDoubt(t, "hook", "refund-evt-7")
	admin := []string{"EFFECTD_URL=" + url, "EFFECTD_TOKEN=" + adminToken}
	read := []string{"EFFECTD_URL=" + url, "EFFECTD_TOKEN=" + readToken}
	ids := fmt.Sprint(id)

	code, out, errOut := cliRun(t, admin, "intents", "list", "--status", "IN_DOUBT")
	if code != 0 || !strings.Contains(out, "STATUS") || !strings.Contains(out, "refund-evt-7") || !strings.Contains(out, "IN_DOUBT") {
		t.Fatalf("intents list: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = cliRun(t, admin, "intents", "list", "--status", "IN_DOUBT", "--json")
	var page struct {
		Intents []struct {
			ID     int64  `json:"id"`
			Status string `json:"status"`
		} `json:"intents"`
	}
	if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil || len(page.Intents) != 1 || page.Intents[0].ID != id {
		t.Fatalf("intents list --json: exit %d, %v: %s", code, err, out)
	}
	code, out, _ = cliRun(t, admin, "intents", "show", ids)
	for _, want := range []string{"IN_DOUBT", "lookup", "ambiguous", "hook:refund-evt-7"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("intents show: exit %d, missing %q:\n%s", code, want, out)
		}
	}

	tests := []struct {
		env    []string
		args   []string
		code   int
		stderr string
	}{
		{admin, []string{"intents", "resolve", ids, "--as", "skip"}, 2, "--reason is required"},
		{admin, []string{"intents", "resolve", ids, "--as", "sent", "--reason", "x"}, 2, "--ref"},
		{admin, []string{"intents", "resolve", "--as", "skip", "--reason", "x"}, 2, "missing ID"},
		{admin, []string{"intents", "resolve", "x1", "--as", "skip", "--reason", "x"}, 2, "positive integer"},
		{admin, []string{"intents", "frob"}, 2, "unknown subcommand"},
		{admin, []string{"intents", "list", "--bogus"}, 2, "flag provided but not defined"},
		{admin, []string{"intents", "list", "--status", "DONE"}, 1, "error: invalid: status: must be one of"},
		{read, []string{"intents", "resolve", ids, "--as", "skip", "--reason", "x"}, 1, `error: forbidden: role viewer may not operate intents of channel "hook"`},
		{[]string{"EFFECTD_URL=" + url, "EFFECTD_TOKEN=wrong"}, []string{"intents", "list"}, 1, "error: unauthorized: missing or unknown bearer token"},
		{admin, []string{"intents", "show", "999999"}, 1, "error: not_found: get intent 999999: not found"},
	}
	for _, tc := range tests {
		code, out, errOut := cliRun(t, tc.env, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.stderr) || tc.code == 1 && !strings.HasPrefix(errOut, tc.stderr) ||
			strings.Count(strings.TrimSpace(errOut), "\n") > 0 && tc.code == 1 {
			t.Errorf("effectd %v: exit %d, stderr %q, stdout %q; want exit %d and %q on one line", tc.args, code, errOut, out, tc.code, tc.stderr)
		}
	}
	// A list that matches nothing says so, with the filters as typed.
	code, out, errOut = cliRun(t, admin, "intents", "list", "--status", "CANCELLED", "--channel", "hook", "--q", "no such")
	if code != 0 || out != "no intents match --status CANCELLED --channel hook --q \"no such\"\n" {
		t.Errorf("empty intents list: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if st := s.status(t, "refund-evt-7", "hook"); st != "IN_DOUBT" {
		t.Fatalf("refused commands changed the intent: %s", st)
	}

	// The flags may follow the ID; the reason reaches the audit.
	code, out, errOut = cliRun(t, admin, "intents", "resolve", ids, "--as", "sent", "--ref", "msg_42", "--reason", "found it in the provider's log")
	if code != 0 || !strings.Contains(out, "SENT") || !strings.Contains(out, "msg_42") {
		t.Fatalf("intents resolve: exit %d\n%s%s", code, out, errOut)
	}
	var reason string
	s.pool.QueryRow(context.Background(), `SELECT after->>'reason' FROM effectd.audit WHERE intent_id = $1`, id).Scan(&reason)
	if reason != "found it in the provider's log" {
		t.Errorf("audit reason %q", reason)
	}
	// Refusals name the state and what the action needs, not the code that refused it.
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"intents", "resolve", ids, "--as", "skip", "--reason", "again"},
			"error: conflict: the intent is SENT, and resolve_skip applies only to IN_DOUBT or SENDING\n"},
		{[]string{"intents", "reconcile", ids}, "error: conflict: reconcile intent " + ids + ": the intent is SENT, and found applies only to SENDING or IN_DOUBT\n"},
	} {
		if code, _, errOut := cliRun(t, admin, tc.args...); code != 1 || errOut != tc.stderr {
			t.Errorf("effectd %v: exit %d, stderr %q; want 1 and %q", tc.args, code, errOut, tc.stderr)
		}
	}

	code, out, _ = cliRun(t, admin, "channels", "pause", "other")
	if code != 0 || !strings.Contains(out, "other") || !strings.Contains(out, "true") {
		t.Errorf("channels pause: exit %d\n%s", code, out)
	}
	code, out, _ = cliRun(t, admin, "channels", "list", "--json")
	var chans struct {
		Channels []struct {
			Name   string `json:"name"`
			Paused bool   `json:"paused"`
		} `json:"channels"`
	}
	if err := json.Unmarshal([]byte(out), &chans); code != 0 || err != nil || len(chans.Channels) != 2 || !chans.Channels[1].Paused {
		t.Errorf("channels list --json: exit %d, %v: %s", code, err, out)
	}
	if code, _, errOut := cliRun(t, admin, "channels", "show", "nope"); code != 1 || !strings.Contains(errOut, "not_found") {
		t.Errorf("channels show nope: exit %d, %q", code, errOut)
	}

	// The console is on the same listener; without a session it sends people to log in.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(url + "/ui/intents/" + ids)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
		t.Errorf("GET /ui/intents/%s without a session: %d to %q, want 303 to /ui/login", ids, resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestShowDeliveryOnce: `intents show` prints a delivery's value once, then
// what the provider's detail adds ("undelivered (provider code 30003)", not
// "undelivered undelivered 30003"), and the value alone without a detail.
func TestShowDeliveryOnce(t *testing.T) {
	for _, c := range []struct{ delivery, detail, want string }{
		{"undelivered", "undelivered 30003", "undelivered (provider code 30003)"},
		{"undelivered", "failed 30008", "undelivered (provider status failed, code 30008)"},
		{"delivered", "delivered", "delivered"},
		{"", "", "-"},
	} {
		var d client.IntentDetail
		if c.delivery != "" {
			d.Intent.Delivery, d.Intent.DeliveryDetail = &c.delivery, &c.detail
		}
		var out bytes.Buffer
		printDetail(&out, d)
		line := ""
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(l, "delivery:") {
				line = strings.TrimSpace(strings.TrimPrefix(l, "delivery:"))
			}
		}
		if line != c.want {
			t.Errorf("delivery %q, detail %q: printed %q, want %q", c.delivery, c.detail, line, c.want)
		}
	}
}
