package console

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/gob"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/api"
	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/operator"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Session lifetimes.
const (
	DefaultIdleTimeout = 30 * time.Minute // a session unused this long ends
	DefaultLifetime    = 12 * time.Hour   // a session ends this long after login, used or not
)

// Config is what New needs.
type Config struct {
	Pool           *pgxpool.Pool         // sessions are kept in effectd.console_sessions
	API            http.Handler          // the admin API's handler (api.NewHandler), called in process
	Tokens         api.Tokens            // the tokens a person may log in with
	InsecureNoAuth bool                  // the API serves without tokens: any login is "anonymous", an admin
	SecureCookie   bool                  // mark the session cookie Secure (the listener serves TLS)
	IdleTimeout    time.Duration         // 0: DefaultIdleTimeout
	Lifetime       time.Duration         // 0: DefaultLifetime
	Logger         *slog.Logger          // nil: slog.Default()
	Registerer     prometheus.Registerer // the console's metrics; nil: not registered
	// TraceURL is a trace UI's address of one trace, {trace_id} standing
	// for its id (tracing.ui_url): an intent's trace id links to it. "":
	// the id is shown alone.
	TraceURL string
}

// loginCookie keeps the login form's CSRF token, so that a person who has
// not logged in has no session row.
const loginCookie = "effectd_login_csrf"

// console holds what the page handlers share.
type console struct {
	api          http.Handler
	tokens       api.Tokens
	noAuth       bool
	secureCookie bool
	sessions     *scs.SessionManager
	crossOrigin  *http.CrossOriginProtection
	pages        map[string]*template.Template
	log          *slog.Logger
	traceURL     string // Config.TraceURL

	logins      *prometheus.CounterVec // effectd_console_logins_total{result}
	csrfRefused prometheus.Counter     // effectd_console_csrf_refused_total
}

// session is what a session remembers of the person who logged in.
type session struct {
	Principal api.Principal
	TokenHash [sha256.Size]byte // to drop the session when its token is removed
}

func init() { gob.Register(session{}) }

// New returns the console's handler, to be served at /ui/.
func New(cfg Config) (http.Handler, error) {
	if cfg.Pool == nil || cfg.API == nil {
		return nil, errors.New("console.New: Config.Pool and Config.API are required")
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	sm := scs.New()
	sm.Store = store{operator.Sessions{Pool: cfg.Pool}}
	sm.IdleTimeout = cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout)
	sm.Lifetime = cmp.Or(cfg.Lifetime, DefaultLifetime)
	sm.Cookie.Name = "effectd_session"
	sm.Cookie.Path = "/ui"
	sm.Cookie.HttpOnly = true
	sm.Cookie.SameSite = http.SameSiteStrictMode
	sm.Cookie.Secure = cfg.SecureCookie
	sm.Cookie.Persist = false
	c := &console{api: cfg.API, tokens: cfg.Tokens, noAuth: cfg.InsecureNoAuth, secureCookie: cfg.SecureCookie,
		sessions: sm, crossOrigin: http.NewCrossOriginProtection(), pages: pages, log: cmp.Or(cfg.Logger, slog.Default()),
		traceURL: cfg.TraceURL,
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "effectd_console_logins_total",
			Help: "Console logins, by result: ok or refused (an unknown token)."}, []string{"result"}),
		csrfRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "effectd_console_csrf_refused_total",
			Help: "Console POSTs refused because their CSRF token was missing or wrong, or a browser marked them cross-site."}),
	}
	if cfg.Registerer != nil {
		for _, m := range []prometheus.Collector{c.logins, c.csrfRefused} {
			if err := cfg.Registerer.Register(m); err != nil {
				return nil, fmt.Errorf("console.New: register metrics: %w", err)
			}
		}
	}
	sm.ErrorFunc = func(w http.ResponseWriter, r *http.Request, err error) {
		c.log.ErrorContext(r.Context(), "console: session store", "err", err)
		http.Error(w, "session store unavailable", http.StatusServiceUnavailable)
	}
	return c.routes(), nil
}

