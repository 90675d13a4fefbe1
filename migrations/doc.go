// Package migrations holds effectd's schema as embedded SQL files and applies them
// with goose under a PostgreSQL advisory lock, so several instances may migrate at once.
// SetProducers grants producer roles exactly what effectd.enqueue needs, each into its channels.
package migrations
