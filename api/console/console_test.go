package console

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/api"
	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/statemachine"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	operatorToken = "oncall-token-0123456789"
	viewerToken   = "viewer-token-0123456789"
	adminToken    = "admin-token-0123456789"
)

// fakeReconciler reports that the provider has the effect.
type fakeReconciler struct{}

func (fakeReconciler) Reconcile(_ context.Context, id int64, dryRun bool, _ string) (effectdtype.ReconcileResult, error) {
	return effectdtype.ReconcileResult{IntentID: id, From: statemachine.InDoubt, To: statemachine.Sent,
		Outcome: dispatcher.LookupFound, ProviderRef: "SMfound", Applied: !dryRun}, nil
}

// env is the admin listener of one instance (API and console) on a migrated database.
type env struct {
	pool *pgxpool.Pool
	srv  *httptest.Server
}

func setup(t *testing.T, tune ...func(*Config)) env {
	t.Helper()
	pool := pgtest.New(t)
	fixture.AddChannel(t, pool, "refund", "stripe", fixture.Policy(`{"in_doubt": "lookup", "lookup_fallback": "manual"}`))
	fixture.AddChannel(t, pool, "sms", "twilio", fixture.Policy(`{"max_attempts": 5, "lease": "20s", "rate_per_second": 10}`))
	tokens := api.Tokens{
		api.NewToken(api.Principal{Name: "payments-oncall", Role: api.RoleOperator}, operatorToken),
		api.NewToken(api.Principal{Name: "support", Role: api.RoleViewer}, viewerToken),
		api.NewToken(api.Principal{Name: "admin", Role: api.RoleAdmin}, adminToken),
	}
	log := slog.New(slog.DiscardHandler)
	ah, err := api.NewHandler(api.Config{Pool: pool, Tokens: tokens, Reconciler: fakeReconciler{}, Registry: prometheus.NewRegistry(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Pool: pool, API: ah, Tokens: tokens, Logger: log}
	for _, f := range tune {
		f(&cfg)
	}
	ui, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", ui)
	mux.Handle("/", ah)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return env{pool: pool, srv: srv}
}

// insertInDoubt records an SMS intent left IN_DOUBT by a crash, with the
// send that lost its lease and the lookup that could not tell.
func (e env) insertInDoubt(t *testing.T, event string) int64 {
	t.Helper()
	now := time.Now()
	id := fixture.Intent(t, e.pool, fixture.Channel("sms"), fixture.Event(event), fixture.Status("IN_DOUBT"),
		fixture.Payload(`{"to":"+15005550006","body":"Your code is 123456"}`),
		fixture.LastError("lookup: 2 messages to +1500555**** match the body"), fixture.CreatedAt(now.Add(-3*time.Minute))).ID
	fixture.AddAttempts(t, e.pool,
		fixture.Attempt{IntentID: id, Kind: "send", StartedAt: now.Add(-3 * time.Minute), Unfinished: true,
			Outcome: "maybe_sent", Error: "worker lost its lease mid-call (process killed)"},
		fixture.Attempt{IntentID: id, Kind: "lookup", StartedAt: now.Add(-2 * time.Minute), Outcome: "ambiguous",
			Error: "2 messages to +1500555**** match the body"})
	return id
}

func (e env) status(t *testing.T, id int64) string {
	t.Helper()
	var s string
	if err := e.pool.QueryRow(context.Background(), `SELECT status FROM effectd.intents WHERE id = $1`, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// browserless is a cookie-keeping HTTP client that does not follow redirects.
func browserless(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// login logs c in with token and returns the session's CSRF token.
func login(t *testing.T, c *http.Client, base, token string) string {
	t.Helper()
	_, page := get(t, c, base+"/ui/login")
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("login page has no CSRF field:\n%s", page)
	}
	resp, _ := post(t, c, base+"/ui/login", url.Values{"csrf": {m[1]}, "token": {token}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page = get(t, c, base+"/ui/")
	if m = csrfField.FindStringSubmatch(page); m == nil {
		t.Fatalf("overview has no CSRF field:\n%s", page)
	}
	return m[1]
}

// TestNoSessionRedirects: without a session every page answers 303 to the
// login page and shows no data.
func TestNoSessionRedirects(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.insertInDoubt(t, "otp-secret-event")
	c := browserless(t)
	for _, path := range []string{"/ui/", "/ui/intents?status=IN_DOUBT", "/ui/intents/" + itoa(id), "/ui/channels/sms", "/ui/nope"} {
		resp, body := get(t, c, e.srv.URL+path)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
			t.Errorf("GET %s: %d to %q, want 303 to /ui/login", path, resp.StatusCode, resp.Header.Get("Location"))
		}
		if strings.Contains(body, "otp-secret-event") || strings.Contains(body, "123456") {
			t.Errorf("GET %s without a session shows data: %s", path, body)
		}
	}
	resp, body := get(t, c, e.srv.URL+"/ui/login")
	if resp.StatusCode != 200 || !strings.Contains(body, `name="token"`) {
		t.Fatalf("login page: %d\n%s", resp.StatusCode, body)
	}
	for h, want := range map[string]string{
		"Content-Security-Policy": "default-src 'self'", "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
	} {
		if !strings.Contains(resp.Header.Get(h), want) {
			t.Errorf("%s: %q, want %q", h, resp.Header.Get(h), want)
		}
	}
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		cookie = ck
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie %+v, want HttpOnly and SameSite=Strict", cookie)
	}
	if strings.Contains(body, "http://") && !strings.Contains(body, "https://") && strings.Contains(body, "<script") {
		t.Errorf("login page loads a script")
	}
	// A wrong token starts no session.
	m := csrfField.FindStringSubmatch(body)
	resp, _ = post(t, c, e.srv.URL+"/ui/login", url.Values{"csrf": {m[1]}, "token": {"wrong"}})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("login with a wrong token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := get(t, c, e.srv.URL+"/ui/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after a refused login, /ui/: %d, want 303", resp.StatusCode)
	}
}

// TestCSRFRefused: a logged-in POST without the session's CSRF token (or
// with another session's) answers 403 and changes nothing.
func TestCSRFRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.insertInDoubt(t, "evt-csrf")
	c := browserless(t)
	token := login(t, c, e.srv.URL, operatorToken)
	other := login(t, browserless(t), e.srv.URL, operatorToken)
	form := url.Values{"as": {"skip"}, "reason": {"forged"}}
	for _, csrf := range []string{"", "forged", other} {
		f := url.Values{"as": form["as"], "reason": form["reason"], "csrf": {csrf}}
		resp, body := post(t, c, e.srv.URL+"/ui/intents/"+itoa(id)+"/resolve", f)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "nothing was changed") {
			t.Errorf("resolve with csrf %q: %d, want 403", csrf, resp.StatusCode)
		}
	}
	if s := e.status(t, id); s != "IN_DOUBT" {
		t.Fatalf("a refused POST changed the intent to %s", s)
	}
	// The same form with the session's token goes through.
	form.Set("csrf", token)
	resp, _ := post(t, c, e.srv.URL+"/ui/intents/"+itoa(id)+"/resolve", form)
	if resp.StatusCode != http.StatusSeeOther || e.status(t, id) != "SKIPPED" {
		t.Fatalf("resolve with the CSRF token: %d, status %s", resp.StatusCode, e.status(t, id))
	}
	// Logout ends the session everywhere it was used.
	post(t, c, e.srv.URL+"/ui/logout", url.Values{"csrf": {token}})
	if resp, _ := get(t, c, e.srv.URL+"/ui/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after logout, /ui/: %d, want 303", resp.StatusCode)
	}
}

// TestViewerCannotAct: a viewer reads the intent page without action forms,
// and a forged action is refused by the API's role check.
func TestViewerCannotAct(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.insertInDoubt(t, "evt-viewer")
	c := browserless(t)
	token := login(t, c, e.srv.URL, viewerToken)
	_, body := get(t, c, e.srv.URL+"/ui/intents/"+itoa(id))
	if !strings.Contains(body, "evt-viewer") || strings.Contains(body, `id="resolve"`) {
		t.Fatalf("viewer's intent page: want the intent and no resolve form:\n%s", body)
	}
	resp, _ := post(t, c, e.srv.URL+"/ui/intents/"+itoa(id)+"/resolve", url.Values{"csrf": {token}, "as": {"skip"}, "reason": {"x"}})
	if resp.StatusCode != http.StatusSeeOther || e.status(t, id) != "IN_DOUBT" {
		t.Fatalf("viewer's resolve: %d, status %s; want refused", resp.StatusCode, e.status(t, id))
	}
	_, body = get(t, c, e.srv.URL+"/ui/intents/"+itoa(id))
	if !strings.Contains(body, "Nothing changed") {
		t.Errorf("the refusal is not shown:\n%s", body)
	}
}

// TestBulkFromList: a filtered list's bulk form shows the frozen count and
// sample, and the confirmation applies exactly the snapshot.
func TestBulkFromList(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, ev := range []string{"b-1", "b-2", "b-3"} {
		e.insertInDoubt(t, ev)
	}
	c := browserless(t)
	token := login(t, c, e.srv.URL, operatorToken)
	resp, body := post(t, c, e.srv.URL+"/ui/bulk", url.Values{"csrf": {token}, "status": {"IN_DOUBT"}, "channel": {"sms"},
		"action": {"resolve:skip"}, "reason": {"carrier outage, codes expired"}})
	if resp.StatusCode != 200 || !strings.Contains(body, "Resolve as skip these 3 intents") || !strings.Contains(body, "b-2") {
		t.Fatalf("bulk preview: %d\n%s", resp.StatusCode, body)
	}
	var n int
	e.pool.QueryRow(context.Background(), `SELECT count(*) FROM effectd.intents WHERE status = 'IN_DOUBT'`).Scan(&n)
	if n != 3 {
		t.Fatalf("the preview changed intents: %d IN_DOUBT", n)
	}
	action := regexp.MustCompile(`action="(/ui/bulk/[^"]+/apply)"`).FindStringSubmatch(body)
	resp, body = post(t, c, e.srv.URL+action[1], url.Values{"csrf": {token}})
	if resp.StatusCode != 200 || !regexp.MustCompile(`<strong>3</strong> applied, <strong>0</strong> skipped`).MatchString(body) {
		t.Fatalf("bulk apply: %d\n%s", resp.StatusCode, body)
	}
	// No reason: refused, nothing frozen.
	resp, _ = post(t, c, e.srv.URL+"/ui/bulk", url.Values{"csrf": {token}, "status": {"FAILED"}, "action": {"retry"}})
	_, body = get(t, c, e.srv.URL+resp.Header.Get("Location"))
	if !strings.Contains(body, "reason") {
		t.Errorf("bulk without a reason: the refusal does not name the reason:\n%s", body)
	}
}

// TestChannelPolicyPreview: the channel page tells where each value comes
// from, previews a change as a diff, and applies it only on confirmation.
func TestChannelPolicyPreview(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := browserless(t)
	// An admin may change policies.
	tokens := login(t, c, e.srv.URL, operatorToken)
	_, body := get(t, c, e.srv.URL+"/ui/channels/sms")
	for _, want := range []string{`<td>max_attempts</td><td>5</td><td class="source source-YAML">YAML</td>`,
		`<td>concurrency</td><td>16</td><td class="source source-default">default</td>`,
		"Policy changes need the admin role", "Pause sms"} {
		if !strings.Contains(body, want) {
			t.Errorf("channel page lacks %q", want)
		}
	}
	resp, _ := post(t, c, e.srv.URL+"/ui/channels/sms/pause", url.Values{"csrf": {tokens}})
	var paused bool
	e.pool.QueryRow(context.Background(), `SELECT paused FROM effectd.channels WHERE name = 'sms'`).Scan(&paused)
	if resp.StatusCode != http.StatusSeeOther || !paused {
		t.Fatalf("pause: %d, paused %v", resp.StatusCode, paused)
	}

	admin := browserless(t)
	csrf := login(t, admin, e.srv.URL, adminToken)
	resp, body = post(t, admin, e.srv.URL+"/ui/channels/sms/policy", url.Values{"csrf": {csrf}, "patch": {`{"rate_per_second": 2, "max_attempts": null}`}})
	for _, want := range []string{`<td>rate_per_second</td><td>10</td><td class="source source-YAML">YAML</td><td>2 (override)</td>`,
		`<td>max_attempts</td><td>5</td><td class="source source-YAML">YAML</td><td>unchanged`, "Apply this change"} {
		if resp.StatusCode != 200 || !strings.Contains(body, want) {
			t.Errorf("policy preview lacks %q:\n%s", want, body)
		}
	}
	var override string
	e.pool.QueryRow(context.Background(), `SELECT policy_override::text FROM effectd.channels WHERE name = 'sms'`).Scan(&override)
	if override != "{}" {
		t.Fatalf("the preview changed the override: %s", override)
	}
	resp, _ = post(t, admin, e.srv.URL+"/ui/channels/sms/policy", url.Values{"csrf": {csrf}, "confirm": {"yes"}, "patch": {`{"rate_per_second": 2}`}})
	e.pool.QueryRow(context.Background(), `SELECT policy_override::text FROM effectd.channels WHERE name = 'sms'`).Scan(&override)
	if resp.StatusCode != http.StatusSeeOther || override != `{"rate_per_second": 2}` {
		t.Fatalf("policy apply: %d, override %s", resp.StatusCode, override)
	}
}

// TestChannelPolicyPreviewMergesNested: the preview merges a change as the
// API will (a JSON merge patch): a nested key leaves the override's other
// keys in place.
func TestChannelPolicyPreviewMergesNested(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if _, err := e.pool.Exec(context.Background(), `UPDATE effectd.channels SET policy_override = '{"backoff": {"max": "1h0m0s"}}' WHERE name = 'sms'`); err != nil {
		t.Fatal(err)
	}
	admin := browserless(t)
	csrf := login(t, admin, e.srv.URL, adminToken)
	resp, body := post(t, admin, e.srv.URL+"/ui/channels/sms/policy", url.Values{"csrf": {csrf}, "patch": {`{"backoff": {"base": "2s"}}`}})
	for _, want := range []string{
		`<td>backoff.base</td><td>1s</td><td class="source source-default">default</td><td>2s (override)</td>`,
		`<td>backoff.max</td><td>1h</td><td class="source source-override">override</td><td>unchanged</td>`,
	} {
		if resp.StatusCode != 200 || !strings.Contains(body, want) {
			t.Errorf("policy preview lacks %q:\n%s", want, body)
		}
	}
}

func itoa(id int64) string { return strconv.FormatInt(id, 10) }

// TestReconcileDryRunFirst: the reconcile form runs a dry run that shows what
// the lookup found and changes nothing, with a form to apply it.
func TestReconcileDryRunFirst(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.insertInDoubt(t, "evt-reconcile")
	c := browserless(t)
	token := login(t, c, e.srv.URL, operatorToken)
	resp, body := post(t, c, e.srv.URL+"/ui/intents/"+itoa(id)+"/reconcile", url.Values{"csrf": {token}, "dry_run": {"true"}})
	if resp.StatusCode != 200 || !strings.Contains(body, `id="dry-run"`) || !strings.Contains(body, "<strong>found</strong>") ||
		!strings.Contains(body, "IN_DOUBT → SENT") || !strings.Contains(body, `name="dry_run" value="false"`) {
		t.Fatalf("dry run: %d\n%s", resp.StatusCode, body)
	}
	resp, _ = post(t, c, e.srv.URL+"/ui/intents/"+itoa(id)+"/reconcile", url.Values{"csrf": {token}, "dry_run": {"false"}})
	_, body = get(t, c, e.srv.URL+resp.Header.Get("Location"))
	if !strings.Contains(body, "Reconciled: the lookup said found") {
		t.Errorf("apply: the result is not shown:\n%s", body)
	}
	// A time filter the console cannot read is named, not a 500.
	resp, body = get(t, c, e.srv.URL+"/ui/intents?since=yesterday")
	if resp.StatusCode != 200 || !strings.Contains(body, "from: use YYYY-MM-DDTHH:MM (UTC)") {
		t.Errorf("bad since: %d\n%s", resp.StatusCode, body)
	}
}

// TestProviderEventOnTimeline: an event the provider sent about the intent
// shows on its timeline, from GET /v1/provider-events.
func TestProviderEventOnTimeline(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.insertInDoubt(t, "evt-callback")
	fixture.AddProviderEvents(t, e.pool, fixture.ProviderEvent{Provider: "twilio", EventID: "SMcb1:undelivered", Channel: "sms",
		IntentID: id, ObjectRef: "SMcb1", Type: "undelivered", Status: "undelivered", Delivery: "undelivered",
		Detail: "undelivered 30003", Outcome: "applied"})
	c := browserless(t)
	login(t, c, e.srv.URL, operatorToken)
	_, body := get(t, c, e.srv.URL+"/ui/intents/"+itoa(id))
	for _, want := range []string{"<strong>twilio undelivered</strong>", "provider code 30003 · outcome applied", "<code>SMcb1</code>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the timeline lacks %q", want)
		}
	}
}
