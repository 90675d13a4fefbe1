-- event_intent.sql's first step in the distributed mode: the bucket and key
-- of intent $2 of channel $1 whose producer's event id is $3, the id and
-- event id effectd stamped on a provider's object (an id alone is handed out
-- again after a failover that lost its enqueue; the event id with the channel
-- is not). A provider event carries no bucket, so this reads every shard: one
-- probe of the index intents_id (id) in each day partition of each shard,
-- which effectd.distribute adds because the primary key there is (bucket, id).
-- No row: the event is an orphan. query.EventIntentBucket then locks the
-- intent on its bucket's shard.
SELECT bucket, id, idempotency_key FROM effectd.intents WHERE id = $2 AND channel = $1 AND event_id = $3
