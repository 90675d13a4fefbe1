-- SENT intents of channel $1 whose delivery is not final and whose next poll
-- is due: the n-th poll (n = polls made so far) at delivery_at + $2[n+1].
-- Each comes with its idempotency key, which the poll's record fences on, and
-- its event id, trace context and enqueue time, which the poll's span names.
SELECT i.id, i.provider_ref, coalesce(i.delivery, '') AS delivery, i.attempts, p.n AS polls,
       coalesce(i.delivery_at, i.updated_at) AS since, i.idempotency_key AS key, i.event_id,
       coalesce(i.traceparent, '') AS traceparent, i.created_at
FROM effectd.intents i
CROSS JOIN LATERAL (
    SELECT count(*)::int AS n FROM effectd.attempts a WHERE a.intent_id = i.id AND a.kind = 'poll'
) p
WHERE i.channel = $1
  AND i.status = 'SENT'
  AND (i.delivery IS NULL OR i.delivery = 'accepted')
  AND i.provider_ref IS NOT NULL
  AND p.n < cardinality($2::interval[])
  AND coalesce(i.delivery_at, i.updated_at) + ($2::interval[])[p.n + 1] <= now()
ORDER BY i.id
LIMIT $3
