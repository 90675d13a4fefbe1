-- A provider asked this channel to slow down (429 with Retry-After): empty the
-- shared rate tokens so that no instance claims for about $2 seconds.
INSERT INTO effectd.rate_buckets AS b (channel, tokens, at)
VALUES ($1, -($2::float8 * $3::float8), clock_timestamp())
ON CONFLICT (channel) DO UPDATE
SET tokens = least(b.tokens, excluded.tokens), at = excluded.at
