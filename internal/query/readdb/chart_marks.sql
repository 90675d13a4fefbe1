-- The newest $3 audit entries (operator actions, policy changes) from $1 to
-- $2 (exclusive), of every channel; by audit_at, reading the range alone.
SELECT at, actor, action, coalesce(channel, '') AS channel, intent_id
FROM effectd.audit
WHERE at >= $1 AND at < $2
ORDER BY at DESC
LIMIT $3
