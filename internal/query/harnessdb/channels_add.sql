-- Registers the channels named $1 (a text array) with the providers $2 (a
-- text array, in the same order), every other column its default, unless a
-- channel of that name exists.
INSERT INTO effectd.channels (name, provider)
SELECT * FROM unnest($1::text[], $2::text[])
ON CONFLICT DO NOTHING
