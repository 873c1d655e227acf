"""Floor 3, settings and cost: Settings (a params section's API calls, its prices resolved) and Meta
(settings), the price table and money printed truthfully (prices), the estimate and the guard at
max_cost_usd (guard). Stands on providers/ and cache/."""
