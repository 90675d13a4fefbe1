package console

import (
	"crypto/rand"
	"net/http"

	"github.com/effectd/effectd/api"
)

func (c *console) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.who(r); ok {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "login", "Log in", map[string]any{"NoAuth": c.noAuth})
}

// login starts a session for the token in the form field "token".
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
	// A new session id at login, so that one planted before it is worth nothing.
	if err := c.sessions.RenewToken(r.Context()); err != nil {
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
