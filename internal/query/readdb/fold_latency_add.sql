-- Adds the latency slots of one fold to minute_latency ($1 channels, $2
-- minutes, $3 slots, $4 counts), in key order.
INSERT INTO effectd.minute_latency AS l (channel, minute, slot, n)
SELECT *
FROM unnest($1::text[], $2::timestamptz[], $3::smallint[], $4::bigint[])
ORDER BY 1, 2, 3
ON CONFLICT (channel, minute, slot) DO UPDATE SET n = l.n + excluded.n
