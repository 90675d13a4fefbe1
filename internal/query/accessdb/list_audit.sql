-- Lists the newest $2 audit entries of intent $1, oldest first.
SELECT * FROM (
    SELECT id, at, actor, action, reason, before, after
    FROM effectd.audit WHERE intent_id = $1 ORDER BY id DESC LIMIT $2) newest
ORDER BY id
