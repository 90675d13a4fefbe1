-- The rate tokens channel $1 holds now ($2 tokens a second, at most $3
-- saved up), locking its row until the transaction ends: the claims of the
-- distributed mode (query.ClaimBucket) read them here, claim, and spend them
-- with rate_tokens_spend.sql. No row: the channel has no rate tokens yet.
SELECT least($3::float8, tokens + extract(epoch FROM clock_timestamp() - at) * $2::float8)
FROM effectd.rate_buckets
WHERE channel = $1
FOR UPDATE
