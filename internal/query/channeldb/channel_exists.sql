-- Reports whether channel $1 is registered.
SELECT EXISTS (SELECT 1 FROM effectd.channels WHERE name = $1)
