-- Moves intent $1's delivery from $2 ('' = unknown) to $3 with detail $4
-- ('' = none), as a compare-and-set.
UPDATE effectd.intents
SET delivery        = $3,
    delivery_detail = nullif($4, ''),
    delivery_at     = now(),
    updated_at      = now()
WHERE id = $1 AND coalesce(delivery, '') = $2
