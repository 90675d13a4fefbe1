// Package console is effectd's operator console at /ui/ on the admin
// listener: pages rendered on the server from embedded templates, working
// without JavaScript. It calls the admin API in process as the person who
// logged in, so the API's roles, scopes and redaction apply to every page.
// Sessions live in PostgreSQL (alexedwards/scs), so every instance accepts
// them, and begin at a login: an anonymous visitor writes no row. A login
// always starts a new session (a new id, the new person's role and scopes)
// and ends the one the browser had. Every form carries a session-bound CSRF
// token, except the login form of a visitor not logged in, whose token is
// double-submitted in a cookie of its own; a POST that the browser marks as
// sent from another site is refused too. A policy change is previewed with
// operator.PreviewPolicy, the very merge the API's change makes.
//
// One file per concern: console.go (routes, sessions, CSRF), login.go,
// lists.go (overview and intents list), intent.go (an intent and its
// actions), timeline.go, channel.go (a channel, its actions and the policy
// preview), bulk.go, sweep.go, apierrors.go (the API's errors as pages),
// render.go and format.go (templates and how values read).
package console
