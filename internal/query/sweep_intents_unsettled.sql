-- The intents of channel $1 that could own a provider object the sweep joined
-- to no intent, whatever their age: those not settled as sent (SENDING,
-- IN_DOUBT, FAILED) created before $2 (the latest such object's creation,
-- widened for skew), and, unless still SENDING, last updated at or after $3
-- (the earliest such object's, widened): a row's update that left it
-- IN_DOUBT or FAILED came after every call it made. At most $4, by id; found
-- through intents_settled_rare and intents_lease. Columns as
-- sweep_intents.sql. The same statement in both storage modes.
SELECT id, event_id, channel, payload, status, provider_ref, created_at, claimed_at, lease_expires_at
FROM effectd.intents
WHERE channel = $1
  AND status IN ('SENDING', 'IN_DOUBT', 'FAILED')
  AND created_at < $2
  AND (status = 'SENDING' OR updated_at >= $3)
ORDER BY id
LIMIT $4
