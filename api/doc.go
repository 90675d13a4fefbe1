// Package api is effectd's admin HTTP API: operators list and settle intents,
// change channel policy at run time, pause channels, and read stats, health and
// metrics. Every /v1 route needs a bearer token, whose Principal (a name, a
// role and channel globs) decides what it sees (out of scope: 404), what it
// may do (403) and which payload fields are masked; every change goes through the
// state machine and the dispatcher's fenced compare-and-set, and is audited in
// the same transaction. routes.go lists every route; openapi.yaml documents them.
//
// A handler is an endpoint (endpoint.go): it decodes the request, checks the
// principal's scope and role, calls one operation of the dispatcher (Operate,
// ChangePolicy, FreezeBulk, ListIntents, …) and returns the answer, an
// effectdtype value; handle writes it, or maps its error to a status through
// errors.go's one table. The API reads and writes the database only through
// those operations.
package api
