// Package chaos proves effectd's promise under faults, Jepsen-style: it drives
// real effectd serve processes against one throwaway PostgreSQL and the
// in-process sandbox, while concurrent producers enqueue (committing, rolling
// back, redelivering) and a seeded schedule injects faults (SIGKILL, SIGSTOP
// past the lease, PostgreSQL restarts, provider latency, 5xx, 429, hangs and
// dropped answers). After the instances drain, an independent checker compares
// the producers' log, the database and the sandbox ledger, and reports per
// channel what was lost or applied twice. A failover run (a streaming standby
// promoted once the primary is killed) also runs the reconciliation sweep of
// every Stripe and Twilio channel through an instance's admin API and checks
// its findings against the checker's. Run runs it; `effectd chaos` wraps it.
// With Config.Actors it is the randomized checker (`effectd check`,
// docs/checker.md): more actors (actors.go, verbs.go, retention.go,
// ingress.go, reuse.go), a history of their operations, and a verdict per invariant
// (invariants.go).
//
// Clock skew is not injected: leases, claims and fences compare only the
// database's now(), never an instance's clock, so a skewed instance cannot
// take a live lease or slip past a fence. The one clock compared with another
// machine's is the Twilio lookup window: the database's claim time against
// Twilio's date_created, widened by two minutes of tolerated skew.
package chaos
