-- The attempts of intents $1 (an array of ids), each with its intent, for a
-- report: intent id, channel, event id, status, provider reference, and per
-- attempt its number, kind, start and end (HH24:MI:SS.MS), outcome, error
-- (cut to 120 characters) and provider reference ('-' = none).
SELECT i.id, i.channel, i.event_id, i.status, coalesce(i.provider_ref, '-'), a.attempt, a.kind,
       to_char(a.started_at, 'HH24:MI:SS.MS'), coalesce(to_char(a.finished_at, 'HH24:MI:SS.MS'), '-'),
       a.outcome, left(coalesce(a.error, ''), 120), coalesce(a.provider_ref, '-')
FROM effectd.intents i JOIN effectd.attempts a ON a.intent_id = i.id
WHERE i.id = ANY($1) ORDER BY i.id, a.id
