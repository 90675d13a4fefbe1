-- Writes one audit entry: who ($1, a token name) did what ($2, e.g.
-- intent.requeue, intent.reconcile, channel.policy) to which intent ($3, NULL
-- for a channel's entry) of which channel ($4), the subject before ($5) and
-- after ($6) in the one shape of query.AuditState, why ($7, '' = not given)
-- and from which bulk snapshot ($8, '' = none). Run it in the transaction
-- that makes the change.
INSERT INTO effectd.audit (actor, action, intent_id, channel, before, after, reason, bulk_snapshot)
VALUES ($1, $2, $3, $4, $5, $6, nullif($7, ''), nullif($8, '')::uuid)
