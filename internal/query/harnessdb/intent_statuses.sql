-- Every intent's channel, event id, status and claim count (attempts).
SELECT channel, event_id, status, attempts FROM effectd.intents
