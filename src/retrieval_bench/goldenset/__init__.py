"""The golden set: questions anchored to evidence, their selection, cache and echo gauge.

assemble (the stage's library) -> selection (which passages, which cached reply; generation
through retrieval_bench.llm) -> build (golden rows) -> evidence (where an excerpt lies); cache,
echo, formats and gauge beside them. Only selection and assemble use the LLM layer."""