// routes lists every page of the console.
func (c *console) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer, securityHeaders, c.sessions.LoadAndSave)
	static, _ := fs.Sub(staticFS, "static")
	r.Handle("/ui/static/*", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	r.Get("/ui/login", c.loginPage)
	r.With(c.checkCSRF(c.loginFormCSRF)).Post("/ui/login", c.login)
	r.Group(func(r chi.Router) {
		r.Use(c.checkCSRF(c.sessionCSRF), c.requireSession)
		r.Post("/ui/logout", c.logout)
		r.Get("/ui/", c.overview)
		r.Get("/ui/intents", c.intents)
		r.Get("/ui/intents/{id}", c.intent)
		r.Post("/ui/intents/{id}/{action:resolve|retry|cancel|reconcile}", c.intentAction)
		r.Get("/ui/channels/{name}", c.channel)
		r.Post("/ui/channels/{name}/{action:pause|resume|policy}", c.channelAction)
		r.Post("/ui/bulk", c.bulkPreview)
		r.Post("/ui/bulk/{snapshot}/apply", c.bulkApply)
		r.Get("/ui/approvals", c.approvals)
		r.Post("/ui/approvals/{id}/{action:approve|reject}", c.approvalAction)
		r.Get("/ui/sweep", c.sweepPage)
		r.Post("/ui/sweep", c.sweep)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := c.who(r); !ok {
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
		c.renderError(w, r, http.StatusNotFound, "No such page.")
	})
	return r
}

// securityHeaders keeps pages to their own origin: no script, style, frame
// or form target from elsewhere, no framing, no sniffing, no caching.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// who returns the person logged in on r's session, if the token they logged
// in with is still accepted.
func (c *console) who(r *http.Request) (api.Principal, bool) {
	s, ok := c.sessions.Get(r.Context(), "who").(session)
	if !ok {
		return api.Principal{}, false
	}
	if c.noAuth {
		return s.Principal, true
	}
	for _, t := range c.tokens {
		if subtle.ConstantTimeCompare(t.SHA256[:], s.TokenHash[:]) == 1 {
			return t.Principal, true
		}
	}
	return api.Principal{}, false
}

// requireSession sends a request without a live session to the login page,
// showing no data.
func (c *console) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := c.who(r); !ok {
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// csrfToken returns the CSRF token for the forms of the page r asks for: the
// session's for a person logged in (created on first use); else the login
// form's, kept in a cookie of its own, so that no session row is written
// before a login.
func (c *console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if _, ok := c.who(r); ok {
		if t := c.sessions.GetString(r.Context(), "csrf"); t != "" {
			return t
		}
		t := rand.Text()
		c.sessions.Put(r.Context(), "csrf", t)
		return t
	}
	if t := loginCSRF(r); t != "" {
		return t
	}
	t := rand.Text()
	c.setLoginCookie(w, t)
	return t
}

// setLoginCookie keeps the login form's CSRF token t, or drops it when t is "".
func (c *console) setLoginCookie(w http.ResponseWriter, t string) {
	ck := &http.Cookie{Name: loginCookie, Value: t, Path: "/ui", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.secureCookie}
	if t == "" {
		ck.MaxAge = -1
	}
	http.SetCookie(w, ck)
}

// loginCSRF is the login form's CSRF token that r's cookie carries, or "".
func loginCSRF(r *http.Request) string {
	ck, err := r.Cookie(loginCookie)
	if err != nil || len(ck.Value) > 64 {
		return ""
	}
	return ck.Value
}

// loginFormCSRF is the token the login form carries (csrfToken): the
// session's for a person logged in, else the login cookie's.
func (c *console) loginFormCSRF(r *http.Request) string {
	if _, ok := c.who(r); ok {
		return c.sessionCSRF(r)
	}
	return loginCSRF(r)
}

// sessionCSRF is the CSRF token of r's session, or "".
func (c *console) sessionCSRF(r *http.Request) string {
	return c.sessions.GetString(r.Context(), "csrf")
}

// checkCSRF refuses, with 403 and no change, a POST that a browser marks as
// sent from another site, or whose form does not carry the token want
// returns (the session's, or the login cookie's: a double-submit token).
func (c *console) checkCSRF(want func(*http.Request) string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
				want, got := want(r), r.PostFormValue("csrf")
				if c.crossOrigin.Check(r) != nil || want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1 {
					c.log.WarnContext(r.Context(), "console: POST refused: sent from another site, or without a valid CSRF token", "path", r.URL.Path)
					c.csrfRefused.Inc()
					c.renderError(w, r, http.StatusForbidden,
						"This form's security token is missing or out of date, so nothing was changed. Reload the page and try again.")
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// client returns an API client that acts as the person logged in on r.
func (c *console) client(r *http.Request) *client.Client {
	p, _ := c.who(r)
	return &client.Client{BaseURL: "http://effectd.in-process", HTTP: &http.Client{Transport: inProcess{h: principalHandler{c.api, p}}}}
}

// principalHandler serves each request to h as p.
type principalHandler struct {
	h http.Handler
	p api.Principal
}

func (ph principalHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The request carries the console request's context: drop its chi routing
	// state, so the API's router routes the request afresh.
	ctx := context.WithValue(r.Context(), chi.RouteCtxKey, (*chi.Context)(nil))
	ph.h.ServeHTTP(w, r.WithContext(api.InProcess(ctx, ph.p)))
}

// flash keeps a message for the next page this session shows.
func (c *console) flash(r *http.Request, kind, msg string) {
	c.sessions.Put(r.Context(), "flash", kind+"\x00"+msg)
}

func sha256Sum(s string) [sha256.Size]byte { return sha256.Sum256([]byte(s)) }
