-- Adds a partition of intents, attempts and provider events for each UTC day
-- from $1 days before today to today.
SELECT effectd.add_partition(t, (now() AT TIME ZONE 'UTC')::date - d)
FROM unnest(ARRAY['intents', 'attempts', 'provider_events']) t, generate_series(0, $1::int) d
