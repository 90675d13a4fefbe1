-- Whether table $1 (a qualified, quoted name) is still attached to a parent.
SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1))
