-- Gathers planner statistics for the small tables every read joins (channels,
-- rate tokens): autovacuum analyzes a table only after about 50 changes, so a
-- deployment with a few channels would otherwise be planned as if it had
-- hundreds, and the cost of a count over every channel would be overestimated
-- past the JIT threshold. A role that does not own them gets a warning, not an
-- error.
ANALYZE effectd.channels, effectd.rate_buckets
