"""Making vectors: the corpus and the questions embedded (embed; on Ray: embed_ray), the model's
backends (backends, onnx_export), the content-addressed embedding cache (embedding_cache,
cache_prune), vectors read from a store (stored_vectors) or from the embed stages' files
(saved_vectors). Ranking with them is retrieval_bench.retrieval's."""
