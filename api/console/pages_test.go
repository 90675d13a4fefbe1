package console

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/policy"
)

// insertSent records an SMS intent that was SENT after a first call timed
// out, with what its provider said of its delivery.
func (e env) insertSent(t *testing.T, event, delivery, detail string) int64 {
	t.Helper()
	return fixture.Intent(t, e.pool, fixture.Channel("sms"), fixture.Event(event), fixture.Status("SENT"), fixture.Attempts(2),
		fixture.Payload(`{"to":"+15005550006","body":"hi"}`), fixture.ProviderRef("SMok1"),
		fixture.LastError("twilio: timeout after 10s"), fixture.Delivery(delivery, detail)).ID
}

// TestStaleErrorNotAnAlarm: the last error of a SENT intent is from an
// earlier attempt: it is labelled so, not shown as an error, on the intent
// page and in the list; an IN_DOUBT intent's error still is one.
func TestStaleErrorNotAnAlarm(t *testing.T) {
	t.Parallel()
	e := setup(t)
	sent := e.insertSent(t, "evt-sent", "", "")
	e.insertInDoubt(t, "evt-doubt")
	c := browserless(t)
	login(t, c, e.srv.URL, operatorToken)
	current := regexp.MustCompile(`class="err"[^>]*>[^<]*lookup: 2 messages`)
	stale := regexp.MustCompile(`class="err"[^>]*>[^<]*twilio: timeout`)
	earlier := regexp.MustCompile(`class="earlier"[^>]*>earlier \(now SENT\): twilio: timeout after 10s<`)

	_, body := get(t, c, e.srv.URL+"/ui/intents/"+itoa(sent))
	if stale.MatchString(body) || !earlier.MatchString(body) {
		t.Errorf("SENT intent page: the old error is not labelled as earlier:\n%s", section(body, "last error"))
	}
	_, body = get(t, c, e.srv.URL+"/ui/intents")
	if stale.MatchString(body) || !earlier.MatchString(body) {
		t.Errorf("list: the SENT row's old error is not labelled as earlier:\n%s", section(body, "evt-sent"))
	}
	if !current.MatchString(body) {
		t.Errorf("list: the IN_DOUBT row's error is not shown as an error:\n%s", section(body, "evt-doubt"))
	}
}

// section returns some of body around the first mention of s.
func section(body, s string) string {
	i := strings.Index(body, s)
	if i < 0 {
		return body
	}
	return body[max(i-200, 0):min(i+600, len(body))]
}

// TestDeliveryValueAndDetail: the intent's delivery and the provider's
// detail are shown apart, and the provider's status is not repeated when it
// is the delivery's own word.
func TestDeliveryValueAndDetail(t *testing.T) {
	t.Parallel()
	e := setup(t)
	same := e.insertSent(t, "evt-30003", "undelivered", "undelivered 30003")
	other := e.insertSent(t, "evt-30008", "undelivered", "failed 30008")
	plain := e.insertSent(t, "evt-ok", "delivered", "delivered")
	fixture.AddProviderEvents(t, e.pool, fixture.ProviderEvent{Provider: "twilio", EventID: "SMok1:undelivered", Channel: "sms",
		IntentID: same, ObjectRef: "SMok1", Type: "undelivered", Status: "undelivered", Delivery: "undelivered",
		Detail: "undelivered 30003", Outcome: "applied"})
	c := browserless(t)
	login(t, c, e.srv.URL, operatorToken)
	delivery := regexp.MustCompile(`(?s)<dd id="delivery">(.*?)</dd>`)
	for id, want := range map[int64]string{
		same:  `<strong>undelivered</strong> <span class="detail">provider code 30003</span>`,
		other: `<strong>undelivered</strong> <span class="detail">provider status failed, code 30008</span>`,
		plain: `<strong>delivered</strong>`,
	} {
		_, body := get(t, c, e.srv.URL+"/ui/intents/"+itoa(id))
		m := delivery.FindStringSubmatch(body)
		if m == nil || strings.TrimSpace(m[1]) != want {
			t.Errorf("intent %d: delivery shown as %q, want %q", id, m, want)
		}
		if strings.Contains(body, "undelivered undelivered") {
			t.Errorf("intent %d: the page repeats the delivery: %s", id, section(body, "undelivered undelivered"))
		}
	}
	_, body := get(t, c, e.srv.URL+"/ui/intents/"+itoa(same))
	if !strings.Contains(body, "<strong>twilio undelivered</strong>") || !strings.Contains(body, "provider code 30003 · outcome applied") {
		t.Errorf("the timeline's provider event:\n%s", section(body, "provider event"))
	}
}

