-- The bucket of intent $1 in the distributed mode (no row: no such intent).
-- A statement by id alone reads every shard: operator actions read the
-- bucket first, then write on its shard.
SELECT bucket FROM effectd.intents WHERE id = $1
