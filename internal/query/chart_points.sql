-- The points of a chart: the minute rollups of channels $1 (ARRAY['*'] for the
-- whole system) from $2 to $3 (exclusive), summed over the channels per
-- minute, then over each step of $4 from $2. Counts add up; the backlog and
-- the oldest due age are the largest sampled in the step. Reads only the
-- rollup rows of the range (by primary key).
SELECT date_bin($4::interval, minute, $2::timestamptz) AS at,
       sum(sent)::bigint, sum(failed)::bigint, sum(in_doubt)::bigint, sum(skipped)::bigint,
       sum(accepted)::bigint, sum(delivered)::bigint, sum(undelivered)::bigint,
       sum(provider_errors)::bigint, sum(backoffs)::bigint,
       max(backlog)::bigint, max(oldest_due_seconds)
FROM (
    SELECT minute,
           sum(sent) AS sent, sum(failed) AS failed, sum(in_doubt) AS in_doubt, sum(skipped) AS skipped,
           sum(accepted) AS accepted, sum(delivered) AS delivered, sum(undelivered) AS undelivered,
           sum(provider_errors) AS provider_errors, sum(backoffs) AS backoffs,
           sum(backlog) AS backlog, max(oldest_due_seconds) AS oldest_due_seconds
    FROM effectd.minute_rollups
    WHERE channel = ANY ($1::text[]) AND minute >= $2::timestamptz AND minute < $3::timestamptz
    GROUP BY minute
) AS m
GROUP BY 1
ORDER BY 1
