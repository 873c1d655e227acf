"""The LLM layer: providers behind one interface, tasks, cost, hygiene, rate limits, sync and batch runs.

Its clients are the golden-set build (goldenset.selection, goldenset.assemble) and relevance
judging (goldenset.judge). Entry points:
runner.run(task, jobs, meta, settings, cache_path) and runner.resume_batches; a job is made by
a task (tasks.QUESTIONS.job), settings come from params (settings.Settings.from_params).

    provider.py           the Provider interface (client, send, reply, SDK errors) and BatchProvider
    registry.py           providers by generate.provider name: a new one is its module and one line here
    anthropic.py          `anthropic`: the Messages API
    anthropic_batch.py    `anthropic-batch`: the Message Batches API
    openai_compatible.py  `openai-compatible`: chat completions (vLLM, Ollama, llama.cpp, OpenAI)
    credentials.py        where a key may be sent
    connection.py         the guarded HTTP client: timeouts, unreachable endpoints named
    ratelimit.py          one pause for all workers after a 429/529/503
    errors.py             spend limit / refused / transient, StopGeneration
    settings.py           Settings (API calls, prices) and Meta (how a record was made)
    tasks.py              Task (template placeholder, escaping, reply parser), Job, QUESTIONS, JUDGE
    hygiene.py            the question task's reply parser: clean_reply and its reject reasons
    grades.py             the judging task's reply parser: parse_grade (0-3) and its reject reasons
    tokens.py             input tokens counted without a tokenizer
    cost.py               the estimate and the guard at generate.max_cost_usd
    progress.py           Outcome and the progress bar
    sync.py               the sync runner
    batch.py              the batch runner: intent journal, reconciliation, collection
    runner.py             run / resume_batches: which runner, one-line stops
    cache.py              the reply cache (JSONL, append-only, checksummed): cache_key, CacheWriter, read_cache
    stub_server.py        a deterministic stub server on 127.0.0.1 (`retrieval-bench stub-llm`; the tests' stub)

API keys come only from the environment (each provider's key_env: ANTHROPIC_API_KEY,
OPENAI_API_KEY) and are never written anywhere: a reply that holds one is not stored (credentials.key_leak).
"""
