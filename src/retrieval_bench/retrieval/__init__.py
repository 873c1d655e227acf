"""Rank chunks for each question by each retrieval method (the vectors come from retrieval_bench.embedding)."""
