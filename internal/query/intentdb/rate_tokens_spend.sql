-- Leaves channel $1's rate tokens at $2, as of now.
UPDATE effectd.rate_buckets
SET tokens = $2, at = clock_timestamp()
WHERE channel = $1
