-- Stores $2 (JSON, NULL: none) as channel $1's policy override.
UPDATE effectd.channels SET policy_override = $2, updated_at = now() WHERE name = $1
