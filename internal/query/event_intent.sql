-- The intent a provider event is about: by the id effectd stamped on the
-- object, else by the object's reference; in the event's channel only.
SELECT id, status, attempts, coalesce(provider_ref, ''), coalesce(delivery, ''), delivery_at
FROM effectd.intents
WHERE channel = $1
  AND (id = $2 OR ($2 = 0 AND provider_ref = $3))
ORDER BY id
LIMIT 1
FOR UPDATE
