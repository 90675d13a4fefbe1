// Package readdb holds what operators and Prometheus read, each read costing
// the same whatever history holds: one intent and pages of intents
// (intents_list.go) and of provider events (events_list.go), the settled
// counts and gauges and their fold (counts.go), the per-minute and per-hour rollups and the
// charts drawn from them (rollups.go, charts.go), the reconciliation sweep's
// reads and the windows it covered (intents_sweep.go, sweep_coverage.go), and
// the id marks a list from a time starts at (id_marks.go).
package readdb
