-- event_intent.sql in the distributed mode, once the bucket is known
-- (event_bucket_by_id.sql, event_bucket_by_ref.sql): locks intent $2 of
-- channel $3 in bucket $1 for the event's transaction, a single-shard
-- statement (Citus runs FOR UPDATE only so). No row: it is gone.
SELECT id, status, attempts, coalesce(provider_ref, ''), coalesce(delivery, ''), delivery_at
FROM effectd.intents
WHERE bucket = $1 AND id = $2 AND channel = $3
FOR UPDATE
