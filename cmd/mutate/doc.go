// Command mutate checks that the test suite guards effectd's guarantees: it
// applies each mutation of a named list to a scratch copy of one file (through
// an -overlay passed in GOFLAGS, so the working tree is never touched and a
// test that builds the effectd binary itself builds it mutated), runs the tests
// meant to notice, and reports the mutation killed when they fail and
// survived when they pass. A mutation whose snippet is no longer found exactly
// once in its file is reported stale, so the list cannot quietly rot; one that
// does not compile is reported invalid. Any survived, stale or invalid
// mutation makes it exit 1.
//
//	go run ./cmd/mutate                 # every mutation (make mutate)
//	go run ./cmd/mutate -only 'fence'   # those whose name matches
//	go run ./cmd/mutate -list           # print the list
//	go run ./cmd/mutate -check          # only check that every snippet is still there
package main
