package console

import (
	"context"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/effectd/effectd/internal/query/readdb"
)

// chartHistory builds a known history in the minute rollups through the
// statements that write them (readdb.AddRollups, readdb.SampleBacklog): ten
// and five minutes ago on sms, ten minutes ago on another channel, a backlog
// sample now; and, through the console's forms, an operator's pause and an
// admin's policy change of sms. It returns the minutes written.
func chartHistory(t *testing.T, e env) (tenAgo, fiveAgo time.Time) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Minute)
	tenAgo, fiveAgo = now.Add(-10*time.Minute), now.Add(-5*time.Minute)
	d := func(channel string, at time.Time, measure string, slot int16, n int64) readdb.RollupDelta {
		return readdb.RollupDelta{Channel: channel, Minute: at, Measure: measure, Slot: slot, N: n}
	}
	if err := readdb.AddRollups(ctx, e.pool, []readdb.RollupDelta{
		d("sms", tenAgo, "sent", 0, 5), d("sms", tenAgo, "failed", 0, 1), d("sms", tenAgo, "delivered", 0, 3),
		d("sms", tenAgo, "provider_errors", 0, 1), d("sms", tenAgo, "backoffs", 0, 2), d("sms", tenAgo, "latency", 20, 6),
		d("sms", fiveAgo, "sent", 0, 2), d("sms", fiveAgo, "in_doubt", 0, 1), d("sms", fiveAgo, "skipped", 0, 1),
		d("sms", fiveAgo, "undelivered", 0, 1), d("sms", fiveAgo, "latency", 20, 1), d("sms", fiveAgo, "latency", 24, 1),
		d("refund", tenAgo, "sent", 0, 4), d("refund", tenAgo, "latency", 24, 4),
	}); err != nil {
		t.Fatal(err)
	}
	if err := readdb.SampleBacklog(ctx, e.pool, []readdb.BacklogSample{{Channel: "sms", Backlog: 7, OldestDueSeconds: 42}}); err != nil {
		t.Fatal(err)
	}
	operator, admin := browserless(t), browserless(t)
	csrf := login(t, operator, e.srv.URL, operatorToken)
	if resp, body := post(t, operator, e.srv.URL+"/ui/channels/sms/pause", url.Values{"csrf": {csrf}}); resp.StatusCode != 303 {
		t.Fatalf("pause: %d %s", resp.StatusCode, body)
	}
	csrf = login(t, admin, e.srv.URL, adminToken)
	if resp, body := post(t, admin, e.srv.URL+"/ui/channels/sms/policy", url.Values{"csrf": {csrf},
		"patch": {`{"rate_per_second": 2}`}, "confirm": {"yes"}, "reason": {"carrier asks for less"}}); resp.StatusCode != 303 {
		t.Fatalf("policy change: %d %s", resp.StatusCode, body)
	}
	return tenAgo, fiveAgo
}

// chartRow is the text of a chart's table row for step at, cells joined by
// a space, as a person reads it.
func chartRow(at time.Time, cells ...string) string {
	return at.Format("15:04") + " " + strings.Join(cells, " ")
}

// spaces collapses the whitespace of a table's text.
var spaces = regexp.MustCompile(`\s+`)

