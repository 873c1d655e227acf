"""How far to trust the LLM judge: its grades on pooled SciFact candidates against the human labels.

    python bench/judge_agreement.py [PATH/TO/scifact] [--queries 50] [--depth 10] [--provider anthropic]

For the first --queries test queries of BEIR SciFact (default ../shared/data/scifact), the top
--depth abstracts of three systems (dense all-MiniLM-L6-v2, bm25, hybrid: the pipeline's own
retrieval methods) are pooled and every pooled (query, abstract) pair, human-relevant or not, is
graded 0-3 by the judge (data/judge_prompt.txt, the judge section of params.yaml; --provider,
--model and --max-cost-usd override it) through the same code as the judge stage: the same
providers, cost estimate and guard, cache (--cache, default
bench/judge_agreement.judgements.jsonl: a rerun pays nothing) and reply hygiene.

It reports:
- agreement of the judge (grade >= judge.min_grade) with the human labels (qrels grade > 0; an
  abstract the qrels do not list counts as not relevant, as BEIR scores it): Cohen's kappa, the
  confusion matrix and the grade distribution of human-relevant and other pairs;
- whether the judge ranks the systems as the human labels do: nDCG@10 of dense, bm25 and hybrid
  under the human qrels and under the judge's grades, and Kendall's tau between the two rankings.

Skips (exit 0, one line) when the SciFact folder is absent. Needs an API key for a real provider;
tests/goldenset/test_judge_agreement.py runs it against the stub server on a small slice.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path

from common import ROOT, SCIFACT, run_main, scifact_folder

SYSTEMS = ("dense", "bm25", "hybrid")


def cohen_kappa(a: list[int], b: list[int]) -> float:
    """Cohen's kappa of two binary labelings of the same items (1.0 = perfect agreement, 0 = chance)."""
    n = len(a)
    if n == 0:
        return float("nan")
    observed = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    return 1.0 if expected == 1 else (observed - expected) / (1 - expected)


def _finite(value):
    """NaN (no system pair, no relevant abstract) as null in the JSON report."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def kendall_tau(x: list[float], y: list[float]) -> float:
    """Kendall's tau-a of two scorings of the same systems (ties count as neither agreeing nor not)."""
    pairs = list(combinations(range(len(x)), 2))
    if not pairs:
        return float("nan")
    sign = lambda v: (v > 0) - (v < 0)  # noqa: E731
    return sum(sign(x[i] - x[j]) * sign(y[i] - y[j]) for i, j in pairs) / len(pairs)


def runs_for(chunks, labels, systems: tuple[str, ...], depth: int, max_seq_length: int = 256) -> dict:
    """The pipeline's retrieval methods on the sliced corpus: {system: run}."""
    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.embedding.embed import encode, load_model
    from retrieval_bench.retrieval.methods import needs_vectors, retrieve
    from retrieval_bench.retrieval.run import Corpus, Questions
    from retrieval_bench.retrieval.settings import RetrievalSettings

    questions = Questions([label["qid"] for label in labels], [label["question"] for label in labels])
    corpus = Corpus(chunks["chunk_id"].tolist(), chunks["text"].tolist())
    settings = {
        system: RetrievalSettings.from_params({**DEFAULTS["retrieval"], "method": system, "depth": depth})
        for system in systems
    }
    if any(needs_vectors(s) for s in settings.values()):
        model = load_model(DEFAULTS["embed"]["model"], max_seq_length)
        questions = Questions(questions.qids, questions.texts, encode(model, questions.texts, 32, progress=False))
        corpus = Corpus(corpus.chunk_ids, corpus.texts, encode(model, corpus.texts, 32, progress=False))
    return {system: retrieve(settings[system], questions, corpus) for system in systems}


