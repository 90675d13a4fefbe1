-- Locks the three partitioned tables ACCESS EXCLUSIVE, in the order every
-- statement that writes two of them takes them (intents, then attempts, then
-- provider events), for the rest of the transaction: query.DropTogether's
-- first step, which then drops partitions of any of them at once.
LOCK TABLE effectd.intents, effectd.attempts, effectd.provider_events IN ACCESS EXCLUSIVE MODE