// TestBrowserCharts: in Chromium with scripts disabled, the overview and the
// sms channel page draw their charts as SVG with the numbers of a known
// history beside them (throughput, latency, backlog, deliveries, provider
// errors and back-offs; the whole system summing every channel), the marks
// of an operator's pause and an admin's policy change, and a range link that
// works without a script.
func TestBrowserCharts(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e := setup(t)
	tenAgo, fiveAgo := chartHistory(t, e)
	now := time.Now().UTC().Truncate(time.Minute)

	profile, err := os.MkdirTemp("", "effectd-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(profile) })
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(bin), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile), chromedp.WindowSize(1280, 900))
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute) // a deadline for a loaded machine, not a wait
	defer cancelTimeout()
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	base := e.srv.URL
	run("log in with scripts disabled", emulation.SetScriptExecutionDisabled(true),
		chromedp.Navigate(base+"/ui/login"), chromedp.WaitVisible("#token", chromedp.ByQuery),
		chromedp.SendKeys("#token", operatorToken, chromedp.ByQuery), chromedp.Click("#login", chromedp.ByQuery),
		chromedp.WaitVisible("#charts", chromedp.ByQuery))

	tables := func(ids ...string) map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, id := range ids {
			var text string
			run("read "+id, chromedp.EvaluateAsDevTools(`[...document.querySelectorAll("#`+id+` tr")].map(r =>
				[...r.cells].map(c => c.textContent.trim()).join(" ")).join("\n")`, &text))
			out[id] = spaces.ReplaceAllString(text, " ")
		}
		return out
	}
	check := func(page string, got map[string]string, want map[string][]string) {
		t.Helper()
		for id, parts := range want {
			for _, p := range parts {
				if !strings.Contains(got[id], p) {
					t.Errorf("%s: #%s lacks %q: %s", page, id, p, got[id])
				}
			}
		}
	}
	ids := []string{"chart-throughput-numbers", "chart-latency-numbers", "chart-backlog-numbers", "chart-oldest-due-numbers",
		"chart-delivery-numbers", "chart-errors-numbers", "chart-marks"}
	check("overview", tables(ids...), map[string][]string{
		"chart-throughput-numbers": {chartRow(tenAgo, "9", "1", "0", "0"), chartRow(fiveAgo, "2", "0", "1", "1"), "total 11 1 1 1"},
		"chart-latency-numbers":    {chartRow(tenAgo, "1217.7", "4871"), chartRow(fiveAgo, "1217.7", "4871")},
		"chart-backlog-numbers":    {chartRow(now, "7")},
		"chart-oldest-due-numbers": {chartRow(now, "42")},
		"chart-delivery-numbers":   {chartRow(tenAgo, "0", "3", "0"), chartRow(fiveAgo, "0", "0", "1"), "total 0 3 1"},
		"chart-errors-numbers":     {chartRow(tenAgo, "1", "2"), "total 1 2"},
		"chart-marks":              {"payments-oncall channel.pause sms", "admin channel.policy sms"},
	})

	run("open the sms channel", chromedp.Navigate(base+"/ui/channels/sms"), chromedp.WaitVisible("#charts", chromedp.ByQuery))
	check("channel sms", tables(ids...), map[string][]string{
		"chart-throughput-numbers": {chartRow(tenAgo, "5", "1", "0", "0"), chartRow(fiveAgo, "2", "0", "1", "1"), "total 7 1 1 1"},
		"chart-latency-numbers":    {chartRow(tenAgo, "1217.7", "1217.7"), chartRow(fiveAgo, "1217.7", "4871")},
		"chart-backlog-numbers":    {chartRow(now, "7")},
		"chart-marks":              {"payments-oncall channel.pause sms", "admin channel.policy sms"},
	})
	var marks, policyMarks, lines, scripts int
	run("count what the SVG draws",
		chromedp.EvaluateAsDevTools(`document.querySelectorAll("#chart-throughput svg line.mark").length`, &marks),
		chromedp.EvaluateAsDevTools(`document.querySelectorAll("#chart-throughput svg line.mark-policy").length`, &policyMarks),
		chromedp.EvaluateAsDevTools(`document.querySelectorAll("#charts svg polyline").length`, &lines),
		chromedp.EvaluateAsDevTools(`document.scripts.length`, &scripts))
	if marks != 2 || policyMarks != 1 || lines < 6 || scripts != 0 {
		t.Errorf("the throughput chart marks %d audit entries (%d policy changes), the charts draw %d lines, the page has %d scripts; want 2, 1, at least 6, none",
			marks, policyMarks, lines, scripts)
	}
	var title string
	run("read the policy mark", chromedp.TextContent("#chart-throughput svg line.mark-policy title", &title, chromedp.ByQuery))
	if !strings.Contains(title, "admin: channel.policy sms") {
		t.Errorf("the policy change's mark says %q", title)
	}

	run("follow the 24h link without a script", chromedp.Click(`.ranges a[href*="range=24h"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`.ranges a[aria-current="page"][href*="range=24h"]`, chromedp.ByQuery))
	check("channel sms, 24h", tables("chart-throughput-numbers", "chart-delivery-numbers"), map[string][]string{
		"chart-throughput-numbers": {"total 7 1 1 1"},
		"chart-delivery-numbers":   {"total 0 3 1"},
	})
	if dir := os.Getenv("EFFECTD_CHART_SCREENSHOT"); dir != "" {
		var png []byte
		run("screenshot", chromedp.Navigate(base+"/ui/channels/sms"), chromedp.WaitVisible("#charts", chromedp.ByQuery),
			chromedp.FullScreenshot(&png, 100)) // quality 100: PNG
		if err := os.WriteFile(dir, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestChartsRangeRefused: a range the charts do not offer is refused with a
// message naming the field, not drawn as something else.
func TestChartsRangeRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := browserless(t)
	login(t, c, e.srv.URL, operatorToken)
	resp, body := get(t, c, e.srv.URL+"/ui/channels/sms?range=1y")
	if resp.StatusCode != 422 || !strings.Contains(body, "range") || !strings.Contains(body, "1h, 24h or 7d") {
		t.Fatalf("range=1y: %d %s", resp.StatusCode, body)
	}
}
