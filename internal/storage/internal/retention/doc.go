// Package retention holds the steps of retention both storage
// implementations share: deleting in batches, dropping expired day
// partitions (one by one or together) and pruning dedupe keys.
package retention
