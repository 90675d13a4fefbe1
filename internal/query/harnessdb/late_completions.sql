-- The intents (id, channel, event id) with a send attempt recorded after the
-- reconciler settled the same attempt (kind lookup) and not marked
-- "(fenced out)" or "(already settled by callback)": once an attempt is
-- settled, its late answer must change nothing.
SELECT DISTINCT i.id, i.channel, i.event_id
FROM effectd.attempts l
JOIN effectd.attempts s ON s.intent_id = l.intent_id AND s.attempt = l.attempt AND s.kind = 'send' AND s.id > l.id
JOIN effectd.intents i ON i.id = l.intent_id
WHERE l.kind = 'lookup' AND s.outcome NOT LIKE '%(fenced out)' AND s.outcome NOT LIKE '%(already settled by callback)'
  AND s.outcome <> 'lease expired'
