-- Records what provider event $1 did: the intent it is about ($2, 0 = none)
-- and its outcome $3 (applied, settled, unchanged, other_ref, orphan).
UPDATE effectd.provider_events SET intent_id = nullif($2, 0), outcome = $3 WHERE id = $1
