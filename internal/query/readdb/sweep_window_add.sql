-- Records that channel $1's scheduled sweep finished the window [$2, $3) with
-- $4 findings, and deletes the channel's windows that ended more than 30 days
-- before it. A window recorded already is left as it is.
WITH gone AS (
    DELETE FROM effectd.sweep_windows
    WHERE channel = $1 AND until < $3::timestamptz - interval '30 days'
)
INSERT INTO effectd.sweep_windows (channel, since, until, findings)
VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING
