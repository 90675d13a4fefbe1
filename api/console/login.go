package console

import (
	"crypto/rand"
	"net/http"

	"github.com/effectd/effectd/api"
)

// loginPage shows the login form, also to a person logged in: a login there
// ends their session and starts the new person's.
func (c *console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", "Log in", map[string]any{"NoAuth": c.noAuth})
}

// login starts a session for the token in the form field "token": always a
// new one, with a new id and nothing of the session it replaces, which ends.
func (c *console) login(w http.ResponseWriter, r *http.Request) {
	secret := r.PostFormValue("token")
	p, ok := c.tokens.Authenticate(secret)
	if c.noAuth {
		p, ok = api.Principal{Name: "anonymous", Role: api.RoleAdmin}, true
	}
	if !ok {
		c.log.WarnContext(r.Context(), "console: login refused")
		c.logins.WithLabelValues("refused").Inc()
		c.render(w, r, http.StatusUnauthorized, "login", "Log in",
			map[string]any{"Error": "That token is not accepted. Paste the whole bearer token.", "NoAuth": c.noAuth})
		return
	}
	// A new session id at login, so that one planted before it is worth
	// nothing; the session it had ends (RenewToken deletes its row), and
	// nothing it held (another person's CSRF token, a flash) carries over.
	if err := c.sessions.RenewToken(r.Context()); err != nil {
		c.renderError(w, r, http.StatusServiceUnavailable, "Could not start a session; try again.")
		return
	}
	if err := c.sessions.Clear(r.Context()); err != nil {
		c.renderError(w, r, http.StatusServiceUnavailable, "Could not start a session; try again.")
		return
	}
	c.sessions.Put(r.Context(), "who", session{Principal: p, TokenHash: sha256Sum(secret)})
	c.sessions.Put(r.Context(), "csrf", rand.Text()) // the session's own CSRF token, not the login form's
	c.setLoginCookie(w, "")
	c.log.InfoContext(r.Context(), "console: login", "actor", p.Name, "role", p.Role)
	c.logins.WithLabelValues("ok").Inc()
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (c *console) logout(w http.ResponseWriter, r *http.Request) {
	p, _ := c.who(r)
	if err := c.sessions.Destroy(r.Context()); err != nil {
		c.renderError(w, r, http.StatusServiceUnavailable, "Could not end the session; try again.")
		return
	}
	c.log.InfoContext(r.Context(), "console: logout", "actor", p.Name)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
