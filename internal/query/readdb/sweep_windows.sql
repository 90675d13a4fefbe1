-- The windows of channel $1's scheduled sweep that meet [$2, $3), in order of
-- their start, at most $4: a range of the primary key from $2 on.
SELECT since, until
FROM effectd.sweep_windows
WHERE channel = $1
  AND until > $2
  AND since < $3
ORDER BY since, until
LIMIT $4
