-- Lists the partitions (name, parent) whose detach began and did not finish
-- (DETACH PARTITION … CONCURRENTLY stopped half way), for FinishDetach to
-- finish.
SELECT c.relname, p.relname
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_class p ON p.oid = i.inhparent
JOIN pg_namespace n ON n.oid = p.relnamespace
WHERE n.nspname = 'effectd' AND i.inhdetachpending
