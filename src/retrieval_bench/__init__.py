"""retrieval-bench: measure a retriever on a golden set of (question -> relevant chunk) pairs."""
