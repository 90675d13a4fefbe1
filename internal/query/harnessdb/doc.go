// Package harnessdb holds the statements the harnesses run rather than serve:
// history loads for the benches and tests (load.go, load_bucket.go,
// citus_load.go), whole-table reads that check a run (inventory.go, for the
// chaos checker), and table sizes (sizes.go).
package harnessdb
