// floorbench is the floor of the dispatch benchmark in ../shared/peers/riverbench:
// the least a dispatcher with effectd's guarantees must do per effect, run on
// the harness's workload, provider and figures (package riverbench/load), so
// that its line compares with River's and effectd's.
//
// Per effect it does only what those guarantees need: the producer inserts the
// intent under UNIQUE (event_id, channel) in its own transaction; a claim moves
// due rows PENDING → SENDING under a lease (one UPDATE … FOR UPDATE SKIP LOCKED
// per batch); the call is the harness's own POST (the one River's worker
// makes, unsigned); the outcome is a fenced compare-and-set on (SENDING,
// attempts) that also records the call as an attempt row, batched. There is
// no index but the keys and the claim's partial index, no history layout, no
// counts, no signing, no metrics, no reconciler: it is a floor, not a
// dispatcher. Claims poll every millisecond while nothing is due, which costs
// idle CPU that a real dispatcher would not spend, and gives live latency its
// lowest value.
//
// Its own module (it depends on the harness, which effectd must not), run
// from this directory:
//
//	go build -o /tmp/floorbench . && DATABASE_URL=postgres://…/floor /tmp/floorbench -n 100000 -mode backlog -timeout 5m
package main
