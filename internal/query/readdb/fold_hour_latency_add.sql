-- Adds the latency slots of one fold to hour_latency ($1 channels, $2 UTC
-- hours, $3 slots, $4 counts), in key order.
INSERT INTO effectd.hour_latency AS l (channel, hour, slot, n)
SELECT *
FROM unnest($1::text[], $2::timestamptz[], $3::smallint[], $4::bigint[])
ORDER BY 1, 2, 3
ON CONFLICT (channel, hour, slot) DO UPDATE SET n = l.n + excluded.n
