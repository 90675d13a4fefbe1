-- Lists up to $3 pending, unexpired approval requests of the channels $1
-- (NULL: every channel) with an id above $2, oldest first: read through the
-- partial index approval_requests_pending, which holds only pending rows.
SELECT {{columns}} FROM effectd.approval_requests
WHERE state = 'pending' AND expires_at > now() AND id > $2
  AND ($1::text[] IS NULL OR channel = ANY ($1))
ORDER BY id
LIMIT $3
