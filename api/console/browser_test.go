package console

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the path of a Chromium to drive. Without one the test
// skips, except in CI (CI set), where .ci/run installs it and it must run.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed, and CI is set: .ci/run should have installed it (apt-get install chromium)")
	}
	t.Skip("chromium is not installed (Debian: apt-get install chromium); skipping the browser test outside CI")
	return ""
}

// screens keeps the screenshots of a browser test: in $EFFECTD_SCREENSHOTS
// when set, else in a new directory that the test prints and leaves behind.
func screens(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("EFFECTD_SCREENSHOTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "effectd-console-screens-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots of each step: %s", dir)
	return dir
}

// TestBrowserInDoubtStory drives headless Chromium through the console: the
// redirect without a session, logging in, finding the in-doubt intent from
// the overview, reading its evidence, resolving it with a reason; then a
// forged form refused with 403, a channel, a bulk action and logging out.
func TestBrowserInDoubtStory(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e := setup(t)
	id := e.insertInDoubt(t, "otp-7f3a")
	other := e.insertInDoubt(t, "otp-91c2")
	e.insertInDoubt(t, "otp-b410")
	dir := screens(t)

	profile, err := os.MkdirTemp("", "effectd-chromium-") // a fresh user-data-dir
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(profile) })
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile), chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute) // a deadline for a loaded machine, not a wait
	defer cancelTimeout()

	step := 0
	// shot saves a screenshot of the page, and checks that the page fits the
	// 1280-px window: nothing wider than the window, no table wider than its box.
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var png []byte
			if err := chromedp.FullScreenshot(&png, 100).Do(ctx); err != nil {
				return err
			}
			step++
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%02d-%s.png", step, name)), png, 0o644); err != nil {
				return err
			}
			var width struct{ Window, Document, Overflowing int }
			if err := chromedp.Evaluate(`({Window: window.innerWidth, Document: document.documentElement.scrollWidth,
				Overflowing: [...document.querySelectorAll("table")].filter(t => t.scrollWidth > t.parentElement.clientWidth).length})`, &width).Do(ctx); err != nil {
				return err
			}
			if width.Window != 1280 || width.Document > 1280 || width.Overflowing > 0 {
				t.Errorf("%s: the page is %d px wide in a %d-px window, %d table(s) wider than their box; want it to fit 1280 px",
					name, width.Document, width.Window, width.Overflowing)
			}
			return nil
		})
	}
	clicks := 0
	click := func(sel string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			clicks++
			return chromedp.Click(sel, chromedp.ByQuery).Do(ctx)
		})
	}
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		began := time.Now()
		if err := chromedp.Run(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: %s", what, time.Since(began).Round(time.Millisecond))
	}
	var loc, text string
	base := e.srv.URL
	intentURL := fmt.Sprintf("%s/ui/intents/%d", base, id)

	// No session: a link to the intent lands on the login page, showing nothing of it.
	run("open the intent without a session", chromedp.Navigate(intentURL), chromedp.WaitVisible("#token", chromedp.ByQuery),
		chromedp.Location(&loc), chromedp.Text("body", &text, chromedp.ByQuery), shot("login"))
	if loc != base+"/ui/login" || strings.Contains(text, "otp-7f3a") {
		t.Fatalf("without a session: at %s showing %q; want the login page and no data", loc, text)
	}

	start := time.Now()
	run("log in", chromedp.SendKeys("#token", operatorToken, chromedp.ByQuery), click("#login"),
		chromedp.WaitVisible("#in-doubt-link", chromedp.ByQuery), chromedp.Text("#in-doubt-link", &text, chromedp.ByQuery), shot("overview"))
	clicks++ // the token field
	if !strings.Contains(text, "3 intents IN_DOUBT") {
		t.Errorf("overview says %q, want 3 intents IN_DOUBT", text)
	}
	run("find the in-doubt intents", click("#in-doubt-link"), chromedp.WaitVisible("#intents", chromedp.ByQuery),
		chromedp.Text("#intents", &text, chromedp.ByQuery), shot("in-doubt-list"))
	if strings.Count(text, "IN_DOUBT") != 3 {
		t.Errorf("the in-doubt list shows %q, want 3 IN_DOUBT rows", text)
	}
	run("open the intent", click(fmt.Sprintf(`#intents a[href="/ui/intents/%d"]`, id)), chromedp.WaitVisible("#timeline", chromedp.ByQuery),
		chromedp.Text("#timeline", &text, chromedp.ByQuery), shot("intent-evidence"))
	for _, evidence := range []string{"send #1: maybe_sent", "worker lost its lease mid-call", "lookup #1: ambiguous", "2 messages to +1500555**** match the body"} {
		if !strings.Contains(text, evidence) {
			t.Errorf("the timeline lacks %q: %s", evidence, text)
		}
	}
	const reason = "SM5f2 delivered per Twilio log; second match is an older code"
	run("resolve it as sent with a reason",
		click(`#resolve input[name="as"][value="sent"]`),
		click("#provider_ref"), chromedp.SendKeys("#provider_ref", "SM5f2a9c", chromedp.ByQuery),
		click("#reason"), chromedp.SendKeys("#reason", reason, chromedp.ByQuery),
		click(`#resolve button[type="submit"]`),
		chromedp.WaitVisible(".flash.ok", chromedp.ByQuery), chromedp.Text("#status", &text, chromedp.ByQuery))
	elapsed := time.Since(start)
	if text != "SENT" || e.status(t, id) != "SENT" {
		t.Fatalf("after resolving: the page says %q, the database %s; want SENT", text, e.status(t, id))
	}
	run("read the audit", chromedp.Text("#timeline", &text, chromedp.ByQuery), shot("resolved"))
	if !strings.Contains(text, "payments-oncall") || !strings.Contains(text, reason) || !strings.Contains(text, "IN_DOUBT → SENT") {
		t.Errorf("the timeline does not show who resolved it and why: %s", text)
	}
	var ref, actor string
	e.pool.QueryRow(context.Background(), `SELECT provider_ref FROM effectd.intents WHERE id = $1`, id).Scan(&ref)
	e.pool.QueryRow(context.Background(), `SELECT actor FROM effectd.audit WHERE intent_id = $1`, id).Scan(&actor)
	if ref != "SM5f2a9c" || actor != "payments-oncall" {
		t.Errorf("stored provider_ref %q by %q", ref, actor)
	}
	t.Logf("in-doubt story: %d clicks from the login form to SENT, %s of browser time", clicks, elapsed.Round(time.Millisecond))

	// A form whose CSRF token was tampered with is refused, and changes nothing.
	run("forge a resolve", chromedp.Navigate(fmt.Sprintf("%s/ui/intents/%d", base, other)), chromedp.WaitVisible("#resolve", chromedp.ByQuery),
		chromedp.SetValue(`#resolve input[name="csrf"]`, "forged", chromedp.ByQuery),
		chromedp.Click(`#resolve input[name="as"][value="skip"]`, chromedp.ByQuery),
		chromedp.SendKeys("#reason", "forged", chromedp.ByQuery),
		chromedp.Click(`#resolve button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#error", chromedp.ByQuery), chromedp.Text("main", &text, chromedp.ByQuery), shot("csrf-refused"))
	if !strings.Contains(text, "Forbidden") || !strings.Contains(text, "nothing was changed") || e.status(t, other) != "IN_DOUBT" {
		t.Fatalf("forged form: page %q, intent %s; want 403 and IN_DOUBT", text, e.status(t, other))
	}

	run("a channel", chromedp.Navigate(base+"/ui/channels/sms"), chromedp.WaitVisible("#policy", chromedp.ByQuery), shot("channel"))

	run("bulk from the in-doubt list", chromedp.Navigate(base+"/ui/intents?status=IN_DOUBT&channel=sms"),
		chromedp.WaitVisible("#intents", chromedp.ByQuery), chromedp.Click("details summary", chromedp.ByQuery),
		chromedp.Click(`input[name="action"][value="resolve:skip"]`, chromedp.ByQuery),
		chromedp.SendKeys(`details textarea[name="reason"]`, "codes expired; the user asks for a new one", chromedp.ByQuery),
		shot("bulk-form"),
		chromedp.Click(`details button[type="submit"]`, chromedp.ByQuery), chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.Text("#confirm", &text, chromedp.ByQuery), shot("bulk-preview"))
	if text != "Resolve as skip these 2 intents" {
		t.Errorf("bulk confirmation button says %q", text)
	}
	run("confirm the bulk action", chromedp.Click("#confirm", chromedp.ByQuery), chromedp.WaitVisible("#bulk-result", chromedp.ByQuery),
		chromedp.Text("#bulk-result", &text, chromedp.ByQuery), shot("bulk-result"))
	if !strings.HasPrefix(text, "2 applied, 0 skipped") {
		t.Errorf("bulk result %q", text)
	}

	run("log out", chromedp.Click(".logout button", chromedp.ByQuery), chromedp.WaitVisible("#token", chromedp.ByQuery),
		chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible("#token", chromedp.ByQuery), chromedp.Location(&loc))
	if loc != base+"/ui/login" {
		t.Errorf("after logout /ui/ lands on %s, want the login page", loc)
	}
}
