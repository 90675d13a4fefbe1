-- chart_points.sql over the hour rollups (migration 027), for steps of whole
-- hours: the hour rows of channels $1 (ARRAY['*'] for the whole system) from
-- $2 to $3 (exclusive), summed over the channels per hour, then over each
-- step of $4 from $2. Counts add up; the backlog and the oldest due age are
-- the largest in the step. Reads only the hour rows of the range (by primary
-- key): a range's hours are few, so the counts sum as bigint (in numeric)
-- whatever an hour holds.
SELECT date_bin($4::interval, hour, $2::timestamptz) AS at,
       sum(sent)::bigint, sum(failed)::bigint, sum(in_doubt)::bigint, sum(skipped)::bigint,
       sum(accepted)::bigint, sum(delivered)::bigint, sum(undelivered)::bigint,
       sum(provider_errors)::bigint, sum(backoffs)::bigint,
       max(backlog)::bigint, max(oldest_due_seconds)
FROM (
    SELECT hour,
           sum(sent) AS sent, sum(failed) AS failed, sum(in_doubt) AS in_doubt, sum(skipped) AS skipped,
           sum(accepted) AS accepted, sum(delivered) AS delivered, sum(undelivered) AS undelivered,
           sum(provider_errors) AS provider_errors, sum(backoffs) AS backoffs,
           sum(backlog) AS backlog, max(oldest_due_seconds) AS oldest_due_seconds
    FROM effectd.hour_rollups
    WHERE channel = ANY ($1::text[]) AND hour >= $2::timestamptz AND hour < $3::timestamptz
    GROUP BY hour
) AS h
GROUP BY 1
ORDER BY 1
