-- Lists the channels by name: name, provider, policy (YAML), policy_override, paused, updated_at.
SELECT name, provider, policy, policy_override, paused, updated_at FROM effectd.channels ORDER BY name
