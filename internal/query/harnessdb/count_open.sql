-- Counts the intents still PENDING or SENDING.
SELECT count(*) FROM effectd.intents WHERE status IN ('PENDING', 'SENDING')
