// Package storagetest is the contract suite of storage.Engine: each
// behaviour every storage implementation must have, specified once. Run it
// against an implementation with Run; one PostgreSQL runs it in make test,
// Citus in make test-citus.
package storagetest
