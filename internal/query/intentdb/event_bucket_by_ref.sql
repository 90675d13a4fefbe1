-- event_intent.sql's first step in the distributed mode, for an event whose
-- object carries no producer's event id: the bucket, id and key of the oldest
-- intent of channel $1 whose provider reference is $2. A provider event
-- carries no bucket, so this reads every shard: one probe of the partial
-- index intents_provider_ref in each day partition of each shard. No row: the
-- event is an orphan.
SELECT bucket, id, idempotency_key FROM effectd.intents WHERE channel = $1 AND provider_ref = $2 ORDER BY id LIMIT 1
