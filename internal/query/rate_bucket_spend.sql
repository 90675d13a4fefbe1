-- Leaves channel $1's bucket holding $2 tokens, as of now.
UPDATE effectd.rate_buckets
SET tokens = $2, at = clock_timestamp()
WHERE channel = $1
