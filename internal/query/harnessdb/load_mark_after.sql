-- The distributed mode's load, its last part: the id mark serve's fold loop
-- would write after the intents whose id is above $1.
INSERT INTO effectd.id_marks (at, max_id)
SELECT max(created_at) + interval '1 microsecond', max(id) FROM effectd.intents WHERE id > $1
