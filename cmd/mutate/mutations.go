package main

// mutations break, one at a time, each guarantee that README.md promises.
// Snippets are kept small so that unrelated edits leave them intact; when one
// is no longer found, the run says so (stale) instead of skipping it.
// Tests are picked narrowly: each run builds the package's test binary and
// runs only what must notice.
var mutations = []mutation{
	// Fenced compare-and-set: a late or stale writer never overwrites a row
	// someone else has since settled or re-claimed.
	{name: "complete: fence on attempts removed", file: "internal/query/complete.sql",
		from: "AND i.attempts = input.attempts", to: "",
		pkg: "./dispatcher/", run: "^TestLateOutcomeWhileNewerAttemptSends$"},
	{name: "complete: fence on status removed", file: "internal/query/complete.sql",
		from: "AND i.status = 'SENDING'", to: "",
		pkg: "./dispatcher/", run: "^TestLateOutcomeAfterSettlement$"},
	{name: "settle: fence removed", file: "internal/query/settle.sql",
		from: "WHERE id = $1 AND status = $3 AND attempts = $2", to: "WHERE id = $1",
		pkg: "./dispatcher/", run: "^TestReconcileRacingResolve$"},
	{name: "operate: fence removed", file: "internal/query/operate.sql",
		from: "WHERE id = $1 AND status = $2 AND attempts = $3", to: "WHERE id = $1",
		pkg: "./dispatcher/", run: "^TestOperateRace$"},
	{name: "operate: live lease not refused", file: "internal/query/operate.sql",
		from: "AND NOT (status = 'SENDING' AND lease_expires_at > now())", to: "",
		pkg: "./dispatcher/", run: "^TestOperateLiveLeaseRefused$"},

	// Deduplication and keys.
	{name: "enqueue: duplicates inserted again", file: "migrations/*.up.sql",
		from: "ON CONFLICT ON CONSTRAINT intents_event_channel DO NOTHING", to: "ON CONFLICT ON CONSTRAINT intents_event_channel DO UPDATE SET updated_at = now()",
		pkg: "./dispatcher/", run: "^TestEnqueueDuplicate$"},
	{name: "enqueue: old copies past retention accepted", file: "migrations/*.up.sql",
		from: "IF occurred_at < now() - retention THEN", to: "IF false THEN",
		pkg: "./dispatcher/", run: "^TestEnqueueBadInput$"},
	{name: "enqueue: a retention default spelled in SQL, not read from package policy", file: "migrations/*.up.sql",
		from: "(SELECT d.retention FROM effectd.policy_defaults d)", to: "interval '360 hours'",
		pkg: "./migrations/", run: "^TestRetentionFromOnePlace$"},
	{name: "enqueue: the override's retention ignored", file: "migrations/*.up.sql",
		from: "coalesce(c.policy_override ->> 'retention', c.policy ->> 'retention')::interval", to: "(c.policy ->> 'retention')::interval",
		pkg: "./migrations/", run: "^TestRetentionFromOnePlace$"},
	// The boundary is written twice (enqueue's fast path, then the function);
	// moving either down is masked by the other, so each is moved up.
	{name: "key: enqueue keeps a 256-byte key unhashed", file: "migrations/*.up.sql",
		from: "WHEN octet_length(channel) + 1 + octet_length(event_id) <= 255", to: "WHEN octet_length(channel) + 1 + octet_length(event_id) <= 256",
		pkg: "./dispatcher/", run: "^TestEnqueueKeyBoundary$"},
	{name: "key: idempotency_key keeps a 256-byte key unhashed", file: "migrations/*.up.sql",
		from: "WHEN octet_length(channel || ':' || event_id) <= 255", to: "WHEN octet_length(channel || ':' || event_id) <= 256",
		pkg: "./dispatcher/", run: "^TestEnqueueKeyBoundary$"},
	{name: "key: long keys not hashed", file: "migrations/*.up.sql",
		from: "ELSE effectd.idempotency_key(channel, event_id) END", to: "ELSE channel || ':' || event_id END",
		pkg: "./dispatcher/", run: "^(TestEnqueueLongEventIDKeyIsHashed|TestEnqueueKeyBoundary)$"},
	{name: "key: hash of the channel instead of the event", file: "migrations/001_schema.up.sql",
		from: "encode(sha256(convert_to(event_id, 'UTF8')), 'hex')", to: "encode(sha256(convert_to(channel, 'UTF8')), 'hex')",
		pkg: "./dispatcher/", run: "^TestEnqueueKeyBoundary$"},

	// Leases and the reconciler.
	{name: "lease: call deadline past the lease", file: "dispatcher/claim.go",
		from: "deadline := time.Now().Add(p.Lease.D() * leaseUsableTenths / 10)", to: "deadline := time.Now().Add(p.Lease.D() * 3)",
		pkg: "./dispatcher/", run: "^TestStalledWorkerDoesNotCallLate$"},
	{name: "lease: late worker calls anyway", file: "dispatcher/claim.go",
		from: "if time.Until(c.deadline) < minCallTime {", to: "if false {",
		pkg: "./dispatcher/", run: "^TestStalledWorkerDoesNotCallLate$"},
	{name: "back-pressure: a slot frees before its outcome is queued", file: "dispatcher/claim.go",
		from: "\t\tw.out <- out\n\t\tj.ch.inflight.Add(-1)\n", to: "\t\tj.ch.inflight.Add(-1)\n\t\tw.out <- out\n",
		pkg: "./dispatcher/", run: "^TestClaimsWaitForLaggingCompleters$"},
	{name: "reconciler: takes leases that have not expired", file: "internal/query/take_expired.sql",
		from: "AND lease_expires_at < now()", to: "AND lease_expires_at < now() + interval '1 hour'",
		pkg: "./dispatcher/", run: "^TestReconcileRefusesLiveLease$"},
	{name: "reconciler: operator reconcile of a live lease", file: "dispatcher/reconcile.go",
		from: "case r.status == statemachine.Sending && leaseUntil != nil:", to: "case false:",
		pkg: "./dispatcher/", run: "^TestReconcileRefusesLiveLease$"},
	{name: "maybe sent: keyed call FAILED on its last attempt", file: "dispatcher/claim.go",
		from: "case class.MaybeSent && last:", to: "case false:",
		pkg: "./dispatcher/", run: "^TestMaybeSentKeyed$"},
	{name: "max_age: old intents sent", file: "dispatcher/claim.go",
		from: "if p.MaxAge > 0 && out.started.Sub(c.occurredAt) > p.MaxAge.D() {", to: "if false {",
		pkg: "./dispatcher/", run: "^TestMaxAgeSkips$"},
	{name: "prune: IN_DOUBT rows pruned", file: "internal/query/prune.sql",
		from: "status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')", to: "status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED', 'IN_DOUBT')",
		pkg: "./dispatcher/", run: "^TestPrune$"},

	// Key window: no blind re-execution of a maybe-sent money call.
	{name: "key window: reconciler resends past it", file: "dispatcher/reconcile.go",
		from: "if pastKeyWindow(ch.Kind, r.createdAt, time.Now()) {", to: "if false {",
		pkg: "./dispatcher/", run: "^TestKeyWindowReconciler$"},
	{name: "key window: maybe-sent call retried past it", file: "dispatcher/claim.go",
		from: "(!ch.keyed || pastKeyWindow(ch.Kind, c.createdAt, next))", to: "!ch.keyed",
		pkg: "./dispatcher/", run: "^TestKeyWindowMaybeSentCall$"},
	{name: "key window: operator retry past it", file: "dispatcher/operate.go",
		from: "if to == statemachine.Pending && !op.Force {", to: "if false {",
		pkg: "./dispatcher/", run: "^TestKeyWindowOperator$"},
	{name: "key window: Stripe lookup replays past it", file: "providers/stripe/lookup.go",
		from: "if p.now().Sub(created) < ReplayWindow {", to: "if true {",
		pkg: "./providers/stripe/", run: "^TestLookupPastWindow$"},

	// Backoff.
	{name: "backoff: none", file: "policy/backoff.go",
		from: "return max(d, retryAfter)", to: "return 0",
		pkg: "./policy/", run: "^TestBackoffDelay$"},
	{name: "backoff: Retry-After ignored", file: "policy/backoff.go",
		from: "return max(d, retryAfter)", to: "return d",
		pkg: "./policy/", run: "^TestBackoffDelay$"},
	{name: "backoff: full jitter instead of equal", file: "policy/backoff.go",
		from: "d = d/2 + rand.N(d/2+1)", to: "d = rand.N(d + 1)",
		pkg: "./policy/", run: "^TestBackoffDelay$"},
	{name: "backoff: no jitter", file: "policy/backoff.go",
		from: "d = d/2 + rand.N(d/2+1)", to: "d = d/2 + 0*rand.N(d/2+1)",
		pkg: "./policy/", run: "^TestBackoffDelay$"},
	{name: "backoff: no cap", file: "policy/backoff.go",
		from: "d = min(d, b.Max.D())", to: "",
		pkg: "./policy/", run: "^TestBackoffDelay$"},
	{name: "backoff: not applied to the retry", file: "dispatcher/claim.go",
		from: "out.next = next", to: "out.next = out.finished",
		pkg: "./dispatcher/", run: "^TestBackoffSetsNextAttempt$"},

	// Policy: checks and layering.
	{name: "policy: a backoff max below its base accepted", file: "policy/policy.go",
		from: "case p.Backoff.Max < p.Backoff.Base:", to: "case false:",
		pkg: "./policy/", run: "^TestValidateNamesField$"},
	{name: "policy: the admin API's override ignored", file: "policy/merge.go",
		from: "range [][]byte{registered, override}", to: "range [][]byte{registered}",
		pkg: "./policy/", run: "^TestEffective$"},

	// Pause, ordering, rate.
	{name: "pause: not read by the claim", file: "internal/query/claim.sql",
		from: "AND EXISTS (SELECT 1 FROM unpaused)", to: "",
		pkg: "./dispatcher/", run: "^TestPauseTakesEffectInTheClaim$"},
	{name: "pause: read without the share lock", file: "internal/query/claim.sql",
		from: "FOR SHARE", to: "",
		pkg: "./dispatcher/", run: "^TestPauseRacingAClaim$"},
	{name: "ordering: a FAILED or IN_DOUBT predecessor blocks", file: "internal/query/claim.sql",
		from: "o.status IN ('PENDING', 'SENDING')", to: "o.status IN ('PENDING', 'SENDING', 'FAILED', 'IN_DOUBT')",
		pkg: "./dispatcher/", run: "^TestOrderingBehindFailedAndInDoubt$"},
	{name: "ordering: keys ignored", file: "internal/query/claim.sql",
		from: "AND o.id < i.id", to: "AND false",
		pkg: "./dispatcher/", run: "^TestOrderingKey$"},
	{name: "rate: bucket not applied", file: "internal/query/claim.sql",
		from: "least($3, greatest(0, (SELECT floor(avail)::int FROM bucket)))", to: "$3",
		pkg: "./dispatcher/", run: "^TestRateLimitSharedByInstances$"},

	// The provider contract: one reading of a provider's error, shared by the
	// dispatcher and the contract suite, and of the Retry-After it carries.
	{name: "classify: a retryable error that says nothing of sending read as maybe sent", file: "providers/effect/effect.go",
		from: "c.Retryable, c.MaybeSent = r.Retryable(), false", to: "c.Retryable, c.MaybeSent = r.Retryable(), true",
		pkg: "./providers/effect/", run: "^TestClassify$"},
	{name: "classify: a provider's Retry-After dropped", file: "providers/effect/effect.go",
		from: "c.RetryAfter = ra.RetryAfter()", to: "c.RetryAfter = 0",
		pkg: "./providers/stripe/", run: "^TestContract$"},
	{name: "Retry-After: an HTTP date ignored", file: "providers/effect/effect.go",
		from: "err == nil && at.After(now) {", to: "err == nil && at.After(now) && false {",
		pkg: "./providers/webhook/", run: "^TestRetryAfter$"},

	// Provider signatures, both ways: what effectd sends is signed over the
	// body, and what the ingress takes is verified.
	{name: "webhook: signature not over the body", file: "providers/webhook/webhook.go",
		from: "p.signer.Sign(key, now, payload)", to: "p.signer.Sign(key, now, []byte(\"{}\"))",
		pkg: "./providers/webhook/", run: "^TestSendSignsAndReturnsRef$"},
	{name: "ingress: X-Twilio-Signature not checked", file: "api/ingress/twilio.go",
		from: "!validator.Validate(public.String(), params, sig) {", to: "!validator.Validate(public.String(), params, sig) && false {",
		pkg: "./api/ingress/", run: "^TestTwilioCallbacks$"},
	{name: "ingress: old Stripe-Signature replayed", file: "api/ingress/stripe.go",
		from: "webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true}", to: "webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true, IgnoreTolerance: true}",
		pkg: "./api/ingress/", run: "^TestStripeEvents$"},

	// Lookup and delivery reports.
	{name: "twilio lookup: body not matched", file: "providers/twilio/twilio.go",
		from: "|| deref(msg.Body) != m.Body {", to: "{",
		pkg: "./providers/twilio/", run: "^TestLookupAbsent$"},
	{name: "delivery: a delivered effect moves back to accepted", file: "statemachine/delivery.go",
		from: "{Name: string(Accept), Src: dsrc(Unknown), Dst: string(Accepted)}", to: "{Name: string(Accept), Src: dsrc(Unknown, Delivered), Dst: string(Accepted)}",
		pkg: "./statemachine/", run: "^(TestDeliveryEveryPair|TestDeliveryReport)$"},

	// Poison rows: a value the claim cannot carry is quarantined, never sent.
	{name: "claim: poison rows sent instead of quarantined", file: "dispatcher/claim.go",
		from: "if c.problem != \"\" {", to: "if false {",
		pkg: "./cmd/effectd/", run: "^TestAbusePoisonRows$"},

	// Outcome notifications: each outcome told once, under a stable event id.
	{name: "notify: event id not stable, so an outcome is told again", file: "migrations/*.up.sql",
		from: "event_id     => effectd.notify_key(r.idempotency_key, r.outcome),", to: "event_id     => effectd.notify_key(r.idempotency_key, r.outcome) || ':' || txid_current(),",
		pkg: "./dispatcher/", run: "^(TestNotifyOnceWhenReachedAgain|TestNotifyOutcomes)$"},

	// Producer grants.
	{name: "producers: channel patterns not checked", file: "migrations/*.up.sql",
		from: "WHERE pg_has_role(who, r.oid, 'USAGE') AND channel ~ ANY (p.patterns)) THEN", to: "WHERE pg_has_role(who, r.oid, 'USAGE')) THEN",
		pkg: "./migrations/", run: "^TestProducerRoles$"},

	// Admin API access.
	{name: "auth: requests without a known token let through", file: "api/auth.go",
		from: "\t\tif !ok {\n\t\t\tw.Header().Set(\"WWW-Authenticate\"", to: "\t\tif !ok && false {\n\t\t\tw.Header().Set(\"WWW-Authenticate\"",
		pkg: "./api/", run: "^TestAuth$"},
	{name: "auth: any token accepted", file: "api/auth.go",
		from: "return found, ok == 1", to: "return found, true",
		pkg: "./api/", run: "^TestAuth$"},
	{name: "scope: every channel in every token's scope", file: "api/principal.go",
		from: "return false\n}\n\n// Can reports", to: "return true\n}\n\n// Can reports",
		pkg: "./api/", run: "^(TestPrincipal|TestBulkScoped)$"},
	{name: "auth: roles not enforced", file: "api/auth.go",
		from: "!p.Can(a) {", to: "false {",
		pkg: "./api/", run: "^TestAuth$"},
	{name: "redaction: viewers see redacted fields", file: "api/scope.go",
		from: "if !p.Can(ActionUnmask) && len(fields) > 0 {", to: "if false && len(fields) > 0 {",
		pkg: "./api/", run: "^TestProviderEvents$"},
	{name: "bulk: rows changed since the snapshot applied", file: "dispatcher/operate.go",
		from: "x != nil && (before.Status != x.Status || before.Attempts != x.Attempts) {", to: "x != nil && false {",
		pkg: "./api/", run: "^TestBulkSnapshotThenApply$"},
	{name: "console: CSRF token not checked", file: "api/console/console.go",
		from: "if want == \"\" || subtle.ConstantTimeCompare(", to: "if want == \"\" && subtle.ConstantTimeCompare(",
		pkg: "./api/console/", run: "^TestCSRFRefused$"},
}
