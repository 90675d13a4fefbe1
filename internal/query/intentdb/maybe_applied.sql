-- What the key-window rule needs of intent $1 of channel $2: the channel's
-- provider ('' when not registered), the database's clock, and whether a call
-- was ever made (a SKIPPED row may have been applied if it was called before
-- it was skipped).
SELECT coalesce((SELECT provider FROM effectd.channels WHERE name = $2), ''), now(),
       EXISTS (SELECT 1 FROM effectd.attempts WHERE intent_id = $1 AND kind IN ('send', 'lookup'))
