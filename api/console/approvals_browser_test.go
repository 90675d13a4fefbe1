package console

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserApprovalQueue drives headless Chromium through the approvals
// queue: a request alice made shows to bob with its intent, reason and
// approve form, which he fills and sends; the queue is then empty and the
// intent settled. The screenshot of the queue is docs/console/11-approvals.png.
func TestBrowserApprovalQueue(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e := setupTwoPerson(t)
	id := e.insertInDoubt(t, "otp-5d21")
	e.insertInDoubt(t, "otp-77aa")
	req, _ := http.NewRequest("POST", fmt.Sprintf("%s/v1/intents/%d/resolve?event_id=otp-5d21", e.srv.URL, id),
		strings.NewReader(`{"as":"skip","reason":"the customer got the code by voice call"}`))
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("alice's resolve: %v %v", resp, err)
	}
	resp.Body.Close()
	dir := screens(t)
	profile, err := os.MkdirTemp("", "effectd-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(profile) })
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(profile), chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute) // a deadline for a loaded machine, not a wait
	defer cancelTimeout()

	var queue, after string
	var png []byte
	err = chromedp.Run(ctx,
		chromedp.Navigate(e.srv.URL+"/ui/login"), chromedp.WaitVisible("#token", chromedp.ByQuery),
		chromedp.SendKeys("#token", bobToken, chromedp.ByQuery), chromedp.Click("#login", chromedp.ByQuery),
		chromedp.WaitVisible("header nav", chromedp.ByQuery),
		chromedp.Navigate(e.srv.URL+"/ui/approvals"), chromedp.WaitVisible("#approvals", chromedp.ByQuery),
		chromedp.Text("#approvals", &queue, chromedp.ByQuery), chromedp.FullScreenshot(&png, 100),
		chromedp.SendKeys("#request-1 input[name=reason]", "checked the call log", chromedp.ByQuery),
		chromedp.Click("#request-1 button.approve", chromedp.ByQuery), chromedp.WaitVisible("#none", chromedp.ByQuery),
		chromedp.Text("main", &after, chromedp.ByQuery))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "11-approvals.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"otp-5d21", "alice", "intent.resolve_skip", "the customer got the code by voice call"} {
		if !strings.Contains(queue, want) {
			t.Errorf("the queue does not show %q:\n%s", want, queue)
		}
	}
	if !strings.Contains(after, "Request 1 approved") || e.status(t, id) != "SKIPPED" {
		t.Errorf("after approving (intent %s):\n%s", e.status(t, id), after)
	}
}
