-- Creates channel $1's shared rate bucket unless it exists.
INSERT INTO effectd.rate_buckets (channel) VALUES ($1) ON CONFLICT DO NOTHING
