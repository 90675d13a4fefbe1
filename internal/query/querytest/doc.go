// Package querytest holds what the data layer's plan tests share: EXPLAIN of
// a statement in a transaction rolled back, with the rows a test seeds.
package querytest
