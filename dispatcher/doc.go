// Package dispatcher turns intents into provider calls effectively once.
//
// Producers record an intent inside their own transaction with Enqueue (or the
// SQL function effectd.enqueue). A Dispatcher claims due intents in batches
// with FOR UPDATE SKIP LOCKED, moves them to SENDING under a lease, calls the
// channel's Provider outside any transaction with the intent's idempotency key,
// and completes each with a fenced compare-and-set. A reconciler settles rows
// whose lease expired mid-call, by provider lookup or by the channel's policy,
// and a pruner deletes terminal rows past their retention.
package dispatcher
