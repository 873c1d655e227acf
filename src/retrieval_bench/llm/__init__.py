"""The LLM layer: providers behind one interface, tasks, cost, hygiene, rate limits, sync and batch runs.

Its clients are the golden-set build (goldenset.selection, goldenset.assemble) and relevance
judging (goldenset.judge). Entry points:
runs.paid (pay_for: resume, estimate, dry run, cost guard, run), runs.runner.run(task, jobs, meta,
settings, cache_path) and runs.runner.resume_batches; a job is made by a task
(runs.tasks.QUESTIONS.job), settings come from params (cost.settings.Settings.from_params).

Six rooms on four floors: a module imports only its own room, the rooms below it, and core/
(tests/project/test_llm_floors.py checks it).

floor 4  runs/          running requests
    tasks.py              Task (template placeholder, escaping, reply parser), Job, QUESTIONS (and each kind's), JUDGE
    progress.py           Outcome and the progress bar
    sync.py               the sync runner (and a run's shared pause)
    batch.py              the batch runner: intent journal, reconciliation, collection
    runner.py             run / resume_batches: which runner, one-line stops
    paid.py               the one entry point for paid work (golden set and judge)
floor 3  cost/          settings and cost
    settings.py           Settings (API calls, prices) and Meta (how a record was made)
    prices.py             the price table, a section's price resolved, money printed truthfully
    guard.py              the estimate and the guard at <section>.max_cost_usd
floor 2  providers/     the APIs behind one interface
    base.py               the Provider interface (client, send, reply, SDK errors) and BatchProvider
    registry.py           providers by generate.provider name: a new one is its module and one line here
    anthropic.py          `anthropic`: the Messages API
    anthropic_batch.py    `anthropic-batch`: the Message Batches API
    openai_compatible.py  `openai-compatible`: chat completions (vLLM, Ollama, llama.cpp, OpenAI)
    schema.py             the JSON schema a reply is held to (response_format json_schema)
    tokens.py             tokens counted without a tokenizer (the estimate's; a reply's without usage)
    stub_server.py        a deterministic stub server on 127.0.0.1 (`retrieval-bench stub-llm`; the tests' stub)
floor 1  transport/     HTTP safety
    credentials.py        where a key may be sent, keys masked in every message
    connection.py         the guarded HTTP client: deadlines, unreachable endpoints named, no redirects
    ratelimit.py          one pause for all workers after a 429/529/503, server-asked waits capped
    errors.py             spend limit / refused / transient, EndpointUnreachable, StopGeneration
floor 1  checks/        reply checks
    hygiene.py            the question task's reply parser: clean_reply and its reject reasons
    kinds.py              the other question kinds' reply parsers (keyword, multi, unanswerable)
    grades.py             the judging task's reply parser: parse_grade (0-3) and its reject reasons
    passage_escape.py     how a passage is escaped before it is sent
floor 1  cache/         the reply cache
    replies.py            JSONL, append-only, checksummed: cache_key, CacheWriter, read_cache, the batch journal

API keys come only from the environment (each provider's key_env: ANTHROPIC_API_KEY,
OPENAI_API_KEY) and are never written anywhere: a reply that holds one is not stored
(transport.credentials.key_leak).
"""
