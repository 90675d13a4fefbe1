// Package query holds the dispatcher's SQL, one statement per file, embedded as strings.
package query
