SELECT name, provider, policy, policy_override, paused
FROM effectd.channels
ORDER BY name
