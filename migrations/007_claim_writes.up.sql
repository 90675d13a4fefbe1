-- +goose Up
-- Every intent is updated at least twice (claimed, then settled), and neither
-- update can be HOT: status is in several partial indexes. Each index an
-- update touches is one more entry and its WAL. intents_status_updated, on
-- every row, took an entry at each update although only the pruner reads it,
-- and only for settled rows of one channel. It is replaced by a partial index
-- on exactly those rows: claims and retries (to SENDING and back to PENDING)
-- no longer write to it, and the pruner finds a channel's old rows directly.
DROP INDEX effectd.intents_status_updated;
CREATE INDEX intents_prunable ON effectd.intents (channel, updated_at)
    WHERE status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED');
