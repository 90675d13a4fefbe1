-- The latency histogram of a chart's points: the slots of channels $1
-- (ARRAY['*'] for the whole system) from $2 to $3 (exclusive), summed over
-- each step of $4 from $2. Reads only the rows of the range (by primary key).
-- A minute's count fits an int, which sums in bigint, not numeric.
SELECT date_bin($4::interval, minute, $2::timestamptz) AS at, slot, sum(n::int)::bigint
FROM effectd.minute_latency
WHERE channel = ANY ($1::text[]) AND minute >= $2::timestamptz AND minute < $3::timestamptz
GROUP BY 1, 2
ORDER BY 1, 2
