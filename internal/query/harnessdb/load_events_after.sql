-- The distributed mode's load, its third part: a delivered provider event
-- (on the coordinator) for each SENT sms intent whose id is above $1, as
-- load_history.sql writes it.
INSERT INTO effectd.provider_events (provider, event_id, channel, intent_id, object_ref, type, status,
    delivery, outcome, payload, received_at)
SELECT 'twilio', provider_ref || ':delivered', channel, id, provider_ref, 'delivered', 'delivered',
       'delivered', 'applied', jsonb_build_object('MessageSid', provider_ref, 'MessageStatus', 'delivered'), created_at
FROM effectd.intents
WHERE id > $1 AND channel = 'sms' AND provider_ref IS NOT NULL
