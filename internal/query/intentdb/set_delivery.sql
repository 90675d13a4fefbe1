-- Moves intent $1's delivery from $2 ('' = unknown) to $3 with detail $4
-- ('' = none), as a compare-and-set on the row that still has idempotency
-- key $5 (a failover that lost the intent's enqueue hands its id out again).
UPDATE effectd.intents
SET delivery        = $3,
    delivery_detail = nullif($4, ''),
    delivery_at     = now(),
    updated_at      = now()
WHERE id = $1 AND idempotency_key = $5 AND coalesce(delivery, '') = $2
