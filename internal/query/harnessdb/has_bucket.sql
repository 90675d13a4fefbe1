-- Whether effectd.intents has a column bucket: the distributed mode's
-- layout, in which the inventory reads join on bucket (the *_bucket.sql files).
SELECT EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = 'effectd.intents'::regclass AND attname = 'bucket' AND NOT attisdropped)
