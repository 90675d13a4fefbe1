-- The newest $4 audit entries (operator actions, policy changes) from $2 to
-- $3 (exclusive) of channels $1; by audit_channel_at, reading the range of
-- those channels alone.
SELECT at, actor, action, channel, intent_id
FROM effectd.audit
WHERE channel = ANY ($1::text[]) AND at >= $2 AND at < $3
ORDER BY at DESC
LIMIT $4
