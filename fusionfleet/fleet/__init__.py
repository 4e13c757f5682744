"""The render fleet's rules: scaling, quotas, presence, waking, fairness, tenant limits, blocklist, stragglers."""
