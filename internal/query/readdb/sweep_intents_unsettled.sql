-- The intents of channel $1 that could own a provider object the sweep joined
-- to no intent, whatever their age: every one not settled as sent that may
-- have made a call (SENDING, IN_DOUBT, FAILED, SKIPPED, CANCELLED, and PENDING
-- with an attempt behind it) created before $2 (the latest such object's
-- creation, widened for skew), and, unless still SENDING, last updated at or
-- after $3 (the earliest such object's, widened): a row's update that left it
-- where it is came after every call it made. At most $4, by id; found through
-- intents_settled_rare, intents_lease and intents_due (a channel's PENDING
-- rows: its backlog, not its history). Columns as sweep_intents.sql. The same
-- statement in both storage modes.
(SELECT id, event_id, channel, payload, status, provider_ref, created_at, claimed_at, lease_expires_at
 FROM effectd.intents
 WHERE channel = $1
   AND status IN ('SENDING', 'IN_DOUBT', 'FAILED', 'SKIPPED', 'CANCELLED')
   AND created_at < $2
   AND (status = 'SENDING' OR updated_at >= $3)
 ORDER BY id
 LIMIT $4)
UNION ALL
(SELECT id, event_id, channel, payload, status, provider_ref, created_at, claimed_at, lease_expires_at
 FROM effectd.intents
 WHERE channel = $1
   AND status = 'PENDING' AND attempts > 0
   AND created_at < $2
   AND updated_at >= $3
 ORDER BY id
 LIMIT $4)
ORDER BY id
LIMIT $4
