"""Vector stores as the source of chunks, of corpus vectors and as the retriever under test."""
