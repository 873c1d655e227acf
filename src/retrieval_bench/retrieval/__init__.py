"""Embed corpus and questions, and rank chunks by each retrieval method."""
