// Package retentiondb holds the statements that keep history within its
// retention: the day partitions added ahead and dropped or detached once
// expired and not live (partitions.go), and the dedupe keys pruned past their
// channel's horizon (dedupe_keys.go).
package retentiondb
