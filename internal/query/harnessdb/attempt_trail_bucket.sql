-- attempt_trail.sql where intents and attempts have a column bucket (the
-- distributed mode): the join matches bucket too, so that on Citus it runs on
-- each shard.
SELECT i.id, i.channel, i.event_id, i.status, coalesce(i.provider_ref, '-'), a.attempt, a.kind,
       to_char(a.started_at, 'HH24:MI:SS.MS'), coalesce(to_char(a.finished_at, 'HH24:MI:SS.MS'), '-'),
       a.outcome, left(coalesce(a.error, ''), 120), coalesce(a.provider_ref, '-')
FROM effectd.intents i JOIN effectd.attempts a ON a.bucket = i.bucket AND a.intent_id = i.id
WHERE i.id = ANY($1) ORDER BY i.id, a.id
