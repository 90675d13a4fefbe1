-- The intent a provider event is about, in the event's channel $1 only, with
-- its idempotency key (the writes that follow fence on it). By the intent id
-- ($2) and the producer's event id ($4) effectd stamped on the object: an id
-- names an intent only while its enqueue survives (a failover that loses the
-- enqueue hands the id out again), so the row must also have the event id,
-- which with the channel is never reused. An object that carries no event id
-- ($4 = '': created before effectd stamped it, or no id at all) is matched by
-- its reference $3 alone, the oldest intent already holding it (through
-- intents_provider_ref), never by its id. One index probe either way, in a
-- generic plan too.
SELECT id, status, attempts, coalesce(provider_ref, '') AS provider_ref, coalesce(delivery, '') AS delivery,
       delivery_at, idempotency_key AS key, coalesce(traceparent, '') AS traceparent
FROM effectd.intents
WHERE channel = $1
  AND id = CASE WHEN $2::bigint <> 0 AND $4::text <> '' THEN $2::bigint
                ELSE (SELECT min(r.id) FROM effectd.intents r WHERE r.channel = $1 AND r.provider_ref = $3) END
  AND ($4::text = '' OR event_id = $4::text)
FOR UPDATE
