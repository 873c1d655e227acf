"""The agreement certificate on real retrieval: the bundled model, BM25 and hybrid search over a
slice of the sample. Paraphrases of the hand-written questions order the systems as the originals
do; template questions that copy their evidence's words (as a careless generator writes them)
reverse the order, and the certificate says so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.corpus.load import chunk_documents, read_documents_folder
from retrieval_bench.embedding.embed import encode, load_model
from retrieval_bench.evaluation.certificate.certify import panel_certificate
from retrieval_bench.evaluation.panel.leaderboard import scorable
from retrieval_bench.evaluation.score.scoring import score_run
from retrieval_bench.evaluation.score.settings import Scoring
from retrieval_bench.goldenset.build import handwritten_rows, read_handwritten
from retrieval_bench.retrieval.methods import retrieve
from retrieval_bench.retrieval.run import Corpus, Questions
from retrieval_bench.retrieval.settings import RetrievalSettings

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    "wal.md",
    "autoinc.md",
    "inmemorydb.md",
    "quirks.md",
    "limits.md",
    "backup.md",
    "whentouse.md",
]  # 27 hand-written questions
SYSTEMS = ("dense", "bm25", "hybrid")
KS = [1, 3, 5, 10, 20]


def paraphrase(question: str) -> str:
    return "Question: " + question[0].lower() + question[1:]


def template(evidence: str) -> str:
    return "What does the documentation say about " + " ".join(evidence.split()[:10]) + "?"


@pytest.fixture(scope="module")
def scored() -> dict[str, dict[str, pd.DataFrame]]:
    """Per-question tables by question set (hand-written, paraphrased, template) and system."""
    documents = read_documents_folder(ROOT / "data" / "sample" / "sqlite")
    documents = documents[documents["doc_id"].isin(DOCS)].reset_index(drop=True)
    chunks = chunk_documents(documents, 800, 100)
    rows, _ = handwritten_rows(read_handwritten(ROOT / "data" / "handwritten_questions.jsonl"), documents, chunks)
    rows = [row for row in rows if row["kind"] == "single"]  # one evidence span each: the template quotes it
    texts = dict(zip(documents["doc_id"], documents["text"]))
    model = load_model(DEFAULTS["embed"]["model"])
    corpus = Corpus(
        chunks["chunk_id"].tolist(), chunks["text"].tolist(), encode(model, chunks["text"].tolist(), 64, progress=False)
    )
    variants = {
        "hand-written": [row["question"] for row in rows],
        "paraphrased": [paraphrase(row["question"]) for row in rows],
        "template": [template(texts[row["doc_id"]][row["start"] : row["end"]]) for row in rows],
    }
    tables = {}
    for name, texts_ in variants.items():
        golden = [{**row, "question": text} for row, text in zip(rows, texts_)]
        questions = Questions([row["qid"] for row in rows], texts_, encode(model, texts_, 64, progress=False))
        tables[name] = {
            system: score_run(
                golden,
                chunks,
                retrieve(RetrievalSettings.from_params({**DEFAULTS["retrieval"], "method": system}), questions, corpus),
                Scoring(ks=tuple(KS)),
            )
            for system in SYSTEMS
        }
    return tables


def side_by_side(scored: dict, synthetic: str) -> dict[str, pd.DataFrame]:
    """Each system's table over the hand-written questions and those of `synthetic`, labelled as
    the score stage labels them (the synthetic ones as generated)."""
    return {
        system: pd.concat(
            [
                scored["hand-written"][system].assign(question_set="hand-written"),
                scored[synthetic][system].assign(question_set="generated", qid=lambda t: "syn-" + t["qid"]),
            ],
            ignore_index=True,
        )
        for system in SYSTEMS
    }


def test_the_certificate_separates_agreeing_from_disagreeing_question_sets(scored):
    agreeing = panel_certificate(scorable(side_by_side(scored, "paraphrased")), resamples=100)
    disagreeing = panel_certificate(scorable(side_by_side(scored, "template")), resamples=100)
    assert agreeing["reference"] == "hand-written" and agreeing["n_questions"] == {"hand-written": 27, "generated": 27}
    good_set, bad_set = agreeing["sets"]["generated"], disagreeing["sets"]["generated"]
    good, bad = good_set["metrics"]["mrr"], bad_set["metrics"]["mrr"]
    assert good["kendall_tau"]["value"] == 1.0 and good["tau_ap"]["value"] == 1.0
    assert bad["kendall_tau"]["value"] == -1.0 and bad["tau_ap"]["value"] == -1.0  # template questions favour BM25
    assert good["pair_agreement"]["value"] > bad["pair_agreement"]["value"]
    for estimate in (good["kendall_tau"], bad["kendall_tau"], good["tau_ap"], bad["tau_ap"]):
        assert estimate["ci_low"] <= estimate["value"] <= estimate["ci_high"]  # 27 questions: wide intervals
    # the decision: the template set ships bm25, which the hand-written questions put behind dense;
    # the paraphrases never disagree (27 questions decide no more than that)
    assert bad_set["verdict"] == "disagrees" and bad["winner"]["synthetic_best"] == "bm25"
    assert good_set["verdict"] != "disagrees" and not any(
        h["beyond"] for m in good_set["metrics"].values() for h in m["hypotheses"]
    )
    assert bad_set["line"].startswith("generated (27) disagrees with hand-written (27) on the decision (mrr): ")
    assert "\n" not in bad_set["line"]
    # the tau reported is scipy's over the systems' mean scores
    means = {name: [scored[name][s]["reciprocal_rank"].mean() for s in SYSTEMS] for name in scored}
    assert bad["kendall_tau"]["value"] == pytest.approx(kendalltau(means["hand-written"], means["template"]).statistic)
    assert np.argmax(means["template"]) == SYSTEMS.index("bm25") and np.argmax(means["hand-written"]) == SYSTEMS.index(
        "dense"
    )


def test_without_real_or_hand_written_questions_the_reviewed_ones_are_the_reference_and_the_line_says_so(scored):
    tables = side_by_side(scored, "template")
    reviewed = {
        system: table.assign(
            review=np.where(table["question_set"] == "hand-written", "fine", "unreviewed"), question_set="generated"
        )
        for system, table in tables.items()
    }
    against_people = panel_certificate(scorable(tables), resamples=100)
    against_reviews = panel_certificate(scorable(reviewed), resamples=100)
    assert against_reviews["reference"] == "reviewed"
    assert against_reviews["n_questions"] == {"reviewed": 27, "generated": 27}  # the reviewed leave the generated
    ours, theirs = against_reviews["sets"]["generated"], against_people["sets"]["generated"]
    assert ours["verdict"] == theirs["verdict"] == "disagrees"
    assert ours["line"].startswith("generated (27) disagrees with reviewed (27) on the decision (mrr): ")
    assert ours["line"].endswith(
        "(reference: the questions people reviewed and kept, no real queries; generated without them)"
    )
    no_reviews = {system: table.assign(question_set="generated") for system, table in tables.items()}
    assert not panel_certificate(scorable(no_reviews), resamples=100)["available"]


def test_a_metric_on_which_the_reference_ties_every_system_is_valid_json_and_says_undefined(scored):
    """Every system at recall@10 1.000 on the hand-written questions: certificate.json held bare NaN
    (not JSON: JavaScript's JSON.parse refused it) and leaderboard.md read "nan [nan, nan]"."""
    import json

    from retrieval_bench.core.files import without_nan
    from retrieval_bench.evaluation.certificate.certify import certificate_lines

    tables = side_by_side(scored, "paraphrased")
    for table in tables.values():  # the reference (hand-written) ties every system on mrr
        table.loc[table["question_set"] == "hand-written", "reciprocal_rank"] = 1.0
    cert = panel_certificate(scorable(tables), resamples=100)
    tau = cert["sets"]["generated"]["metrics"]["mrr"]["kendall_tau"]
    assert np.isnan(tau["value"])
    json.loads(json.dumps(without_nan(cert)), parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
    row = next(line for line in certificate_lines(cert) if line.startswith("| mrr |"))
    assert "undefined (the systems tie)" in row and "nan" not in row
