-- Removes the minute rollups and latency slots of minutes before $1, and the
-- hour rollups and latency slots (migration 027) of hours whose every minute
-- is before $1: an hour goes with its last minute.
WITH latency AS (
    DELETE FROM effectd.minute_latency WHERE minute < $1
),
hours AS (
    DELETE FROM effectd.hour_rollups WHERE hour <= $1::timestamptz - interval '1 hour'
),
hour_latency AS (
    DELETE FROM effectd.hour_latency WHERE hour <= $1::timestamptz - interval '1 hour'
)
DELETE FROM effectd.minute_rollups WHERE minute < $1
