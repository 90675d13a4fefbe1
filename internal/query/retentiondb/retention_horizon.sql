-- The longest retention of any registered channel (each channel's effective
-- retention: override, registered policy, default): day partitions whose
-- newest row changed longer ago than this are dropped whole, and only channels
-- that keep less are pruned row by row (prune.sql). NULL with no channel.
SELECT max(effectd.channel_retention(c.name)) FROM effectd.channels c