// TestPolicySourcesAndValues: a channel registered as the configuration
// does (every field stored) marks as YAML only what its YAML changed, as
// override what the API set, the rest as default; values read as a person
// writes them, not as JSON.
func TestPolicySourcesAndValues(t *testing.T) {
	t.Parallel()
	e := setup(t)
	p := policy.Default("twilio")
	p.MaxAttempts, p.RatePerSecond = 5, 10
	p.DeliveryPoll = policy.PollDelays{policy.Duration(time.Minute), policy.Duration(10 * time.Minute)}
	if err := dispatcher.Register(context.Background(), e.pool, []dispatcher.Channel{{Name: "otp", Kind: "twilio", Policy: p}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(context.Background(), `UPDATE effectd.channels SET policy_override = '{"backoff": {"max": "1h0m0s"}}' WHERE name = 'otp'`); err != nil {
		t.Fatal(err)
	}
	c := browserless(t)
	login(t, c, e.srv.URL, operatorToken)
	_, body := get(t, c, e.srv.URL+"/ui/channels/otp")
	row := func(name, value, source string) string {
		return `<td>` + name + `</td><td>` + value + `</td><td class="source source-` + source + `">` + source + `</td>`
	}
	for _, want := range []string{
		row("max_attempts", "5", "YAML"), row("rate_per_second", "10", "YAML"), row("delivery_poll", "1m, 10m", "YAML"),
		row("backoff.max", "1h", "override"), row("backoff.base", "1s", "default"),
		row("lease", "30s", "default"), row("in_doubt", "lookup", "default"), row("concurrency", "16", "default"),
		row("max_age", "no limit", "default"), row("retention", "15 days (360h)", "default"),
		row("sweep.every", "off", "default"),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("channel page lacks %s", want)
		}
	}
	if table := regexp.MustCompile(`(?s)<table id="policy">.*?</table>`).FindString(body); table == "" || strings.Contains(table, "&#34;") {
		t.Errorf("the policy table shows JSON quotes, or is missing:\n%s", table)
	}
	_, body = get(t, c, e.srv.URL+"/ui/channels/sms") // a row written by hand: rate 10, no delivery poll
	for _, want := range []string{row("delivery_poll", "never", "default"), row("lease", "20s", "YAML")} {
		if !strings.Contains(body, want) {
			t.Errorf("sms channel page lacks %s", want)
		}
	}
}

// TestViewerHasNoBulkForm: a viewer's list has no bulk form, and a bulk
// POST made by hand is refused by the API, freezing nothing.
func TestViewerHasNoBulkForm(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.insertInDoubt(t, "evt-bulk-viewer")
	viewer := browserless(t)
	csrf := login(t, viewer, e.srv.URL, viewerToken)
	_, body := get(t, viewer, e.srv.URL+"/ui/intents?status=IN_DOUBT")
	if !strings.Contains(body, "evt-bulk-viewer") || strings.Contains(body, `action="/ui/bulk"`) {
		t.Errorf("viewer's list: want the intent and no bulk form:\n%s", section(body, "Bulk"))
	}
	resp, _ := post(t, viewer, e.srv.URL+"/ui/bulk", url.Values{"csrf": {csrf}, "status": {"IN_DOUBT"},
		"action": {"resolve:skip"}, "reason": {"forged"}})
	_, body = get(t, viewer, e.srv.URL+resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(body, "No snapshot taken") {
		t.Errorf("viewer's bulk POST: %d, want refused and said so", resp.StatusCode)
	}
	var n int
	e.pool.QueryRow(context.Background(), `SELECT count(*) FROM effectd.bulk_snapshots`).Scan(&n)
	if n != 0 {
		t.Errorf("viewer's bulk POST froze %d snapshots", n)
	}
	operator := browserless(t)
	login(t, operator, e.srv.URL, operatorToken)
	if _, body := get(t, operator, e.srv.URL+"/ui/intents?status=IN_DOUBT"); !strings.Contains(body, `action="/ui/bulk"`) {
		t.Errorf("operator's list has no bulk form")
	}
}
