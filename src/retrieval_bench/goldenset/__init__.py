"""The golden set: questions anchored to evidence, their selection and echo gauge.

assemble (the stage's library) -> selection (which passages, which cached reply; generation
through retrieval_bench.llm, whose reply cache is llm.cache.replies) -> build (golden rows) -> evidence
(where an excerpt lies); echo, formats and gauge beside them. Only selection and assemble use
the LLM layer."""
