-- Calls effectd.enqueue_many with a batch given as parallel arrays, one
-- element per intent: event ids $1, channels $2, payloads $3 (JSON text),
-- occurred_at $4, not_before $5, ordering keys $6 (NULL elements: not
-- given); keep_valid $7, bucket $8 (NULL on one node). Returns the answers as
-- one JSON array in the batch's order, each {"outcome", "field", "message"},
-- so that a transaction of database/sql, which cannot scan arrays, reads it.
SELECT coalesce(jsonb_agg(jsonb_build_object('outcome', a.outcome, 'field', a.field, 'message', a.message) ORDER BY a.ord), '[]')::text
FROM effectd.enqueue_many(
    intents    => ARRAY(SELECT (t.e, t.c, t.p::jsonb, t.o, t.nb, t.k)::effectd.new_intent
                        FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::text[])
                             WITH ORDINALITY AS t(e, c, p, o, nb, k, n)
                        ORDER BY t.n),
    keep_valid => $7,
    bucket     => $8
) AS a
