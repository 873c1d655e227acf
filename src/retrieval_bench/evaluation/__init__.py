"""Score a ranking: relevance, metrics, paired comparison, export."""
