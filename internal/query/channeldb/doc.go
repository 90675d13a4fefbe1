// Package channeldb holds the statements on effectd.channels and their rate
// tokens: registration from the configuration, policies, pauses, overrides
// and redacted fields, and the shared token bucket a channel's claims spend.
package channeldb
