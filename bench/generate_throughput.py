"""Questions per second of the anthropic provider against the stub LLM server.

    .venv/bin/python bench/generate_throughput.py [--passages 200] [--concurrency 8] [--latency 0.2]

Drives the real SDK (AsyncAnthropic) through retrieval_bench.llm.runs.runner.run, as the stage does:
rendered prompts of sample passages, the cache appended and fsynced per reply. The stub answers
each request after `latency` seconds, so the ideal is concurrency / latency questions per
second (40 at 8 and 200 ms). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from stub_llm import StubLLM  # noqa: E402

from retrieval_bench.corpus.load import chunk_documents, read_documents_folder  # noqa: E402
from retrieval_bench.llm.cost.settings import Meta, Settings  # noqa: E402
from retrieval_bench.llm.runs.runner import run  # noqa: E402
from retrieval_bench.llm.runs.tasks import QUESTIONS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the stub takes per reply")
    args = parser.parse_args()

    documents = read_documents_folder(ROOT / "data" / "sample" / "sqlite")
    passages = chunk_documents(documents, 800, 100).drop_duplicates("text_sha256").head(args.passages)
    template = (ROOT / "data" / "question_prompt.txt").read_text(encoding="utf-8")
    prompt_sha = hashlib.sha256(template.encode("utf-8")).hexdigest()
    meta = Meta("anthropic", "anthropic", "claude-haiku-4-5", prompt_sha, 300)
    jobs = [QUESTIONS.job(meta, template, text, sha, 0) for text, sha in zip(passages["text"], passages["text_sha256"])]
    settings = Settings.from_params({"provider": "anthropic", "concurrency": args.concurrency, "max_cost_usd": None})

    with StubLLM() as stub, tempfile.TemporaryDirectory() as tmp:
        stub.latency = args.latency
        os.environ["ANTHROPIC_API_KEY"] = "sk-ant-bench"
        os.environ["ANTHROPIC_BASE_URL"] = stub.url
        import anthropic  # noqa: F401  (imported before the clock starts, as the stage has it by then)

        start = time.perf_counter()
        outcome = run(QUESTIONS, jobs, meta, settings, Path(tmp) / "cache.jsonl")
        elapsed = time.perf_counter() - start
        requests = len(stub.generation_requests())
    print(
        json.dumps(
            {
                "benchmark": "generate_throughput",
                "provider": "anthropic (stub)",
                "questions": outcome.succeeded,
                "requests": requests,
                "concurrency": args.concurrency,
                "latency_s": args.latency,
                "seconds": round(elapsed, 3),
                "questions_per_s": round(outcome.succeeded / elapsed, 2),
                "ideal_questions_per_s": round(args.concurrency / args.latency, 2) if args.latency else None,
            }
        )
    )


if __name__ == "__main__":
    from common import run_main  # a bad argument or a missing extra: one line

    run_main(main)
