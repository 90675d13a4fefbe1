-- Reads channel $1 as channel_get.sql does, and locks its row for the change
-- that follows in the same transaction.
SELECT name, provider, policy, policy_override, paused, updated_at FROM effectd.channels WHERE name = $1
FOR UPDATE
