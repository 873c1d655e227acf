"""Floor 1, the reply cache: paid-for replies in append-only, checksummed JSONL, their keys, and the
batch journal's path (replies)."""
