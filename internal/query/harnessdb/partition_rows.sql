-- Counts the rows of one partition; "effectd.partition" stands for its name.
SELECT count(*) FROM effectd.partition
