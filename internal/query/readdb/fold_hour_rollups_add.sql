-- Adds the counts of one fold to the hour rollups (migration 027), a row per
-- channel and UTC hour (the unnested arrays, in the order of hour_rollups'
-- columns), in key order, as fold_rollups_add.sql does to the minutes in the
-- same transaction.
INSERT INTO effectd.hour_rollups AS r
    (channel, hour, sent, failed, in_doubt, skipped, accepted, delivered, undelivered, provider_errors, backoffs)
SELECT *
FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],
            $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[])
ORDER BY 1, 2
ON CONFLICT (channel, hour) DO UPDATE
SET sent            = r.sent + excluded.sent,
    failed          = r.failed + excluded.failed,
    in_doubt        = r.in_doubt + excluded.in_doubt,
    skipped         = r.skipped + excluded.skipped,
    accepted        = r.accepted + excluded.accepted,
    delivered       = r.delivered + excluded.delivered,
    undelivered     = r.undelivered + excluded.undelivered,
    provider_errors = r.provider_errors + excluded.provider_errors,
    backoffs        = r.backoffs + excluded.backoffs
