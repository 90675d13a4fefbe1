-- Lists the registered channels' names.
SELECT name FROM effectd.channels ORDER BY name
