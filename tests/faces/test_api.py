"""The Python API (retrieval_bench.api): the examples of docs/reference/python-api.md run after a
real `dvc repro` and give the pipeline's metrics; scores equal trec_eval's on chunk-id qrels;
every input form of a run reads the same; bad input is one-line InputError."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import pytrec_eval
from conftest import ROOT

import retrieval_bench as rb
from retrieval_bench.evaluation.score.scoring import score_run
from retrieval_bench.evaluation.score.settings import Scoring

DOCS_PAGE = ROOT / "docs" / "reference" / "python-api.md"
TREC_MEASURES = {"recall.1,3,5,10,20": "recall@{}", "success.1,3,5,10,20": "hit@{}"}


def doc_examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOCS_PAGE.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.pipeline
def test_the_docs_examples_give_the_pipelines_metrics(reproduced, monkeypatch):
    monkeypatch.chdir(reproduced)
    namespace: dict = {}
    for example in doc_examples():
        exec(compile(example, str(DOCS_PAGE), "exec"), namespace)  # noqa: S102 - the page's own examples
    scores = namespace["scores"]
    assert scores.metrics == json.loads((reproduced / "metrics" / "panel" / "default" / "metrics.json").read_text())
    written = pd.read_csv(reproduced / "metrics" / "panel" / "default" / "per_question.csv", dtype={"qid": str})
    pd.testing.assert_frame_equal(scores.per_question, written, check_dtype=False)
    recall = namespace["comparison"].metrics["recall@10"]
    assert recall["delta"] < 0 and recall["losses"] > 0 and recall["wins"] == 0  # cut to depth 5: recall@10 only drops


def random_qrels_and_run(seed: int) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    chunks = [f"c{i}" for i in range(60)]
    qrels, run = {}, {}
    for q in range(25):
        judged = rng.choice(chunks, size=rng.integers(1, 6), replace=False)
        grades = rng.integers(0, 4, size=len(judged))
        grades[0] = max(grades[0], 1)  # at least one relevant chunk (trec_eval skips none)
        qrels[f"q{q}"] = {str(c): int(g) for c, g in zip(judged, grades)}
        retrieved = rng.choice(chunks, size=rng.integers(1, 40), replace=False)
        run[f"q{q}"] = {str(c): float(s) for c, s in zip(retrieved, rng.permutation(len(retrieved)) + rng.random())}
    return qrels, run


@pytest.mark.parametrize("seed", range(5))
def test_scores_on_chunk_id_qrels_equal_trec_eval(seed):
    qrels, run = random_qrels_and_run(seed)
    scores = rb.score(qrels, run)
    measures = {*TREC_MEASURES, "ndcg_cut.10", "map_cut.10", "recip_rank"}
    trec = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    mean = {
        name: float(np.mean([per_query[name] for per_query in trec.values()])) for name in next(iter(trec.values()))
    }
    for k in (1, 3, 5, 10, 20):
        assert scores.metrics[f"recall@{k}"] == pytest.approx(mean[f"recall_{k}"], abs=1e-9)
        assert scores.metrics[f"hit@{k}"] == pytest.approx(mean[f"success_{k}"], abs=1e-9)
    assert scores.metrics["ndcg@10"] == pytest.approx(mean["ndcg_cut_10"], abs=1e-9)
    assert scores.metrics["map@10"] == pytest.approx(mean["map_cut_10"], abs=1e-9)
    assert scores.metrics["mrr"] == pytest.approx(mean["recip_rank"], abs=1e-9)
    assert scores.metrics["n_questions"] == len(qrels)


def test_chunk_labels_need_no_span_columns():
    """Chunk-id labels scored with a chunk table of ids only (it raised KeyError: 'doc_id')."""
    golden = [{"qid": "q1", "relevant": {"b": 1}}]
    run = pd.DataFrame({"qid": ["q1", "q1"], "chunk_id": ["a", "b"], "rank": [1, 2], "score": [0.9, 0.5]})
    table = score_run(golden, pd.DataFrame({"chunk_id": ["a", "b", "c"]}), run, Scoring(ks=(1, 2)))
    assert table.loc[0, "reciprocal_rank"] == 0.5
    assert rb.score(golden, run, chunks=pd.DataFrame({"chunk_id": ["a", "b", "c"]}), k=[1, 2]).metrics["n_chunks"] == 3


def test_abstention_is_scored_without_the_judged_view():
    """rb.score without duplicates= dropped every abstention figure (top_score came with the judged
    view alone), and compare of one run scored each way reported NaN for it without a word."""
    golden = [
        {"qid": "q1", "question": "where is b?", "relevant": {"b": 1}},
        {"qid": "q2", "question": "where is a?", "relevant": {"a": 1}},
        {"qid": "q3", "question": "what is not here?", "kind": "unanswerable", "relevant": {}},
    ]
    run = pd.DataFrame(
        {
            "qid": ["q1", "q1", "q2", "q2", "q3", "q3"],
            "chunk_id": ["b", "a", "a", "b", "a", "b"],
            "rank": [1, 2, 1, 2, 1, 2],
            "score": [0.9, 0.5, 0.8, 0.4, 0.3, 0.2],
        }
    )
    strict = rb.score(golden, run, chunks=pd.DataFrame({"chunk_id": ["a", "b"]}), k=[1, 2])
    assert strict.metrics["abstention_auc"] == 1.0  # both answerable top-1 scores above the unanswerable one
    assert "top_score" in strict.per_question


def test_every_input_form_of_a_run_reads_the_same(tmp_path):
    as_dict = {"q1": {"a": 0.5, "b": 2.0, "c": 0.5}, "q2": {"d": -1.0}}
    frame = pd.DataFrame(
        [(q, c, s) for q, scored in as_dict.items() for c, s in scored.items()], columns=["qid", "chunk_id", "score"]
    )
    trec = tmp_path / "run.trec"
    trec.write_text("".join(f"{row.qid} Q0 {row.chunk_id} 0 {row.score} sys\n" for row in frame.itertuples()))
    jsonl = tmp_path / "run.jsonl"
    jsonl.write_text(
        "".join(
            json.dumps({"qid": row.qid, "chunk_id": row.chunk_id, "score": row.score}) + "\n"
            for row in frame.itertuples()
        )
    )
    parquet = tmp_path / "run.parquet"
    frame.sample(frac=1.0, random_state=0).to_parquet(parquet)
    expected = rb.read_run(as_dict)
    assert expected.to_dict("list") == {
        "qid": ["q1", "q1", "q1", "q2"],
        "chunk_id": ["b", "a", "c", "d"],
        "rank": [1, 2, 3, 1],
        "score": [2.0, 0.5, 0.5, -1.0],
    }
    for source in (frame, str(trec), trec, jsonl, parquet):
        pd.testing.assert_frame_equal(rb.read_run(source), expected)
    assert rb.read_run(as_dict, depth=1)["chunk_id"].tolist() == ["b", "d"]
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\ta\t1\nq2\td\t2\n")
    assert (
        rb.read_golden(qrels)
        == rb.read_golden({"q1": {"a": 1}, "q2": {"d": 2}})
        == [
            {"qid": "q1", "relevant": {"a": 1}},
            {"qid": "q2", "relevant": {"d": 2}},
        ]
    )


def test_compare_reads_scores_frames_and_csv_files(tmp_path):
    qrels, run = random_qrels_and_run(0)
    a = rb.score(qrels, run)
    worse = {qid: {chunk: -score for chunk, score in scored.items()} for qid, scored in run.items()}
    b = rb.score(qrels, worse)
    b.per_question.to_csv(tmp_path / "b.csv", index=False)
    comparison = rb.compare(a, tmp_path / "b.csv", resamples=200)
    assert isinstance(comparison, rb.Comparison) and comparison.n_questions == len(qrels)
    assert comparison.metrics["mrr"]["delta"] == pytest.approx(b.metrics["mrr"] - a.metrics["mrr"])
    assert rb.compare(a.per_question, b, resamples=200).to_dict()["metrics"] == comparison.to_dict()["metrics"]


def test_the_package_exports_a_typed_surface_and_its_version():
    from importlib.metadata import version

    assert rb.__version__ == version("retrieval-bench")
    assert set(rb.__all__) <= set(dir(rb)) and all(getattr(rb, name) is not None for name in rb.__all__)
    assert (ROOT / "src" / "retrieval_bench" / "py.typed").is_file()
    assert "py.typed" in (ROOT / "pyproject.toml").read_text()  # shipped as package data


def test_load_params_fills_defaults_and_names_bad_keys(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("score: {k: [1, 2]}\n")
    assert rb.load_params(path)["score"] == {
        "k": [1, 2],
        "min_coverage": 0.5,
        "ties": "expected",
        "budgets": [2000, 4000],
        "budget_unit": "chars",
        "weights": "none",
    }
    path.write_text("score: {kk: [1]}\n")
    with pytest.raises(rb.InputError, match="unknown key params.score.kk; did you mean params.score.k"):
        rb.load_params(path)


@pytest.mark.parametrize(
    ("labels", "run", "options", "message"),
    [
        (
            {"q1": {"a": 1}},
            {"q1": {"a": "high"}},
            {},
            "run: row 1 (question 'q1', chunk 'a') has score 'high'; every score must be a finite number",
        ),
        (
            {"q1": {"a": 1}},
            pd.DataFrame({"qid": ["q1"], "doc": ["a"], "score": [1.0]}),
            {},
            "run DataFrame: expected columns qid, chunk_id and score; missing chunk_id",
        ),
        ({"q1": {"a": 1}}, {"q1": {"a": float("nan")}}, {}, "has score nan; every score must be a finite number"),
        ({"q1": {"a": 1}}, {"q2": {"a": 1.0}}, {}, "no question of the labels is in the run (qids such as q1)"),
        (
            {"q1": {"a": "yes"}},
            {"q1": {"a": 1.0}},
            {},
            "qrels['q1']: the grade of chunk 'a' must be an integer, got 'yes'",
        ),
        ({"q1": ["a"]}, {"q1": {"a": 1.0}}, {}, "qrels['q1']: expected a dict {chunk_id: grade}, got list"),
        (
            [{"qid": "q1", "doc_id": "d", "start": 0, "end": 5}],
            {"q1": {"a": 1.0}},
            {},
            "questions with an evidence span (doc_id, start, end) need chunks=",
        ),
        (
            [{"qid": None, "relevant": {"a": 1}}],
            {"q1": {"a": 1.0}},
            {},
            "golden row 1: 'qid' must be a non-empty string (or an integer), got null",
        ),
        (
            {"q1": {"a": 1}},
            {"q1": {"a": 1.0}},
            {"k": [0]},
            "k must be a non-empty list of distinct positive integers, got [0]",
        ),
        (
            {"q1": {"a": 1}},
            {"q1": {"a": 1.0}},
            {"ties": "random"},
            "ties must be one of expected, pessimistic, optimistic, got 'random'",
        ),
        (
            {"q1": {"a": 1}},
            {"q1": {"a": 1.0}},
            {"chunks": pd.DataFrame({"id": ["a"]})},
            "chunks DataFrame: expected columns chunk_id; missing chunk_id",
        ),
        (
            {"q1": {"a": 1}},
            "no/such/run.trec",
            {},
            "no/such/run.trec: not found (expected a run: .parquet, a TREC run or .jsonl)",
        ),
        (
            "no/such/goldenset.jsonl",
            {"q1": {"a": 1.0}},
            {},
            "no/such/goldenset.jsonl: not found (expected a golden set .jsonl or a qrels file)",
        ),
    ],
)
def test_bad_input_is_one_line(labels, run, options, message):
    with pytest.raises(rb.InputError) as error:
        rb.score(labels, run, **options)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_bad_files_are_one_line(tmp_path):
    """A corrupt Parquet table, a missing judged pool, a non-UTF-8 per_question.csv: one line each."""
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1 not parquet at all")
    labels, run = {"q1": {"a": 1}}, {"q1": {"a": 1.0}}
    pool = tmp_path / "no_pool.jsonl"
    duplicates = tmp_path / "duplicates.parquet"
    pd.DataFrame({"group": ["g"], "chunk_id": ["a"]}).to_parquet(duplicates)
    non_utf8 = tmp_path / "per_question.csv"
    non_utf8.write_bytes(b"qid,reciprocal_rank\n\xff,1.0\n")
    for call, message in (
        (lambda: rb.read_run(corrupt), f"{corrupt}: not a readable Parquet table"),
        (lambda: rb.score(labels, run, chunks=corrupt), f"chunks {corrupt}: not a readable Parquet table"),
        (lambda: rb.score(labels, run, duplicates=corrupt), f"duplicates {corrupt}: not a readable Parquet table"),
        (
            lambda: rb.score(labels, run, duplicates=duplicates, judged_pool=pool),
            f"judged_pool {pool}: not found (expected data/judged_pool.jsonl rows)",
        ),
        (lambda: rb.compare(non_utf8, non_utf8), f"A {non_utf8}: not UTF-8 text (byte 20)"),
    ):
        with pytest.raises(rb.InputError) as error:
            call()
        assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_a_bad_run_file_line_is_named(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 a 1 0.5 sys\nq1 Q0 b 2\n")
    with pytest.raises(rb.InputError, match=r"run.trec:2: expected a TREC run line"):
        rb.read_run(path)
    path.write_text("q1 Q0 a 1 0.5 sys\nq1 Q0 a 2 0.4 sys\n")
    with pytest.raises(rb.InputError, match="question 'q1' lists chunk 'a' twice"):
        rb.read_run(path)
