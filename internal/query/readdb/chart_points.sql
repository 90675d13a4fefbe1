-- The points of a chart: the minute rollups of channels $1 (ARRAY['*'] for the
-- whole system) from $2 to $3 (exclusive), summed over the channels per
-- minute, then over each step of $4 from $2. Counts add up; the backlog and
-- the oldest due age are the largest sampled in the step. Reads only the
-- rollup rows of the range (by primary key). A minute's count fits an int:
-- sums of ints add in bigint, several times faster than sums of bigints,
-- which add in numeric.
SELECT date_bin($4::interval, minute, $2::timestamptz) AS at,
       sum(sent::int), sum(failed::int), sum(in_doubt::int), sum(skipped::int),
       sum(accepted::int), sum(delivered::int), sum(undelivered::int),
       sum(provider_errors::int), sum(backoffs::int),
       max(backlog)::bigint, max(oldest_due_seconds)
FROM (
    SELECT minute,
           sum(sent::int) AS sent, sum(failed::int) AS failed, sum(in_doubt::int) AS in_doubt, sum(skipped::int) AS skipped,
           sum(accepted::int) AS accepted, sum(delivered::int) AS delivered, sum(undelivered::int) AS undelivered,
           sum(provider_errors::int) AS provider_errors, sum(backoffs::int) AS backoffs,
           sum(backlog::int) AS backlog, max(oldest_due_seconds) AS oldest_due_seconds
    FROM effectd.minute_rollups
    WHERE channel = ANY ($1::text[]) AND minute >= $2::timestamptz AND minute < $3::timestamptz
    GROUP BY minute
) AS m
GROUP BY 1
ORDER BY 1
