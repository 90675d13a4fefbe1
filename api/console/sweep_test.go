package console

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/api"
	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/providers/stripe"
	"github.com/effectd/effectd/providers/webhook"
)

// TestSweepPage: an operator picks a channel (webhook channels are not
// offered) and a window, and sees the counts and each finding with what
// settles it; a clean window says the two agree; a viewer is told the role
// may not; a bad time is named; nothing changes.
func TestSweepPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := sandbox.New(sandbox.Options{})
	sbSrv := httptest.NewServer(sb.Handler())
	t.Cleanup(sbSrv.Close)
	st, err := stripe.New(stripe.Config{APIKey: "sk_test_console", BaseURL: sbSrv.URL})
	if err != nil {
		t.Fatal(err)
	}
	wh, err := webhook.New(webhook.Config{URL: sbSrv.URL + "/hooks/ui", Secret: "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"})
	if err != nil {
		t.Fatal(err)
	}
	pool := pgtest.New(t)
	chans := []dispatcher.Channel{
		{Name: "refund", Kind: "stripe", Provider: st, Policy: policy.Default("stripe")},
		{Name: "hook", Kind: "webhook", Provider: wh, Policy: policy.Default("webhook")},
	}
	if err := dispatcher.Register(ctx, pool, chans); err != nil {
		t.Fatal(err)
	}
	d, err := dispatcher.New(pool, dispatcher.Config{Channels: chans})
	if err != nil {
		t.Fatal(err)
	}
	tokens := api.Tokens{
		api.NewToken(api.Principal{Name: "payments-oncall", Role: api.RoleOperator}, operatorToken),
		api.NewToken(api.Principal{Name: "support", Role: api.RoleViewer}, viewerToken),
	}
	log := slog.New(slog.DiscardHandler)
	ah, err := api.NewHandler(api.Config{Pool: pool, Tokens: tokens, Sweeper: d, Registry: prometheus.NewRegistry(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ui, err := New(Config{Pool: pool, API: ah, Tokens: tokens, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui)
	t.Cleanup(srv.Close)

	c := browserless(t)
	csrf := login(t, c, srv.URL, operatorToken)
	resp, page := get(t, c, srv.URL+"/ui/sweep")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "<option>refund</option>") || strings.Contains(page, "<option>hook</option>") {
		t.Fatalf("sweep form: %d, want refund offered and hook not:\n%s", resp.StatusCode, page)
	}
	window := func(csrf string) url.Values {
		now := time.Now().UTC()
		return url.Values{"csrf": {csrf}, "channel": {"refund"},
			"since": {now.Add(-time.Hour).Format(localTime)}, "until": {now.Add(2 * time.Minute).Format(localTime)}}
	}
	resp, page = post(t, c, srv.URL+"/ui/sweep", window(csrf))
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="agree"`) {
		t.Fatalf("clean sweep: %d:\n%s", resp.StatusCode, page)
	}

	id := fixture.Intent(t, pool, fixture.Channel("refund"), fixture.Event("r-1"), fixture.Status("IN_DOUBT"),
		fixture.Payload(`{"type":"refund","charge":"ch_1"}`)).ID
	ref, err := st.Send(ctx, "refund:r-1", json.RawMessage(`{"type":"refund","charge":"ch_1"}`),
		map[string]string{effect.MetaEventID: "r-1", effect.MetaIntentID: fmt.Sprint(id)})
	if err != nil {
		t.Fatal(err)
	}
	resp, page = post(t, c, srv.URL+"/ui/sweep", window(csrf))
	for _, want := range []string{`class="finding-unsettled"`, fmt.Sprintf(`href="/ui/intents/%d">r-1<`, id), "<code>" + ref + "</code>",
		fmt.Sprintf("effectd intents resolve %d --as sent --ref %s", id, ref), `<td class="num">1</td>`} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("sweep report: %d, lacks %s:\n%s", resp.StatusCode, want, section(page, "findings"))
		}
	}
	bad := window(csrf)
	bad.Set("since", "yesterday")
	if resp, page = post(t, c, srv.URL+"/ui/sweep", bad); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "from: use YYYY-MM-DDTHH:MM (UTC)") {
		t.Errorf("a bad time: %d:\n%s", resp.StatusCode, page)
	}
	if resp, _ = post(t, c, srv.URL+"/ui/sweep", window("forged")); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a POST without the session's CSRF token: %d, want 403", resp.StatusCode)
	}

	v := browserless(t)
	vcsrf := login(t, v, srv.URL, viewerToken)
	if resp, page = post(t, v, srv.URL+"/ui/sweep", window(vcsrf)); resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "role viewer may not operate") {
		t.Errorf("a viewer's sweep: %d:\n%s", resp.StatusCode, page)
	}
	var status string
	pool.QueryRow(ctx, `SELECT status FROM effectd.intents WHERE id = $1`, id).Scan(&status)
	if status != "IN_DOUBT" {
		t.Errorf("the sweep changed the intent: %s", status)
	}
}
