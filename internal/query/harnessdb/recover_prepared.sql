-- Does now what Citus's maintenance daemon does every citus.recover_2pc_interval
-- (a minute by default): commits each transaction a worker holds PREPARED whose
-- coordinator recorded the commit (a worker that failed between PREPARE and
-- COMMIT PREPARED), rolls back the others, and returns how many it settled;
-- then counts the prepared transactions left on the workers (those of
-- transactions still in flight).
SELECT recover_prepared_transactions() AS recovered,
       (SELECT coalesce(sum(result::int), 0) FROM run_command_on_workers('SELECT count(*) FROM pg_prepared_xacts') WHERE success) AS left_prepared
