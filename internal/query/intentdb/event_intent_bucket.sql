-- event_intent.sql in the distributed mode, once the bucket is known
-- (event_bucket_by_id.sql, event_bucket_by_ref.sql): locks intent $2 of
-- channel $3 in bucket $1, still with idempotency key $4 (the one the first
-- step found), for the event's transaction, a single-shard statement (Citus
-- runs FOR UPDATE only so). No row: it is gone.
SELECT id, status, attempts, coalesce(provider_ref, '') AS provider_ref, coalesce(delivery, '') AS delivery,
       delivery_at, idempotency_key AS key, coalesce(traceparent, '') AS traceparent
FROM effectd.intents
WHERE bucket = $1 AND id = $2 AND channel = $3 AND idempotency_key = $4
FOR UPDATE
