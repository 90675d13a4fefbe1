-- Lists each channel's name and the payload fields it redacts for viewers.
SELECT name, redact FROM effectd.channels ORDER BY name