def ndcg10(labels: list[dict], relevant: dict[str, dict[str, int]], chunks, run) -> float:
    """Mean nDCG@10 of `run` over the queries with a relevant abstract under `relevant`."""
    from retrieval_bench.evaluation.score.scoring import score_run
    from retrieval_bench.evaluation.score.settings import Scoring

    golden = [
        {"qid": label["qid"], "question": label["question"], "relevant": relevant[label["qid"]]}
        for label in labels
        if any(g > 0 for g in relevant.get(label["qid"], {}).values())
    ]
    if not golden:
        return float("nan")
    return float(
        score_run(golden, chunks[["chunk_id", "doc_id", "start", "end"]], run, Scoring(ks=(10,)))["ndcg@10"].mean()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scifact", nargs="?", default=str(SCIFACT))
    parser.add_argument("--queries", type=int, default=50, help="test queries judged (default 50)")
    parser.add_argument("--depth", type=int, default=10, help="top abstracts of each system pooled (default 10)")
    parser.add_argument(
        "--corpus-limit", type=int, default=0, help="keep only the judged abstracts and this many others (0: all)"
    )
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument(
        "--max-seq-length", type=int, default=256, help="dense: tokens embedded per abstract (MTEB's 256)"
    )
    parser.add_argument("--provider", help="judge provider (default: judge.provider of params.yaml)")
    parser.add_argument("--model", help="judge model (default: judge.model)")
    parser.add_argument(
        "--max-cost-usd", type=float, help="refuse to start above this estimate (default: judge.max_cost_usd)"
    )
    parser.add_argument("--cache", default=str(ROOT / "bench" / "judge_agreement.judgements.jsonl"))
    parser.add_argument("--json", action="store_true", help="print the report as JSON only")
    args = parser.parse_args(argv)
    scifact = scifact_folder(args.scifact, "judge_agreement")
    if scifact is None:
        return 0

    from retrieval_bench.core.errors import InputError
    from retrieval_bench.core.params import load_all_params
    from retrieval_bench.corpus.load import LoadSettings, load_corpus
    from retrieval_bench.goldenset.judge import JudgeSettings, Pair, judge_pool, read_prompt
    from retrieval_bench.llm.providers.registry import named
    from retrieval_bench.llm.transport.credentials import endpoint_for

    all_params = load_all_params(ROOT / "params.yaml")
    params = all_params["judge"]
    params.update(
        {
            k: v
            for k, v in (("provider", args.provider), ("model", args.model), ("max_cost_usd", args.max_cost_usd))
            if v is not None
        }
    )
    settings = JudgeSettings.from_params(all_params)
    if settings.provider == "none":
        print(
            "error: judge.provider is none: set --provider (anthropic, anthropic-batch, openai-compatible)",
            file=sys.stderr,
        )
        return 1
    # the key (or a base_url) the provider needs, checked before minutes of embedding and search
    endpoint_for(named(settings.provider, "judge"), settings.section.get("base_url"), section="judge")
    corpus = load_corpus(scifact, LoadSettings(split="test"))
    labels = corpus.labels[: args.queries]
    chunks = corpus.chunks
    if args.corpus_limit:
        judged = {c for label in labels for c in label["relevant"]}
        others = [c for c in chunks["chunk_id"] if c not in judged][: args.corpus_limit]
        chunks = chunks[chunks["chunk_id"].isin(judged | set(others))].reset_index(drop=True)
    runs = runs_for(chunks, labels, tuple(args.systems), args.depth, args.max_seq_length)
    text_of, sha_of = (
        dict(zip(chunks["chunk_id"], chunks["text"])),
        dict(zip(chunks["chunk_id"], chunks["text_sha256"])),
    )
    pairs: dict[tuple[str, str], Pair] = {}
    for system, run in runs.items():
        for row in run[run["rank"] <= args.depth].itertuples():
            label = next(label for label in labels if label["qid"] == row.qid)
            pair = pairs.setdefault(
                (row.qid, row.chunk_id),
                Pair(row.qid, row.chunk_id, [], label["question"], text_of[row.chunk_id], sha_of[row.chunk_id]),
            )
            pair.runs.append(system)
    prompt = read_prompt((ROOT / "data" / "judge_prompt.txt").read_bytes(), "data/judge_prompt.txt")
    Path(args.cache).parent.mkdir(parents=True, exist_ok=True)
    try:
        judged = judge_pool(
            settings,
            list(pairs.values()),
            prompt,
            args.cache,
            False,
            log=lambda message: print(f"judge_agreement: {message}", file=sys.stderr),
        )
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1

    human = {label["qid"]: label["relevant"] for label in labels}
    graded = [row for row in judged.rows if row["grade"] is not None]
    human_bits = [int(human[row["qid"]].get(row["chunk_id"], 0) > 0) for row in graded]
    judge_bits = [int(row["grade"] >= settings.min_grade) for row in graded]
    llm_qrels: dict[str, dict[str, int]] = {}
    for row in graded:
        if row["grade"] >= settings.min_grade:
            llm_qrels.setdefault(row["qid"], {})[row["chunk_id"]] = row["grade"]
    human_ndcg = {system: ndcg10(labels, human, chunks, run) for system, run in runs.items()}
    judge_ndcg = {system: ndcg10(labels, llm_qrels, chunks, run) for system, run in runs.items()}
    systems = list(runs)
    report = {
        "queries": len(labels),
        "abstracts": len(chunks),
        "depth": args.depth,
        "systems": systems,
        "judge": {"provider": params["provider"], "model": params["model"], "min_grade": settings.min_grade},
        "pooled_pairs": len(pairs),
        "graded_pairs": len(graded),
        "requests": judged.report["requests"],
        "cost_usd": judged.report["cost_usd"],
        "cohen_kappa": round(cohen_kappa(human_bits, judge_bits), 4),
        "confusion": {
            "human_relevant_judge_relevant": sum(h and j for h, j in zip(human_bits, judge_bits)),
            "human_relevant_judge_not": sum(h and not j for h, j in zip(human_bits, judge_bits)),
            "human_not_judge_relevant": sum(j and not h for h, j in zip(human_bits, judge_bits)),
            "human_not_judge_not": sum(not h and not j for h, j in zip(human_bits, judge_bits)),
        },
        "grades_of_human_relevant": dict(sorted(Counter(r["grade"] for r, h in zip(graded, human_bits) if h).items())),
        "grades_of_others": dict(sorted(Counter(r["grade"] for r, h in zip(graded, human_bits) if not h).items())),
        "ndcg@10_human": {s: round(v, 4) for s, v in human_ndcg.items()},
        "ndcg@10_judge": {s: round(v, 4) for s, v in judge_ndcg.items()},
        "ranking_human": sorted(systems, key=lambda s: -human_ndcg[s]),
        "ranking_judge": sorted(systems, key=lambda s: -judge_ndcg[s]),
        "kendall_tau": kendall_tau([human_ndcg[s] for s in systems], [judge_ndcg[s] for s in systems]),
    }
    report["ranking_preserved"] = report["ranking_human"] == report["ranking_judge"]
    report = _finite(report)
    if args.json:
        print(json.dumps(report))
        return 0
    print(
        f"{report['queries']} SciFact queries, top {args.depth} of {', '.join(systems)} pooled: {len(pairs)} pairs, "
        f"{len(graded)} graded by {params['provider']} {params['model']} ({report['requests']} requests, ${report['cost_usd']:.4f})"
    )
    print(
        f"agreement with the human labels (grade >= {settings.min_grade} vs qrels > 0): Cohen's kappa {report['cohen_kappa']}; "
        f"confusion {report['confusion']}"
    )
    for system in systems:
        print(f"  {system:<7} nDCG@10 human {human_ndcg[system]:.4f}  judge {judge_ndcg[system]:.4f}")
    print(
        f"system ranking human {' > '.join(report['ranking_human'])}, judge {' > '.join(report['ranking_judge'])}: "
        f"Kendall's tau {'n/a' if report['kendall_tau'] is None else format(report['kendall_tau'], '.2f')} "
        f"({'preserved' if report['ranking_preserved'] else 'NOT preserved'})"
    )
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    run_main(main)
