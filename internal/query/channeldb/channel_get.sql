-- Reads channel $1: name, provider, policy (YAML), policy_override, paused, updated_at.
SELECT name, provider, policy, policy_override, paused, updated_at FROM effectd.channels WHERE name = $1
