-- Creates channel $1's shared rate tokens unless it has them.
INSERT INTO effectd.rate_buckets (channel) VALUES ($1) ON CONFLICT DO NOTHING
