package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/api"
	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/providers/stripe"
)

// TestSweepCommand: effectd sweep prints the report (or --json) of a sweep
// through the admin API, a finding with the command that settles it; bad
// usage exits 2 before any call and the API's refusal exits 1 on one line.
func TestSweepCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := sandbox.New(sandbox.Options{})
	sbSrv := httptest.NewServer(sb.Handler())
	t.Cleanup(sbSrv.Close)
	st, err := stripe.New(stripe.Config{APIKey: "sk_test_cli", BaseURL: sbSrv.URL})
	if err != nil {
		t.Fatal(err)
	}
	pool := pgtest.New(t)
	chans := []dispatcher.Channel{{Name: "pay", Kind: "stripe", Provider: st, Policy: policy.Default("stripe")}}
	if err := dispatcher.Register(ctx, pool, chans); err != nil {
		t.Fatal(err)
	}
	d, err := dispatcher.New(pool, dispatcher.Config{Channels: chans})
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.NewHandler(api.Config{Pool: pool, Sweeper: d, Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler),
		Tokens: []api.Token{api.NewToken(api.Principal{Name: "admin", Role: api.RoleAdmin}, adminToken),
			api.NewToken(api.Principal{Name: "read", Role: api.RoleViewer}, readToken)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	// An IN_DOUBT intent whose refund the provider holds.
	id := fixture.Intent(t, pool, fixture.Event("r-1"), fixture.Channel("pay"), fixture.Status("IN_DOUBT"),
		fixture.Payload(`{"type":"refund","charge":"ch_1"}`)).ID
	ref, err := st.Send(ctx, "pay:r-1", json.RawMessage(`{"type":"refund","charge":"ch_1"}`),
		map[string]string{effect.MetaEventID: "r-1", effect.MetaIntentID: fmt.Sprint(id)})
	if err != nil {
		t.Fatal(err)
	}

	cli := func(token string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		getenv := func(k string) string {
			return map[string]string{"EFFECTD_URL": srv.URL, "EFFECTD_TOKEN": token}[k]
		}
		err := run(ctx, append([]string{"sweep"}, args...), getenv, &out, &errOut)
		return exitCode(err, &errOut), out.String(), errOut.String()
	}
	code, out, errOut := cli(adminToken, "--channel", "pay", "--since", "1h")
	for _, want := range []string{"channel pay (stripe)", "1 intents, 1 provider objects", "orphan 0, duplicate 0, unsettled 1, missing 0",
		"unsettled", "r-1", "IN_DOUBT", ref, fmt.Sprintf("effectd intents resolve %d --as sent --ref %s", id, ref)} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("effectd sweep: exit %d, stdout lacks %q:\n%s%s", code, want, out, errOut)
		}
	}
	code, out, _ = cli(adminToken, "--channel", "pay", "--since", "2h", "--until", "0s", "--json")
	var rep effectdtype.SweepReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Counts[effectdtype.FindingUnsettled] != 1 ||
		len(rep.Findings) != 1 || rep.Findings[0].Objects[0].Ref != ref {
		t.Errorf("effectd sweep --json: exit %d, %v: %s", code, err, out)
	}
	if status := func() (s string) {
		pool.QueryRow(ctx, `SELECT status FROM effectd.intents WHERE id = $1`, id).Scan(&s)
		return s
	}(); status != "IN_DOUBT" {
		t.Errorf("the sweep changed the intent: %s", status)
	}

	for _, tc := range []struct {
		token  string
		args   []string
		code   int
		stderr string
	}{
		{adminToken, []string{"--since", "1h"}, 2, "sweep: --channel is required"},
		{adminToken, []string{"--channel", "pay"}, 2, "sweep: --since is required"},
		{adminToken, []string{"--channel", "pay", "--since", "last week"}, 2, `--since: want an RFC 3339 time`},
		{adminToken, []string{"--channel", "pay", "--since", "1h", "extra"}, 2, `unexpected argument "extra"`},
		{adminToken, []string{"--channel", "pay", "--since", "200h"}, 1, "error: invalid: until: the window is 200h0m"},
		{adminToken, []string{"--channel", "pay", "--since", "1h", "--until", "2h"}, 1, "error: invalid: since: "},
		{readToken, []string{"--channel", "pay", "--since", "1h"}, 1, "error: forbidden: role viewer may not operate"},
		{adminToken, []string{"--channel", "nope", "--since", "1h"}, 1, `error: not_found: channel "nope": not found`},
	} {
		code, out, errOut := cli(tc.token, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.stderr) || tc.code == 1 && strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("effectd sweep %v: exit %d, stderr %q, stdout %q; want exit %d and %q", tc.args, code, errOut, out, tc.code, tc.stderr)
		}
	}
}
