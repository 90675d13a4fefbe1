// Package dispatcher turns intents into provider calls effectively once.
//
// Producers record an intent inside their own transaction with Enqueue (or the
// SQL function effectd.enqueue). A Dispatcher claims due intents in batches
// with FOR UPDATE SKIP LOCKED, moves them to SENDING under a lease, calls the
// channel's Provider outside any transaction with the intent's idempotency key,
// and completes each with a fenced compare-and-set. A reconciler settles rows
// whose lease expired mid-call, by provider lookup or by the channel's policy,
// and a pruner deletes terminal rows past their retention.
//
// A Dispatcher is a set of small services, each in the file that holds its
// loop, sharing the Dispatcher's pool, channels, logger and metrics. The
// claimer, each completer and the reconciler hold a connection of their own
// for their statements (heldconn.go), so each is planned on it alone:
//
//   - claimer (claim.go): claims due intents for every channel with room and
//     hands them to the workers; idle, it asks producers to NOTIFY and sleeps.
//   - workers (claim.go): one goroutine per call in flight, reused between
//     calls; each decides its call's outcome and queues it.
//   - completers (complete.go): write the queued outcomes in batches.
//   - listener (listen.go): LISTENs for effectd_wakeup and wakes the claimer.
//   - reconciler (reconcile.go): settles expired leases, on a timer and at
//     once after a maybe-sent call.
//   - refresher (refresh.go): rereads policies and pause flags.
//   - pruner (prune.go): deletes terminal rows past retention.
//   - poller (poll.go): asks providers what became of accepted effects.
//   - fold loop (counts.go): folds the deltas of the settled counts that the
//     stats, channel pages and /metrics read.
//   - sweeper (sweep_schedule.go): runs each channel's scheduled Sweep (policy
//     sweep), one instance per channel at a time, each window resuming from
//     the last one the schedule finished (effectd.sweep_windows), so that the
//     windows tile time.
//   - bucket leases (buckets.go), in the distributed mode (Config.Buckets):
//     divide the buckets among the live instances; the claimer, completers
//     and reconciler then work one owned bucket per statement.
//
// Start reads the channels once, then starts the workers, the completers and
// the loops. Stop ends them in this order: the claimer first (no call starts
// after it), then the listener, reconciler, refresher, pruner, poller, fold loop and sweeper;
// then it waits for the workers' calls in flight until its context ends and
// cancels the rest; then the completers write every queued outcome.
//
// Sweep (sweep.go), outside the loops, joins what a channel's provider lists
// for a window (a Lister) with the window's intents and the unsettled ones
// of any age, looks up one by one the SENT intents the listing lacks, and
// reports orphans, duplicates, unsettled, missing and uncertain effects,
// changing nothing; no finding advises an action that could repeat an
// effect the provider may hold.
//
// What operators do through the admin API, the console and the command
// line (moving an intent, changing a channel, bulk actions, two-person
// approval, the reads) is package operator's service, which imports this
// one. Reconcile (reconcile.go) stays here: it settles an intent with the
// channel's provider, which only a running Dispatcher holds.
//
// Config's zero fields take the Default constants; New refuses a negative
// field (or a ClaimBatch above MaxClaimBatch) with an ErrInvalid naming it.
package dispatcher
