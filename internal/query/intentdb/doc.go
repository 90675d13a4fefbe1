// Package intentdb holds the statements that change effectd.intents and the
// rows written with them: enqueue and the producers' verbs (cancel, status,
// enqueue many), the dispatcher's claim, completion, settlement and prune
// (intents_send.go, and their distributed twins in intents_bucket.go), an
// operator's transition (intents.go), provider events' and polls' changes of
// delivery and a poll's record (intents_delivery.go, polls.go), bulk
// snapshots (bulk.go), the distributed mode's bucket leases and the
// LISTEN/NOTIFY wake-up. Each write is a compare-and-set fenced on the row's
// status and attempt (and, where an id may be handed out again, its
// idempotency key).
package intentdb
