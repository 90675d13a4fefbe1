-- Drops the first partition of intents, attempts and provider events (all
-- before tomorrow, as a fresh database has it) and forgets it.
DROP TABLE effectd.intents_p0, effectd.attempts_p0, effectd.provider_events_p0;
DELETE FROM effectd.partitions WHERE lower = '-infinity'
