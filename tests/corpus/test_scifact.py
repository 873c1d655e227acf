"""BEIR import end to end on a slice of SciFact, checked per question against trec_eval.

The full reproduction (nDCG@10 = 0.6451 as published by MTEB) is `make reproduce-scifact`;
this runs the same path on 150 abstracts. Skipped where ../shared is absent (a user's clone).
"""

import json

import numpy as np
import pandas as pd
import pytest
import pytrec_eval
from conftest import SHARED_SCIFACT, copy_project, dvc, read_metrics, set_params

from retrieval_bench.core import paths

pytestmark = [
    pytest.mark.pipeline,
    pytest.mark.skipif(not (SHARED_SCIFACT / "corpus.jsonl").is_file(), reason="../shared/data/scifact is absent"),
]
N_DOCS = 150


def make_slice(folder):
    """N_DOCS abstracts, half of them judged by some test query, and the queries that judge them."""
    (folder / "qrels").mkdir(parents=True)
    qrels = (SHARED_SCIFACT / "qrels" / "test.tsv").read_text().splitlines()
    judged = {line.split("\t")[1] for line in qrels[1:]}
    corpus = (SHARED_SCIFACT / "corpus.jsonl").read_text().splitlines()
    ids = [json.loads(line)["_id"] for line in corpus]
    picked = [line for line, i in zip(corpus, ids) if i in judged][: N_DOCS // 2]
    picked += [line for line, i in zip(corpus, ids) if i not in judged][: N_DOCS - len(picked)]
    (folder / "corpus.jsonl").write_text("\n".join(picked) + "\n")
    kept_docs = {json.loads(line)["_id"] for line in picked}
    kept = [qrels[0]] + [line for line in qrels[1:] if line.split("\t")[1] in kept_docs]
    (folder / "qrels" / "test.tsv").write_text("\n".join(kept) + "\n")
    (folder / "queries.jsonl").write_text((SHARED_SCIFACT / "queries.jsonl").read_text())
    return folder


def test_scifact_slice_matches_trec_eval(tmp_path):
    beir = make_slice(tmp_path / "scifact-slice")
    project = copy_project(tmp_path / "project", docs=[])
    set_params(project, **{"load.source": str(beir), "generate.max_questions": 0, "embed.max_seq_length": 256})
    dvc("repro", cwd=project)

    metrics = read_metrics(project)
    golden = [json.loads(line) for line in (project / paths.GOLDENSET).read_text().splitlines()]
    assert metrics["n_chunks"] == N_DOCS and metrics["n_questions"] == len(golden) > 10
    assert all(row["source"] == "qrels" for row in golden)

    scores = np.load(project / paths.QUESTION_VECTORS) @ np.load(project / paths.CORPUS_VECTORS).T
    doc_ids = json.loads((project / paths.CORPUS_IDS).read_text())
    run = {row["qid"]: {d: float(s) for d, s in zip(doc_ids, scores[i])} for i, row in enumerate(golden)}
    qrels = {row["qid"]: row["relevant"] for row in golden}
    written: dict[str, dict[str, int]] = {}  # the slice's qrels read here, not through the project's reader
    for line in (beir / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, doc_id, grade = line.split("\t")
        written.setdefault(qid, {})[doc_id] = int(grade)
    assert qrels == written
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.1,5,10", "recip_rank", "map_cut.10"}).evaluate(
        run
    )

    per_question = pd.read_csv(
        project / "metrics" / "panel" / "default" / "per_question.csv", dtype={"qid": str}
    ).set_index("qid")
    for qid, expected in trec.items():
        ours = per_question.loc[qid]
        assert ours["ndcg@10"] == pytest.approx(expected["ndcg_cut_10"], abs=1e-9)
        assert ours["reciprocal_rank"] == pytest.approx(expected["recip_rank"], abs=1e-9)
        assert ours["map@10"] == pytest.approx(expected["map_cut_10"], abs=1e-9)
        for k in (1, 5, 10):
            assert ours[f"recall@{k}"] == pytest.approx(expected[f"recall_{k}"], abs=1e-9)
    assert metrics["ndcg@10"] == pytest.approx(np.mean([t["ndcg_cut_10"] for t in trec.values()]), abs=1e-9)
