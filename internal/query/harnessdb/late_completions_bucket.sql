-- late_completions.sql where intents and attempts have a column bucket (the
-- distributed mode): every join matches bucket too, so that on Citus it runs
-- on each shard.
SELECT DISTINCT i.id, i.channel, i.event_id
FROM effectd.attempts l
JOIN effectd.attempts s ON s.bucket = l.bucket AND s.intent_id = l.intent_id AND s.attempt = l.attempt AND s.kind = 'send' AND s.id > l.id
JOIN effectd.intents i ON i.bucket = l.bucket AND i.id = l.intent_id
WHERE l.kind = 'lookup' AND s.outcome NOT LIKE '%(fenced out)' AND s.outcome NOT LIKE '%(already settled by callback)'
  AND s.outcome <> 'lease expired'
