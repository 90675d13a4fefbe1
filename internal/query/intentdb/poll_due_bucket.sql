-- poll_due.sql in the distributed mode: the SENT intents of channel $1 in
-- bucket $4 whose delivery is not final and whose next poll is due (the n-th
-- poll at delivery_at + $2[n+1]), at most $3. One single-shard statement:
-- every table read is restricted to bucket $4. Each serve instance polls the
-- buckets it holds. Each comes with its idempotency key, which the poll's
-- record fences on, and its event id, trace context and enqueue time, which
-- the poll's span names.
SELECT i.id, i.provider_ref, coalesce(i.delivery, '') AS delivery, i.attempts, p.n AS polls,
       coalesce(i.delivery_at, i.updated_at) AS since, i.idempotency_key AS key, i.event_id,
       coalesce(i.traceparent, '') AS traceparent, i.created_at
FROM effectd.intents i
CROSS JOIN LATERAL (
    SELECT count(*)::int AS n FROM effectd.attempts a WHERE a.bucket = $4 AND a.intent_id = i.id AND a.kind = 'poll'
) p
WHERE i.bucket = $4
  AND i.channel = $1
  AND i.status = 'SENT'
  AND (i.delivery IS NULL OR i.delivery = 'accepted')
  AND i.provider_ref IS NOT NULL
  AND p.n < cardinality($2::interval[])
  AND coalesce(i.delivery_at, i.updated_at) + ($2::interval[])[p.n + 1] <= now()
ORDER BY i.id
LIMIT $3
