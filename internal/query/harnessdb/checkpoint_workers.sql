-- Writes every dirty page out now on every Citus worker (superuser), as
-- Checkpoint does on the node it runs on.
SELECT count(*) FROM run_command_on_workers('CHECKPOINT')
