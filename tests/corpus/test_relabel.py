"""Real labels that survive re-chunking: labels carry where their chunks lie (relevant_spans), and
under another chunking a labelled question is judged by those spans (spans.judge)."""

import json

import pandas as pd
import pytest

from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.core.relevance import judge, labels_without_spans
from retrieval_bench.core.run_table import from_records
from retrieval_bench.corpus.load import chunk_documents, load_corpus
from retrieval_bench.evaluation.score.scoring import score_run, unscorable_warning, unspanned_warning
from retrieval_bench.evaluation.score.settings import Scoring
from retrieval_bench.goldenset.assemble import assemble
from retrieval_bench.goldenset.build import evidence_texts, label_rows
from retrieval_bench.goldenset.generate_settings import GenerateSettings, GenerationRun

SENTENCE = "Aspirin thins the blood and lowers the risk of a second heart attack in adults. "
DOCS = {
    "d1": SENTENCE * 4,
    "d2": "Coffee keeps you awake because caffeine blocks adenosine in the brain for hours. " * 4,
    "d3": "Sleep lets the brain clear waste and store the memories of the day that passed. " * 4,
}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def beir_folder(folder):
    folder.mkdir()
    write_jsonl(folder / "corpus.jsonl", [{"_id": d, "text": text} for d, text in DOCS.items()])
    write_jsonl(folder / "queries.jsonl", [{"_id": "q1", "text": "aspirin and sleep"}, {"_id": "q2", "text": "coffee"}])
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t1\nq1\td2\t0\nq2\td2\t1\n"
    )
    return folder


def judged(judgement, chunks):
    """{chunk id: gain} of a Judgement's relevant chunks."""
    ids = chunks["chunk_id"].to_numpy()
    return {ids[i]: float(g) for i, g in zip(judgement.indices, judgement.gains) if g > 0}


def test_beir_labels_rejudged_on_a_finer_chunking(tmp_path):
    corpus = load_corpus(beir_folder(tmp_path / "beir"))
    golden = label_rows(corpus.labels)
    recut = chunk_documents(corpus.documents, chars=100, overlap=0)
    of = {doc: recut.loc[recut["doc_id"] == doc, "chunk_id"].tolist() for doc in DOCS}
    assert all(len(ids) > 1 for ids in of.values()) and not set(recut["chunk_id"]) & set(DOCS)
    q1, q2 = judge(golden, recut, min_coverage=0.5)
    # Each labelled chunk was a whole document: every piece of it lies inside its span, with its grade;
    # d2 was judged 0 for q1, so none of its pieces is relevant to q1.
    assert judged(q1, recut) == {c: 2.0 for c in of["d1"]} | {c: 1.0 for c in of["d3"]}
    assert judged(q2, recut) == {c: 1.0 for c in of["d2"]}
    assert q1.span is None  # scored as chunk labels: recall is the share of relevant chunks
    # The source's own chunking still gives exactly the chunk labels.
    q1, q2 = judge(golden, corpus.chunks, min_coverage=0.5)
    assert judged(q1, corpus.chunks) == {"d1": 2.0, "d3": 1.0} and judged(q2, corpus.chunks) == {"d2": 1.0}


def test_rejudged_labels_score_as_chunk_labels(tmp_path):
    corpus = load_corpus(beir_folder(tmp_path / "beir"))
    golden = label_rows(corpus.labels)[1:]  # q2: coffee, every piece of d2 relevant with grade 1
    recut = chunk_documents(corpus.documents, chars=100, overlap=0)
    pieces = recut.loc[recut["doc_id"] == "d2", "chunk_id"].tolist()
    run = from_records([("q2", recut["chunk_id"].iloc[0], 2.0), ("q2", pieces[0], 1.0)], 10)
    row = score_run(golden, recut, run, Scoring(ks=(1, 2))).iloc[0]
    assert row["n_relevant"] == len(pieces)
    assert row["recall@2"] == pytest.approx(1 / len(pieces)) and row["reciprocal_rank"] == 0.5


CHUNKS = pd.DataFrame({"chunk_id": ["D#a", "D#b", "D#c"], "doc_id": "D", "start": [0, 40, 70], "end": [40, 70, 100]})
LABEL = {
    "qid": "q",
    "relevant": {"D#b": 2, "D#c": 1, "D#a": 0},
    "relevant_spans": [["D", 40, 70, 2], ["D", 70, 100, 1], ["D", 0, 40, 0]],
}


def table(spans, ids=None):
    starts, ends = zip(*spans)
    ids = ids or [f"n{start}-{end}" for start, end in spans]
    return pd.DataFrame({"chunk_id": ids, "doc_id": "D", "start": starts, "end": ends})


def test_hand_checked_spans_of_a_new_chunking():
    new = table([(0, 25), (25, 45), (45, 65), (60, 80), (80, 100)])
    # (0, 25): only the grade-0 span. (25, 45): 5 of the 30 labelled characters, 5 of its 20 inside.
    # (45, 65): inside the grade-2 span. (60, 80): half of it in the grade-2 span, half in the
    # grade-1 span: the higher grade. (80, 100): inside the grade-1 span.
    assert judged(judge([LABEL], new, 0.5)[0], new) == {"n45-65": 2.0, "n60-80": 2.0, "n80-100": 1.0}
    assert judged(judge([LABEL], new, 0.6)[0], new) == {"n45-65": 2.0, "n80-100": 1.0}  # half is not 0.6


