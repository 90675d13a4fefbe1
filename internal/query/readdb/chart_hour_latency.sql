-- chart_latency.sql over hour_latency (migration 027), for steps of whole
-- hours: the slots of channels $1 (ARRAY['*'] for the whole system) from $2
-- to $3 (exclusive), summed over each step of $4 from $2. Reads only the
-- rows of the range (by primary key).
SELECT date_bin($4::interval, hour, $2::timestamptz) AS at, slot, sum(n)::bigint
FROM effectd.hour_latency
WHERE channel = ANY ($1::text[]) AND hour >= $2::timestamptz AND hour < $3::timestamptz
GROUP BY 1, 2
ORDER BY 1, 2
