-- The intents of channel $1 created in [$2, $3), by id, at most $4, for the
-- reconciliation sweep. $5 is the last id handed out before $2 (id_before.sql):
-- the primary key's range and the BRIN summary of created_at keep the read to
-- the window, never the table's history.
SELECT id, event_id, channel, payload, status, provider_ref, created_at, claimed_at, lease_expires_at
FROM effectd.intents
WHERE channel = $1
  AND id > $5
  AND created_at >= $2
  AND created_at < $3
ORDER BY id
LIMIT $4
