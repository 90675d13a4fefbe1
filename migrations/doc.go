// Package migrations holds effectd's schema as embedded SQL files and applies them
// with goose under a PostgreSQL advisory lock, so several instances may migrate at once.
package migrations
