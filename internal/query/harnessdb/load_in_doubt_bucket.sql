-- The distributed mode's load_in_doubt.sql: 3 sms intents IN_DOUBT
-- ('doubt-1' to 'doubt-3', in buckets 1 to 3) whose lease has expired.
INSERT INTO effectd.intents (bucket, event_id, channel, payload, idempotency_key, status, attempts, lease_expires_at)
SELECT g, 'doubt-' || g, 'sms', '{"to": "+15550000000", "body": "hi"}', 'sms:doubt-' || g, 'IN_DOUBT', 1, now()
FROM generate_series(1, 3) g
