-- The intent a provider event is about: by the id effectd stamped on the
-- object ($2), else ($2 = 0) by the object's reference $3 (the oldest such
-- intent, through intents_provider_ref); in the event's channel $1 only. One
-- index probe either way, in a generic plan too.
SELECT id, status, attempts, coalesce(provider_ref, ''), coalesce(delivery, ''), delivery_at
FROM effectd.intents
WHERE channel = $1
  AND id = CASE WHEN $2::bigint <> 0 THEN $2::bigint
                ELSE (SELECT min(r.id) FROM effectd.intents r WHERE r.channel = $1 AND r.provider_ref = $3) END
FOR UPDATE
