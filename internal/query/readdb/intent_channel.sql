-- Reads the channel of intent $1.
SELECT channel FROM effectd.intents WHERE id = $1
