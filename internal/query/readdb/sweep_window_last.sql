-- The end of the latest window channel $1's scheduled sweep finished, NULL
-- when none: the first entry of the primary key's range of the channel, read
-- backwards.
SELECT max(until) FROM effectd.sweep_windows WHERE channel = $1
