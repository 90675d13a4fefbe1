-- intent_tallies.sql where intents and attempts have a column bucket (the
-- distributed mode): the join matches bucket too, so that on Citus it runs on
-- each shard (a join of co-located tables on their distribution column).
SELECT i.id, i.event_id, i.channel, i.status, coalesce(i.provider_ref, ''), i.idempotency_key,
       count(a.id) FILTER (WHERE a.kind = 'lookup' AND a.outcome LIKE 'ambiguous%' AND a.outcome LIKE '%PENDING'),
       count(a.id) FILTER (WHERE a.kind = 'lookup' AND a.outcome LIKE 'policy%' AND a.outcome LIKE '%PENDING'),
       count(a.id) FILTER (WHERE a.outcome LIKE '%(fenced out)'),
       count(a.id) FILTER (WHERE a.kind = 'lookup' AND a.outcome LIKE 'ambiguous%'),
       count(a.id) FILTER (WHERE a.kind = 'send' AND a.outcome IN ('maybe_sent', 'in_doubt', 'lease expired'))
FROM effectd.intents i LEFT JOIN effectd.attempts a ON a.bucket = i.bucket AND a.intent_id = i.id
GROUP BY i.bucket, i.id, i.event_id, i.channel, i.status, i.provider_ref, i.idempotency_key
