"""Pipeline stages: each reads its params.yaml section, does I/O, and calls retrieval_bench."""
