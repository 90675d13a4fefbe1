-- Every intent with what its attempts say: id, event id, channel, status,
-- provider reference ('' = none), idempotency key, and counts of its attempts:
-- ambiguous lookups that sent it again, policy resends, outcomes fenced out,
-- ambiguous lookups, and calls whose answer nobody knew (maybe sent, in doubt,
-- or no outcome recorded before the lease expired).
SELECT i.id, i.event_id, i.channel, i.status, coalesce(i.provider_ref, ''), i.idempotency_key,
       count(a.id) FILTER (WHERE a.kind = 'lookup' AND a.outcome LIKE 'ambiguous%' AND a.outcome LIKE '%PENDING'),
       count(a.id) FILTER (WHERE a.kind = 'lookup' AND a.outcome LIKE 'policy%' AND a.outcome LIKE '%PENDING'),
       count(a.id) FILTER (WHERE a.outcome LIKE '%(fenced out)'),
       count(a.id) FILTER (WHERE a.kind = 'lookup' AND a.outcome LIKE 'ambiguous%'),
       count(a.id) FILTER (WHERE a.kind = 'send' AND a.outcome IN ('maybe_sent', 'in_doubt', 'lease expired'))
FROM effectd.intents i LEFT JOIN effectd.attempts a ON a.intent_id = i.id
GROUP BY i.id, i.event_id, i.channel, i.status, i.provider_ref, i.idempotency_key
