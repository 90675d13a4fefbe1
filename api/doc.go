// Package api is effectd's admin HTTP API: operators list and settle intents,
// change channel policy at run time, pause channels, and read stats, health and
// metrics. Every /v1 route needs a bearer token, whose Principal (a name, a
// role and channel globs) decides what it sees (out of scope: 404), what it
// may do (403) and which payload fields are masked; every change goes through the
// state machine and the dispatcher's fenced compare-and-set, and is audited in
// the same transaction. routes.go lists every route; openapi.yaml documents them.
package api
