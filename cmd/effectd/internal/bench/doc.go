// Package bench measures effectd on this machine: backlog drain, live latency
// from producer commit to provider, throughput against a slow provider,
// producer cost against a bare INSERT, the dispatcher's resident memory, the
// time from starting `effectd serve` to its first call with a backlog
// waiting, a long soak at a steady rate judged by a computed pass rule, and
// where each microsecond goes (breakdown: CPU per effect by process,
// PostgreSQL's statements, serve's CPU profile by feature, live latency by
// stage).
// It starts its own PostgreSQL (localpg), the sandbox on loopback, and
// `effectd serve` as a child process, and prints figures with their
// configuration and the lost and duplicate counts.
package bench
