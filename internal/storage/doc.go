// Package storage is the one seam between effectd's engine and its database:
// the interface holding every operation whose statements differ between the
// two storage modes (one PostgreSQL, and Citus, where intents are distributed
// by bucket), and New, which picks the implementation for the mode decided at
// start-up (internal/storage/onenode or internal/storage/citus). Nothing
// outside the implementations asks which mode it runs in; a behaviour both
// must have is specified once, in internal/storage/storagetest.
package storage
