-- Calls effectd.status with named arguments: event id $1, channel $2, bucket
-- $3 (NULL on one node). Returns the intent's status, attempts, provider
-- reference, delivery, last error class and next attempt time ('' and NULL
-- for what it has none of), or no row.
SELECT status, attempts, coalesce(provider_ref, ''), coalesce(delivery, ''), coalesce(last_error_class, ''), next_attempt_at
FROM effectd.status(event_id => $1, channel => $2, bucket => $3)