def test_the_labelled_chunking_keeps_the_chunk_label_judgement():
    with_spans, without = judge([LABEL], CHUNKS, 0.5)[0], judge([{**LABEL, "relevant_spans": None}], CHUNKS, 0.5)[0]
    assert judged(with_spans, CHUNKS) == {"D#b": 2.0, "D#c": 1.0}
    assert with_spans.indices.tolist() == without.indices.tolist() and with_spans.gains.tolist() == [2.0, 1.0]


def test_some_labelled_ids_present_is_another_chunking_judged_by_spans():
    new = table([(0, 40), (40, 70), (70, 85), (85, 100)], ["x1", "D#b", "x2", "x3"])  # D#b kept its id
    assert judged(judge([LABEL], new, 0.5)[0], new) == {"D#b": 2.0, "x2": 1.0, "x3": 1.0}  # by ids: D#b only


def test_a_label_without_spans_is_unscorable_under_another_chunking_and_counted():
    new = table([(0, 50), (50, 100)])
    old = {key: value for key, value in LABEL.items() if key != "relevant_spans"}
    golden = [old, {**LABEL, "qid": "r"}]
    assert judged(judge(golden, new, 0.5)[0], new) == {}
    assert labels_without_spans(golden, new) == ["q"] and labels_without_spans(golden, CHUNKS) == []
    assert "1 of 2 labelled questions name chunks not in this chunking and carry no relevant_spans (q)" in (
        unspanned_warning(golden, new)
    )
    run = from_records([("q", "n0-50", 1.0), ("r", "n50-100", 1.0)], 10)
    per_question = score_run(golden, new, run, Scoring(ks=(1,)))
    assert per_question["n_relevant"].tolist() == [0, 1]  # r: (50, 100) holds 20 of the 30 grade-2 characters
    assert unscorable_warning(per_question).startswith("1 of 2 questions have no relevant chunk in this chunking (q)")


def test_a_chunk_table_without_offsets_judges_by_ids():
    """The API scores chunk labels against a table of chunk ids only: no spans to judge by."""
    ids_only = pd.DataFrame({"chunk_id": ["D#b", "other"]})
    assert judged(judge([LABEL], ids_only, 0.5)[0], ids_only) == {"D#b": 2.0}


def test_ready_chunks_with_offsets_carry_spans_into_the_golden_rows(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    text = DOCS["d1"]
    write_jsonl(
        folder / "chunks.jsonl",
        [
            {"id": "p1", "doc_id": "doc", "start": 0, "end": 81, "text": text[0:81]},
            {"id": "p2", "doc_id": "doc", "start": 81, "end": 162, "text": text[81:162]},
            {"id": "p3", "doc_id": "doc", "start": 162, "end": 200, "text": text[162:200]},
        ],
    )
    (folder / "queries.tsv").write_text("u1\twhat does aspirin do\n")
    (folder / "qrels.tsv").write_text("u1 0 p2 2\nu1 0 p3 1\n")
    corpus = load_corpus(folder)
    assert corpus.labels[0]["relevant_spans"] == [["doc", 81, 162, 2], ["doc", 162, 200, 1]]
    rows = label_rows(corpus.labels)
    assert rows[0]["relevant_spans"] == [["doc", 81, 162, 2], ["doc", 162, 200, 1]]
    texts = dict(zip(corpus.documents["doc_id"], corpus.documents["text"]))
    assert evidence_texts(rows, texts) == [[text[81:162], text[162:200]]]  # found by span, not by chunk id
    settings = GenerateSettings.from_params(DEFAULTS["generate"])
    golden = assemble(settings, corpus.documents, corpus.labels, {}, GenerationRun("", False, lambda _: None))
    assert golden.rows[0]["relevant_spans"] == [["doc", 81, 162, 2], ["doc", 162, 200, 1]]
    json.dumps(golden.rows)  # plain ints and strings: data/goldenset.jsonl takes them as they are
    recut = chunk_documents(corpus.documents, chars=60, overlap=0)
    assert list(zip(recut["start"], recut["end"])) == [(0, 55), (56, 114), (115, 159), (160, 200)]
    # (0, 55) lies in the unlabelled p1; 33 of the 58 characters of (56, 114) lie in p2 (grade 2), as
    # does all of (115, 159); (160, 200) holds all of p3 (grade 1) and 2 characters of p2.
    assert judged(judge(rows, recut, 0.5)[0], recut) == {"doc:56-114": 2.0, "doc:115-159": 2.0, "doc:160-200": 1.0}


def test_beir_labels_carry_spans(tmp_path):
    corpus = load_corpus(beir_folder(tmp_path / "beir"))
    lengths = {d: len(text.strip()) for d, text in DOCS.items()}
    assert [label["relevant_spans"] for label in corpus.labels] == [
        [["d1", 0, lengths["d1"], 2], ["d3", 0, lengths["d3"], 1], ["d2", 0, lengths["d2"], 0]],
        [["d2", 0, lengths["d2"], 1]],
    ]
