// Package citus is the storage of effectd distributed on a Citus cluster:
// the bucket statements of internal/query (*_bucket.sql), each on one
// bucket's shard, behind storage.Engine. It serves the buckets the instance
// holds the lease of, as the dispatcher's bucket leases report them.
package citus
