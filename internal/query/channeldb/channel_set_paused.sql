-- Pauses (true) or resumes (false, $2) channel $1 on every instance.
UPDATE effectd.channels SET paused = $2, updated_at = now() WHERE name = $1
