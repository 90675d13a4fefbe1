// Package retention holds the steps of retention both storage
// implementations share: deleting in batches, dropping expired day
// partitions (one by one or together) and pruning dedupe keys. A Pruner,
// built once on the pool, runs them; each detach or drop waits for its lock
// a bounded time and is tried again (locks.go), so that no session queues
// long behind it.
package retention
