-- Removes the minute rollups and latency slots of minutes before $1.
WITH latency AS (
    DELETE FROM effectd.minute_latency WHERE minute < $1
)
DELETE FROM effectd.minute_rollups WHERE minute < $1
