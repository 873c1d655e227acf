"""SIGKILL at random moments: does a crash ever lose a finished question, pay for more than the
requests in flight, or create a batch twice?

Each trial makes a fresh temporary project (stages/, params.yaml, two documents of the bundled
sample: 165 passages, 150 questions asked for), starts `python -m stages.generate_goldenset`
against the stub LLM server (tests/stub_llm.py, the real SDKs over HTTP on 127.0.0.1), kills it
with SIGKILL at a random moment (mostly within a few seconds of its first request, sometimes while
it is still starting), then reruns the stage until it completes. Trials alternate
between the sync provider (anthropic, concurrency 8, 429s injected) and the batch provider
(anthropic-batch: random processing time, sometimes a 429 on create, sometimes a create whose
answer is held back so that the kill lands between create and journal).

Counted per trial:
- paid: generation requests the stub accepted (sync) or requests in the batches it created (batch);
- keys: distinct cache keys among them; repeats = paid - keys;
- in flight: requests the killed run had paid for but not written to the cache when it died;
- lost: questions in the cache right after the kill that are missing at the end;
- twice: requests that went into more than one created batch.

    .venv/bin/python bench/kill_trials.py --trials 12        # about 2 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import yaml  # noqa: E402
from stub_llm import StubLLM, read_jsonl, run_stage, stage_env, stage_project, start_stage  # noqa: E402

CACHE = "data/question_cache.jsonl"
JOURNAL = "data/question_cache.batches.jsonl"
GOLDEN = "data/goldenset.jsonl"
DOCS = ["atomiccommit.md", "foreignkeys.md"]
QUESTIONS = 150
CONCURRENCY = 8


def configure(project: Path, provider: str) -> None:
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    params["generate"].update(
        provider=provider,
        max_questions=QUESTIONS,
        concurrency=CONCURRENCY,
        max_retries=5,
        batch_poll_seconds=0.2,
        max_cost_usd=None,
    )
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def batch_phase(project: Path, stub: StubLLM) -> str:
    events = [e["event"] for e in read_jsonl(project / JOURNAL)]
    if "collected" in events:
        return "after collect"
    if "submitted" in events:
        return "polling/collecting"
    if "intent" in events:
        return "created, not journalled" if stub.created_batches() else "intent, not created"
    return "before submit"


def trial(number: int, mode: str, rng: random.Random, workdir: Path) -> dict:
    project = stage_project(workdir / f"trial{number}", docs=DOCS)
    configure(project, "anthropic" if mode == "sync" else "anthropic-batch")
    with StubLLM() as stub:
        env = {**stage_env(stub), "RETRIEVAL_BENCH_RECONCILE_GRACE_S": "2"}
        stub.latency = rng.uniform(0.03, 0.1)
        stub.retry_after_ms = 100
        stub.faults = [("rate_limit" if rng.random() < 0.05 else None) for _ in range(400)]
        if mode == "batch":
            stub.batch_seconds = rng.uniform(0.3, 2.0)
            stub.create_hold = rng.choice([0.0, 0.0, 1.5])
            stub.create_faults = rng.choice([[], [], ["rate_limit"]])
        process = start_stage(project, stub, env=env)
        started = time.monotonic()
        if rng.random() < 0.15:  # while starting up, before the first request
            time.sleep(rng.uniform(0.3, 1.5))
        else:  # a random moment after the first request reached the API
            while not stub.requests and process.poll() is None and time.monotonic() - started < 60:
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 2.0 if mode == "sync" else 3.5))
        delay = time.monotonic() - started
        killed = process.poll() is None
        if killed:
            process.send_signal(signal.SIGKILL)
        process.communicate()
        time.sleep(0.2)  # the stub finishes answering what the dead process sent
        at_kill = {r["key"] for r in read_jsonl(project / CACHE)}
        phase = batch_phase(project, stub) if mode == "batch" else "sync"
        if mode == "sync":
            paid_at_kill = [r.passage_sha for r in stub.generation_requests() if r.outcome == "ok"]
            in_flight = len(paid_at_kill) - len(at_kill)
        else:
            in_flight = sum(len(b["requests"]) for b in stub.created_batches()) - len(at_kill)
        stub.create_hold = 0.0
        reruns = 0
        for _ in range(3):
            reruns += 1
            status, out, err = run_stage(project, stub, env=env, timeout=300)
            if status == 0:
                break
        final = {r["key"] for r in read_jsonl(project / CACHE)}
        if mode == "sync":
            paid = [r.passage_sha for r in stub.generation_requests() if r.outcome == "ok"]
            twice = 0
        else:
            custom_ids = Counter(r["custom_id"] for b in stub.created_batches() for r in b["requests"])
            paid = list(custom_ids.elements())
            twice = sum(n - 1 for n in custom_ids.values())
        batches = len(stub.created_batches())
    golden = len(read_jsonl(project / GOLDEN))
    rejects = Counter(r["reason"] for r in read_jsonl(project / "metrics/generate_rejects.jsonl"))
    return {
        "trial": number,
        "mode": mode,
        "kill_s": f"{delay:.2f}" if killed else "finished first",
        "phase": phase,
        "cached_at_kill": len(at_kill),
        "in_flight": in_flight,
        "paid": len(paid),
        "keys": len(set(paid)),
        "repeats": len(paid) - len(set(paid)),
        "lost": len(at_kill - final),
        "batches": batches,
        "twice": twice,
        "reruns": reruns,
        "status": status,
        "golden": golden,
        "cache": len(final),
        "rejected": ",".join(f"{k}:{v}" for k, v in rejects.items()) or "-",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="keep the trial projects in this folder")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rows = []
    with tempfile.TemporaryDirectory(prefix="kill-trials-") as workdir:
        workdir = args.keep or Path(workdir)
        for number in range(1, args.trials + 1):
            mode = "sync" if number % 2 else "batch"
            rows.append(trial(number, mode, rng, workdir))
            print(" ".join(f"{k}={v}" for k, v in rows[-1].items()), file=sys.stderr, flush=True)
    columns = [
        "trial",
        "mode",
        "kill_s",
        "phase",
        "cached_at_kill",
        "in_flight",
        "paid",
        "keys",
        "repeats",
        "lost",
        "batches",
        "twice",
        "reruns",
        "status",
        "golden",
        "rejected",
    ]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in columns) + " |")
    bad = [
        r
        for r in rows
        if r["lost"]
        or r["twice"]
        or r["repeats"] > max(r["in_flight"], 0)
        or r["status"] != 0
        or r["golden"] != QUESTIONS
    ]
    print(
        f"\n{len(rows)} trials: {sum(r['lost'] for r in rows)} finished questions lost, "
        f"{sum(r['twice'] for r in rows)} requests in a batch created twice, "
        f"repeats <= in flight in {sum(r['repeats'] <= max(r['in_flight'], 0) for r in rows)} of {len(rows)}; "
        + ("all good" if not bad else f"PROBLEMS in trials {[r['trial'] for r in bad]}")
    )
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
