-- Calls effectd.cancel with named arguments: event id $1, channel $2, reason
-- $3, bucket $4 (NULL on one node). Returns the intent's status after the
-- call (CANCELLED when cancelled, now or before), or NULL when the channel
-- holds no such event.
SELECT effectd.cancel(event_id => $1, channel => $2, reason => $3, bucket => $4)
