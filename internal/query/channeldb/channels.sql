-- Reads the registered channels: name, provider, policy (YAML), policy_override, paused.
SELECT name, provider, policy, policy_override, paused
FROM effectd.channels
ORDER BY name
