package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/providers/stripe"
	"github.com/effectd/effectd/providers/webhook"
)

// fakeSweeper answers a report with one finding of each kind, and a
// scheduled coverage of the window's first minute.
type fakeSweeper struct{}

func (fakeSweeper) Sweep(_ context.Context, channel string, since, until time.Time) (effectdtype.SweepReport, error) {
	rep := effectdtype.SweepReport{Channel: channel, Provider: "stripe", Since: since, Until: until,
		ListedSince: since.Add(-5 * time.Minute), ListedUntil: until.Add(5 * time.Minute), Intents: 3, Objects: 4,
		Counts: map[string]int{}, Scheduled: effectdtype.SweepCoverage{
			Covered: []effectdtype.SweepWindow{{Since: since, Until: since.Add(time.Minute)}},
			Gaps:    []effectdtype.SweepWindow{{Since: since.Add(time.Minute), Until: until}}}}
	for i, k := range effectdtype.FindingKinds {
		f := effectdtype.Finding{Kind: k, IntentID: int64(i + 1), EventID: fmt.Sprint("evt-", i), Status: "SENT", Operation: "look"}
		f.Objects = append(f.Objects, effect.Object{Ref: fmt.Sprint("re_", i), Kind: "refund", EventID: f.EventID,
			Created: since.Add(time.Minute), Summary: "refund 300 usd"})
		if k == effectdtype.FindingOrphan {
			f.IntentID, f.EventID, f.Status = 0, "", ""
		}
		rep.Findings = append(rep.Findings, f)
		rep.Counts[k] = 1
	}
	return rep, nil
}

// sweepEnv is the API over setup's channels with a real dispatcher whose
// stripe channel "refund" lists a sandbox, and tokens of every role.
func sweepEnv(t *testing.T) (env, string) {
	t.Helper()
	e := setup(t)
	sb := sandbox.New(sandbox.Options{})
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	st, err := stripe.New(stripe.Config{APIKey: "sk_test_api", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	wh, err := webhook.New(webhook.Config{URL: srv.URL + "/hooks/api", Secret: "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatcher.New(e.pool, dispatcher.Config{Channels: []dispatcher.Channel{
		{Name: "refund", Kind: "stripe", Provider: st, Policy: policy.Default("stripe")},
		{Name: "hook", Kind: "webhook", Provider: wh, Policy: policy.Default("webhook")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.h, err = NewHandler(Config{
		Pool: e.pool,
		Tokens: []Token{
			NewToken(Principal{Name: "admin", Role: RoleAdmin}, adminToken),
			NewToken(Principal{Name: "read", Role: RoleViewer}, readToken),
			NewToken(Principal{Name: "refund-op", Role: RoleOperator, Channels: []string{"refund"}}, "refund-operator-0123456789"),
			NewToken(Principal{Name: "sms-op", Role: RoleOperator, Channels: []string{"sms*"}}, "sms-operator-0123456789"),
		},
		Reconciler: e.recon,
		Sweeper:    d,
		Registry:   prometheus.NewRegistry(),
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, srv.URL
}

// TestSweepRoute: an operator or admin of the channel gets the report; a
// viewer is forbidden; an operator of other channels gets the 404 a missing
// channel gets; bad input is 400 or 422 naming the field; a webhook channel
// cannot be listed.
func TestSweepRoute(t *testing.T) {
	t.Parallel()
	e, _ := sweepEnv(t)
	now := time.Now().UTC()
	body := func(channel string, since, until time.Time) string {
		b, _ := json.Marshal(map[string]string{"channel": channel, "since": since.Format(time.RFC3339), "until": until.Format(time.RFC3339)})
		return string(b)
	}
	hour := body("refund", now.Add(-time.Hour), now.Add(time.Minute))
	for _, token := range []string{adminToken, "refund-operator-0123456789"} {
		status, b := e.do(t, "POST", "/v1/sweeps", token, hour)
		want(t, status, b, http.StatusOK, `"channel": "refund"`, `"orphan": 0`, `"missing": 0`)
	}
	status, b := e.do(t, "POST", "/v1/sweeps", readToken, hour)
	want(t, status, b, http.StatusForbidden, "role viewer may not operate")
	status, b = e.do(t, "POST", "/v1/sweeps", "sms-operator-0123456789", hour)
	_, missing := e.do(t, "POST", "/v1/sweeps", "sms-operator-0123456789", body("nowhere", now.Add(-time.Hour), now))
	want(t, status, b, http.StatusNotFound)
	if strings.Replace(b, "refund", "nowhere", 1) != missing {
		t.Errorf("a channel out of scope answers %s, a missing one %s", b, missing)
	}
	status, b = e.do(t, "POST", "/v1/sweeps", adminToken, body("sms", now.Add(-time.Hour), now))
	want(t, status, b, http.StatusNotFound, `channel \"sms\"`)

	for _, c := range []struct {
		name, body string
		status     int
		mention    string
	}{
		{"no channel", `{"since":"2026-01-01T00:00:00Z"}`, http.StatusUnprocessableEntity, "channel: is required"},
		{"no since", `{"channel":"refund"}`, http.StatusUnprocessableEntity, "since: is required"},
		{"since not a time", `{"channel":"refund","since":"yesterday"}`, http.StatusUnprocessableEntity, "since: must be an RFC 3339 time"},
		{"until not a time", `{"channel":"refund","since":"2026-01-01T00:00:00Z","until":"2026-13-01T00:00:00Z"}`, http.StatusUnprocessableEntity, "until: must be an RFC 3339 time"},
		{"since after until", body("refund", now, now.Add(-time.Hour)), http.StatusUnprocessableEntity, "since: "},
		{"window too long", body("refund", now.Add(-8*24*time.Hour), now), http.StatusUnprocessableEntity, "until: the window is 192h0m0s long, more than the 168h0m0s"},
		{"webhook channel", body("hook", now.Add(-time.Hour), now), http.StatusUnprocessableEntity, `channel: \"hook\" is a webhook channel, whose provider cannot list`},
		{"unknown field", `{"channel":"refund","since":"2026-01-01T00:00:00Z","dry_run":true}`, http.StatusBadRequest, "dry_run"},
		{"not an object", `[]`, http.StatusBadRequest, "JSON object"},
	} {
		status, b := e.do(t, "POST", "/v1/sweeps", adminToken, c.body)
		if status != c.status || !strings.Contains(b, c.mention) {
			t.Errorf("%s: %d %s; want %d mentioning %q", c.name, status, b, c.status, c.mention)
		}
	}
}

// TestSweepRouteListingFails: a provider that does not answer the listing is
// a 503 saying so, not a 500.
func TestSweepRouteListingFails(t *testing.T) {
	t.Parallel()
	e, url := sweepEnv(t)
	// Every Stripe request to the sandbox answers 503 from now on.
	req, _ := http.NewRequest("PUT", url+"/_sandbox/faults/stripe", strings.NewReader(`{"error_rate":1,"error_status":503}`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("set the sandbox's fault: %v %v", resp, err)
	}
	now := time.Now().UTC()
	status, b := e.do(t, "POST", "/v1/sweeps", adminToken,
		fmt.Sprintf(`{"channel":"refund","since":%q}`, now.Add(-time.Hour).Format(time.RFC3339)))
	want(t, status, b, http.StatusServiceUnavailable, "the provider's listing failed: stripe list refunds")
	if strings.Contains(b, "dispatcher.") {
		t.Errorf("the answer names a Go operation: %s", b)
	}
}
