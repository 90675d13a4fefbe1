-- Lists each channel's name and the payload fields it redacts for viewers,
-- named as effectdtype.Redaction's fields.
SELECT name AS channel, redact AS fields FROM effectd.channels ORDER BY name
