-- Reads what two-person approval needs of bulk snapshot $1: its action and
-- resolve_as ('' = none), how many intents it froze, the channel its filter
-- names ('' = none), the channels it was frozen among (NULL: every channel),
-- and whether it can still be applied (not applied, not expired).
SELECT action, coalesce(resolve_as, ''), matched, coalesce(filter ->> 'channel', ''),
    CASE WHEN jsonb_typeof(filter -> 'channels') = 'array'
         THEN ARRAY(SELECT jsonb_array_elements_text(filter -> 'channels')) END,
    applied_at IS NULL AND expires_at > now()
FROM effectd.bulk_snapshots WHERE id = $1
