package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// sessionRows counts the rows of effectd.console_sessions.
func (e env) sessionRows(t *testing.T) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM effectd.console_sessions`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAnonymousWritesNoSession: a client that has not logged in — loading
// the login page over and over, with or without cookies, trying wrong tokens
// or forged forms — writes no session row. A login writes one, and a login
// form whose CSRF token does not match its cookie is refused.
func TestAnonymousWritesNoSession(t *testing.T) {
	t.Parallel()
	e := setup(t)
	base := e.srv.URL
	for range 25 {
		get(t, browserless(t), base+"/ui/login") // a new client each time, as a flood would
	}
	c := browserless(t)
	for range 25 {
		get(t, c, base+"/ui/login") // one client keeping its cookies
	}
	for _, path := range []string{"/ui/", "/ui/intents", "/ui/nope", "/ui/static/style.css"} {
		get(t, c, base+path)
	}
	_, page := get(t, c, base+"/ui/login")
	csrf := csrfField.FindStringSubmatch(page)[1]
	resp, _ := post(t, c, base+"/ui/login", url.Values{"csrf": {csrf}, "token": {"wrong"}})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d, want 401", resp.StatusCode)
	}
	post(t, c, base+"/ui/logout", url.Values{"csrf": {csrf}})
	if n := e.sessionRows(t); n != 0 {
		t.Fatalf("after anonymous requests: %d session rows, want 0", n)
	}

	// Forged login forms are refused: no token, another client's token, no
	// cookie, or a cross-site POST carrying a matching pair.
	_, other := get(t, browserless(t), base+"/ui/login")
	otherCSRF := csrfField.FindStringSubmatch(other)[1]
	for name, try := range map[string]struct {
		c      *http.Client
		csrf   string
		header http.Header
	}{
		"no token":           {c, "", nil},
		"another's token":    {c, otherCSRF, nil},
		"no cookie":          {browserless(t), csrf, nil},
		"cross-site request": {c, csrf, http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}}},
	} {
		form := url.Values{"csrf": {try.csrf}, "token": {adminToken}}
		req, _ := http.NewRequest(http.MethodPost, base+"/ui/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range try.header {
			req.Header[k] = v
		}
		resp, err := try.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("login with %s: %d, want 403", name, resp.StatusCode)
		}
	}
	if n := e.sessionRows(t); n != 0 {
		t.Fatalf("after forged logins: %d session rows, want 0", n)
	}

	// The real form logs in: one row, and the pages work.
	token := login(t, c, base, operatorToken)
	if n := e.sessionRows(t); n != 1 {
		t.Errorf("after a login: %d session rows, want 1", n)
	}
	if resp, body := get(t, c, base+"/ui/channels/sms"); resp.StatusCode != 200 || !strings.Contains(body, "Pause sms") {
		t.Errorf("after a login, the channel page: %d", resp.StatusCode)
	}
	resp, _ = post(t, c, base+"/ui/channels/sms/pause", url.Values{"csrf": {token}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a logged-in form: %d, want 303", resp.StatusCode)
	}
	// The login form's token is not the session's: it cannot pass for a logged-in form.
	resp, _ = post(t, c, base+"/ui/channels/sms/resume", url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a logged-in form with the login page's token: %d, want 403", resp.StatusCode)
	}
}

// TestSecondLoginStartsNewSession: a second person logging in in the same
// browser gets the login form, and a new session: a new id, the new person's
// name and role on every page, nothing of the earlier session's; the earlier
// session ends (its row is gone, its cookie opens nothing).
func TestSecondLoginStartsNewSession(t *testing.T) {
	t.Parallel()
	e := setup(t)
	base := e.srv.URL
	c := browserless(t)
	login(t, c, base, adminToken)
	u, _ := url.Parse(base + "/ui/")
	first := sessionCookie(c, u)
	if first == "" {
		t.Fatal("no session cookie after the first login")
	}

	resp, page := get(t, c, base+"/ui/login")
	m := csrfField.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil || !strings.Contains(page, `name="token"`) {
		t.Fatalf("the login page while logged in: %d, want the login form:\n%s", resp.StatusCode, page)
	}
	resp, _ = post(t, c, base+"/ui/login", url.Values{"csrf": {m[1]}, "token": {viewerToken}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("the second login: %d to %q, want 303 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	second := sessionCookie(c, u)
	if second == "" || second == first {
		t.Fatalf("session id after the second login %q, before %q: want a new one", second, first)
	}
	if _, page := get(t, c, base+"/ui/"); !strings.Contains(page, "support (viewer)") || strings.Contains(page, "admin (admin)") {
		t.Errorf("after the second login the overview does not name the viewer alone:\n%s", page)
	}
	if n := e.sessionRows(t); n != 1 {
		t.Errorf("%d session rows after the second login, want 1: the first session did not end", n)
	}
	old := browserless(t)
	old.Jar.SetCookies(u, []*http.Cookie{{Name: "effectd_session", Value: first, Path: "/ui"}})
	if resp, _ := get(t, old, base+"/ui/"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
		t.Errorf("the first session's cookie: %d to %q, want 303 to /ui/login", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// sessionCookie is the value of c's session cookie for u, or "".
func sessionCookie(c *http.Client, u *url.URL) string {
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "effectd_session" {
			return ck.Value
		}
	}
	return ""
}
