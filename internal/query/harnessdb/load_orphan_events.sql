-- Inserts 2 Twilio delivery events on channel sms that match no intent
-- (orphans).
INSERT INTO effectd.provider_events (provider, event_id, channel, object_ref, type, status, outcome, payload)
SELECT 'twilio', 'SMorphan' || g || ':delivered', 'sms', 'SMorphan' || g, 'delivered', 'delivered', 'orphan', '{}'
FROM generate_series(1, 2) g
