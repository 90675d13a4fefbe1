-- Makes the day partitions of intents, attempts and provider_events for the
-- UTC days from today to today + $1 that have none (effectd.add_partitions),
-- and returns how many it made and when the last intents partition ends.
SELECT effectd.add_partitions($1), (SELECT max(upper) FROM effectd.partitions WHERE parent = 'intents')
