-- Stores channel $1's redacted payload fields $2; writes nothing when unchanged.
UPDATE effectd.channels SET redact = $2 WHERE name = $1 AND redact IS DISTINCT FROM $2
