// Package onenode is the storage of effectd on one PostgreSQL: the
// single-node statements of internal/query, behind storage.Engine.
package onenode
