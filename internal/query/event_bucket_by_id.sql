-- event_intent.sql's first step in the distributed mode: the bucket of intent
-- $2 of channel $1, the id effectd stamped on a provider's object. A provider
-- event carries no bucket, so this reads every shard: one probe of the index
-- intents_id (id) in each day partition of each shard, which
-- effectd.distribute adds because the primary key there is (bucket, id).
-- No row: the event is an orphan. query.EventIntentBucket then locks the
-- intent on its bucket's shard.
SELECT bucket, id FROM effectd.intents WHERE id = $2 AND channel = $1
