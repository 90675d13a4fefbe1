-- Reads the last id handed out before time $1, as marked (id_marks): every
-- intent created at or after $1 has a higher id. 0 when no mark is older.
SELECT coalesce((SELECT max_id FROM effectd.id_marks WHERE at < $1 ORDER BY at DESC LIMIT 1), 0)
