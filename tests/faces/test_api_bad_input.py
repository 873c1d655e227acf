"""Bad input to the Python API (retrieval_bench.api) and to the per-question tables `retrieval-bench
compare` reads: every case is one InputError line naming the argument or the file and what was
expected, never a TypeError, AttributeError or a hang, and nothing is written. The silent wrong
results of issue #28 (a qid counted twice, an infinite or out-of-range metric, a text metric
column) are refused."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import retrieval_bench as rb
from retrieval_bench.cli import main as cli_main
from retrieval_bench.evaluation.compare.command import compare_tables
from retrieval_bench.evaluation.score.per_question import read_per_question
from retrieval_bench.evaluation.stats import Resampling

QRELS = {"q1": {"a": 1}, "q2": {"b": 2}, "q3": {"c": 1}}
RUN = {"q1": {"a": 0.9, "b": 0.1}, "q2": {"a": 0.8, "b": 0.7}, "q3": {"c": 0.2, "a": 0.5}}
DUPLICATES = pd.DataFrame({"group": ["g"], "chunk_id": ["a"]})
SPAN_CHUNKS = pd.DataFrame(
    {"chunk_id": ["a", "b", "c"], "doc_id": ["d"] * 3, "start": [0, 10, 20], "end": [10, 20, 30]}
)
HANG_GUARD_S = 60  # fires only if a call blocks (a FIFO read): then the test fails instead of hanging


def scores() -> rb.Scores:
    return rb.score(QRELS, RUN, k=[1, 2])


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def sparse_zeros(path: Path) -> Path:
    """A 1 GiB file of NUL bytes with no newline (sparse: it takes no disk)."""
    with open(path, "wb") as handle:
        handle.truncate(1 << 30)
    return path


def golden_jsonl(path: Path) -> Path:
    rows = [{"qid": "q1", "relevant": {"a": 1}}, {"qid": "q2", "relevant": {"b": 1}}, {"qid": "q1", "relevant": {}}]
    rows.append({"qid": "q1", "relevant": {"b": 1}})
    return write(path, "".join(json.dumps(row) + "\n" for row in rows).encode())


# (case id, given the test's folder: its inputs written and the call to make, a fragment the one line
# must hold: the argument or the file named)
CASES: list[tuple[str, Callable[[Path], Callable[[], object]], str]] = [
    # score: labels and judged view (item 2, item 6)
    (
        "labels list with a qid twice",
        lambda d: partial(rb.score, [{"qid": "q1", "relevant": {"a": 1}}] * 2, RUN),
        "labels: 2 rows share qid 'q1'",
    ),
    (
        "golden .jsonl with a qid thrice",
        lambda d: partial(rb.score, golden_jsonl(d / "g.jsonl"), RUN),
        "g.jsonl: 3 rows share qid 'q1'",
    ),
    # from a review of the API (2026-12-06): each was a traceback or a silent 0
    (
        "run of another chunking",  # a KeyError traceback, or with budgets=[] every metric 0
        lambda d: partial(rb.score, QRELS, RUN, chunks=pd.DataFrame({"chunk_id": ["a", "x"]}), budgets=[]),
        "the run: 2 chunk ids are not in the chunk table, e.g. 'b', 'c'",
    ),
    (
        "empty chunk table",
        lambda d: partial(rb.score, QRELS, RUN, chunks=pd.DataFrame({"chunk_id": []}), budgets=[]),
        "chunks: no chunk; expected the chunk table the run was retrieved from",
    ),
    (
        "duplicates naming a chunk not in chunks",  # KeyError: 'zz'
        lambda d: partial(
            rb.score,
            QRELS,
            RUN,
            chunks=pd.DataFrame({"chunk_id": ["a", "b", "c"]}),
            budgets=[],
            duplicates=pd.DataFrame({"group": [0, 0], "chunk_id": ["a", "zz"]}),
        ),
        "duplicates: 1 chunk ids are not in the chunk table, e.g. 'zz'",
    ),
    (
        "span with a text start",  # UFuncTypeError
        lambda d: partial(rb.score, [{"qid": "q1", "doc_id": "d", "start": "a", "end": 8}], RUN, chunks=SPAN_CHUNKS),
        "golden row 1: 'start' must be a character offset (an integer >= 0), got 'a'",
    ),
    (
        "span ending before it starts",  # scored 0
        lambda d: partial(rb.score, [{"qid": "q1", "doc_id": "d", "start": 8, "end": 2}], RUN, chunks=SPAN_CHUNKS),
        "golden row 1: an evidence span ends after it starts, got start 8, end 2",
    ),
    (
        "span with a NaN start",  # recall@1 nan
        lambda d: partial(
            rb.score, [{"qid": "q1", "doc_id": "d", "start": float("nan"), "end": 2}], RUN, chunks=SPAN_CHUNKS
        ),
        "golden row 1: 'start' must be a character offset (an integer >= 0), got null",
    ),
    (
        "span in a document the chunks lack",  # scored 0
        lambda d: partial(rb.score, [{"qid": "q1", "doc_id": "zz", "start": 0, "end": 2}], RUN, chunks=SPAN_CHUNKS),
        "question 'q1': its evidence's doc_id 'zz' is no document of chunks",
    ),
    (
        "chunk offsets as text",  # TypeError: '>=' not supported
        lambda d: partial(
            rb.score,
            [{"qid": "q1", "doc_id": "d", "start": 0, "end": 2}],
            RUN,
            chunks=SPAN_CHUNKS.assign(start=SPAN_CHUNKS["start"].astype(str)),
        ),
        "chunks: column 'start' must hold whole character offsets, got",
    ),
    (
        "a score as text in a dict",  # mrr 1.0 (a .jsonl run refused it)
        lambda d: partial(rb.score, {"q1": {"a": 1}}, {"q1": {"a": "0.5"}}),
        "run: row 1 (question 'q1', chunk 'a') has score '0.5'; every score must be a finite number",
    ),
    (
        "two score columns",  # TypeError from deep inside
        lambda d: partial(
            rb.read_run, pd.DataFrame([["q1", "a", 0.5, 0.1]], columns=["qid", "chunk_id", "score", "score"])
        ),
        "run DataFrame: column 'score' appears more than once",
    ),
    (
        "a chunk twice past the depth cut",  # kept the better score silently
        lambda d: partial(
            rb.read_run, write(d / "dup.run", b"q1 Q0 a 1 3.0 x\nq1 Q0 b 2 2.0 x\nq1 Q0 a 3 1.0 x\n"), depth=1
        ),
        "dup.run: question 'q1' lists chunk 'a' twice",
    ),
    (
        "compare k without a hit@k column",  # named the command line's --k
        lambda d: partial(rb.compare, scores(), scores(), k=7),
        "k must be a k with a hit@k column in both (have: 1, 2), got 7",
    ),
    (
        "reviews without duplicates",
        lambda d: partial(rb.score, QRELS, RUN, reviews=d),
        "reviews are read only with duplicates=",
    ),
    (
        "reviews a file",
        lambda d: partial(rb.score, QRELS, RUN, duplicates=DUPLICATES, reviews=write(d / "ana.jsonl", b"")),
        "reviews {d}/ana.jsonl: not a folder; expected data/reviews",
    ),
    (
        "labels qid 1 and '1'",
        lambda d: partial(rb.read_golden, [{"qid": 1, "relevant": {"a": 1}}, {"qid": "1", "relevant": {"a": 1}}]),
        "labels: 2 rows share qid '1'",
    ),
    (
        "judged_pool as a dict",
        lambda d: partial(rb.score, QRELS, RUN, duplicates=DUPLICATES, judged_pool={"qid": "q1", "chunk_id": "a"}),
        "judged_pool must be None, a path",
    ),
    (
        "judged_pool rows that are strings",
        lambda d: partial(rb.score, QRELS, RUN, duplicates=DUPLICATES, judged_pool=["q1 a 3"]),
        "judged_pool must be None, a path",
    ),
    (
        "judged_pool without duplicates",
        lambda d: partial(rb.score, QRELS, RUN, judged_pool=[]),
        "judged_pool is read only with duplicates=",
    ),
    (
        "judged_pool a directory",
        lambda d: partial(rb.score, QRELS, RUN, duplicates=DUPLICATES, judged_pool=d),
        "judged_pool",
    ),
    (
        "min_grade '2'",
        lambda d: partial(rb.score, QRELS, RUN, duplicates=DUPLICATES, min_grade="2"),
        "min_grade must be",
    ),
    (
        "min_grade None",
        lambda d: partial(rb.score, QRELS, RUN, duplicates=DUPLICATES, min_grade=None),
        "min_grade must be",
    ),
    (
        "min_grade True",
        lambda d: partial(rb.score, QRELS, RUN, duplicates=DUPLICATES, min_grade=True),
        "min_grade must be",
    ),
    ("min_grade 4", lambda d: partial(rb.score, QRELS, RUN, duplicates=DUPLICATES, min_grade=4), "min_grade must be"),
    (
        "ambiguous_at 0",
        lambda d: partial(rb.score, QRELS, RUN, duplicates=DUPLICATES, ambiguous_at=0),
        "ambiguous_at must be",
    ),
    ("ambiguous_at 2.0", lambda d: partial(rb.score, QRELS, RUN, ambiguous_at=2.0), "ambiguous_at must be"),
    ("min_coverage nan", lambda d: partial(rb.score, QRELS, RUN, min_coverage=float("nan")), "min_coverage must be"),
    ("min_coverage '0.5'", lambda d: partial(rb.score, QRELS, RUN, min_coverage="0.5"), "min_coverage must be"),
    ("k None", lambda d: partial(rb.score, QRELS, RUN, k=None), "k must be a non-empty list"),
    ("k True", lambda d: partial(rb.score, QRELS, RUN, k=True), "k must be a non-empty list"),
    ("k '5'", lambda d: partial(rb.score, QRELS, RUN, k="5"), "k must be a non-empty list"),
    ("ties a list", lambda d: partial(rb.score, QRELS, RUN, ties=["expected"]), "ties must be one of"),
    ("chunks a directory", lambda d: partial(rb.score, QRELS, RUN, chunks=d), "chunks {d}: a folder"),
    # read_run: depth and run files (item 6 and neighbours)
    (
        "depth '3'",
        lambda d: partial(rb.read_run, RUN, depth="3"),
        "depth must be a positive whole number of chunks, 'all'",
    ),
    ("depth 0", lambda d: partial(rb.read_run, RUN, depth=0), "depth must be a positive whole number"),
    ("depth -1", lambda d: partial(rb.read_run, RUN, depth=-1), "depth must be a positive whole number"),
    ("depth True", lambda d: partial(rb.read_run, RUN, depth=True), "depth must be a positive whole number"),
    ("depth 2.5", lambda d: partial(rb.read_run, RUN, depth=2.5), "depth must be a positive whole number"),
    (
        "run file with a NUL byte",
        lambda d: partial(rb.read_run, write(d / "nul.trec", b"q1 Q0 a\0 1 0.5 s\n")),
        "nul.trec:1: holds a NUL byte",
    ),
    ("empty run file", lambda d: partial(rb.read_run, write(d / "empty.trec", b"")), "empty.trec: the run is empty"),
    (
        "binary run file",
        lambda d: partial(rb.read_run, write(d / "bin.trec", bytes(range(128, 256)) * 64)),
        "bin.trec:1: not UTF-8",
    ),
    (
        "1 GiB without a newline",
        lambda d: partial(rb.read_run, sparse_zeros(d / "zeros.trec")),
        "zeros.trec:1: a line longer than",
    ),
    ("run a directory", lambda d: partial(rb.read_run, d), "run {d}: a folder"),
    ("run a FIFO", lambda d: partial(rb.read_run, fifo(d / "run.trec")), "run.trec: a FIFO (named pipe)"),
    ("run /dev/zero", lambda d: partial(rb.read_run, "/dev/zero"), "run /dev/zero: a character device"),
    (
        "jsonl qid null",
        lambda d: partial(rb.read_run, write(d / "r.jsonl", b'{"qid": null, "chunk_id": "a", "score": 1}\n')),
        "r.jsonl:1: 'qid' must be a non-empty string",
    ),
    (
        "jsonl qid a float",
        lambda d: partial(rb.read_run, write(d / "r.jsonl", b'{"qid": 1.5, "chunk_id": "a", "score": 1}\n')),
        "r.jsonl:1: 'qid' must be a non-empty string",
    ),
    (
        "jsonl score true",
        lambda d: partial(rb.read_run, write(d / "r.jsonl", b'{"qid": "q1", "chunk_id": "a", "score": true}\n')),
        "r.jsonl:1: expected a JSON object with qid, chunk_id and a numeric score",
    ),
    (
        "dict run score True",
        lambda d: partial(rb.read_run, {"q1": {"a": True}}),
        "run: row 1 (question 'q1', chunk 'a') has score True",
    ),
    # compare: options (item 6 and neighbours)
    ("level '0.9'", lambda d: partial(rb.compare, scores(), scores(), level="0.9"), "level must be a confidence level"),
    (
        "level nan",
        lambda d: partial(rb.compare, scores(), scores(), level=float("nan")),
        "level must be a confidence level",
    ),
    ("level 1.5", lambda d: partial(rb.compare, scores(), scores(), level=1.5), "level must be a confidence level"),
    ("level True", lambda d: partial(rb.compare, scores(), scores(), level=True), "level must be a confidence level"),
    (
        "resamples 2.5",
        lambda d: partial(rb.compare, scores(), scores(), resamples=2.5),
        "resamples must be a whole number",
    ),
    ("resamples 0", lambda d: partial(rb.compare, scores(), scores(), resamples=0), "resamples must be a whole number"),
    (
        "resamples -5",
        lambda d: partial(rb.compare, scores(), scores(), resamples=-5),
        "resamples must be a whole number",
    ),
    ("seed 'x'", lambda d: partial(rb.compare, scores(), scores(), seed="x"), "seed must be a whole number"),
    ("seed -1", lambda d: partial(rb.compare, scores(), scores(), seed=-1), "seed must be a whole number"),
    (
        "compare k '5'",
        lambda d: partial(rb.compare, scores(), scores(), k="5"),
        "k must be None or a positive whole number",
    ),
    ("a_label None", lambda d: partial(rb.compare, scores(), scores(), a_label=None), "a_label must be a string"),
    # compare: per_question.csv files
    (
        "per_question.csv not UTF-8",
        lambda d: partial(rb.compare, write(d / "pq.csv", b"qid,reciprocal_rank\n\xff,1.0\n"), scores()),
        "pq.csv: not UTF-8 text",
    ),
    (
        "per_question.csv a directory",
        lambda d: partial(rb.compare, d, scores()),
        "A {d}: a folder",
    ),
    (
        "per_question.csv a FIFO",
        lambda d: partial(rb.compare, scores(), fifo(d / "pq.csv")),
        "pq.csv: a FIFO (named pipe)",
    ),
    (
        "per_question.csv empty",
        lambda d: partial(rb.compare, write(d / "pq.csv", b""), scores()),
        "pq.csv: not a readable per_question.csv",
    ),
    (
        "per_question.csv with no qid",
        lambda d: partial(rb.compare, write(d / "pq.csv", b"id,reciprocal_rank\nq1,1\n"), scores()),
        "pq.csv: no qid column",
    ),
    # load_params (item 6)
    ("load_params a directory", lambda d: partial(rb.load_params, d), "path {d}: a folder"),
    (
        "load_params a FIFO",
        lambda d: partial(rb.load_params, fifo(d / "params.yaml")),
        "params.yaml: a FIFO (named pipe)",
    ),
    ("load_params None", lambda d: partial(rb.load_params, None), "path must be the path of a params.yaml"),
    ("load_params 3", lambda d: partial(rb.load_params, 3), "path must be the path of a params.yaml"),
]


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry under `folder` with the bytes of its regular files (a FIFO, a sparse file: not read)."""
    return {
        str(path.relative_to(folder)): path.read_bytes() if path.is_file() and path.stat().st_size < 1 << 20 else None
        for path in sorted(folder.rglob("*"))
    }


@contextmanager
def no_hang(seconds: int = HANG_GUARD_S) -> Iterator[None]:
    """Fail, rather than hang, if the block blocks (reading a FIFO no one writes)."""

    def hung(signum, frame):
        raise AssertionError(f"hung for {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(("call", "fragment"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_bad_input_is_one_named_line_and_writes_nothing(tmp_path, monkeypatch, call, fragment):
    monkeypatch.chdir(tmp_path)  # anything written by mistake would land here
    folder = tmp_path / "inputs"
    folder.mkdir()
    bad_call = call(folder)
    before = snapshot(tmp_path)
    with no_hang(), pytest.raises(rb.InputError) as error:
        bad_call()
    message = str(error.value)
    assert fragment.format(d=folder) in message and "\n" not in message
    assert snapshot(tmp_path) == before


def test_there_are_at_least_25_bad_input_cases():
    assert len(CASES) >= 25 and len({case[0] for case in CASES}) == len(CASES)


def test_a_question_listed_twice_is_refused_not_counted_twice():
    """rb.score counted a duplicated qid as two questions (n_questions 2)."""
    row = {"qid": "q1", "relevant": {"a": 1}}
    with pytest.raises(rb.InputError, match=r"^labels: 2 rows share qid 'q1'"):
        rb.score([row, row], {"q1": {"a": 1.0}})
    assert rb.score([row], {"q1": {"a": 1.0}}).metrics["n_questions"] == 1


BAD_VALUES = [
    ("reciprocal_rank", np.inf, "inf is not a number in [0, 1]"),
    ("reciprocal_rank", 5.0, "5.0 is not a number in [0, 1]"),
    ("reciprocal_rank", -3.0, "-3.0 is not a number in [0, 1]"),
    ("recall@2", -np.inf, "-inf is not a number in [0, 1]"),
    ("hit@1", 2.0, "2.0 is not a number in [0, 1]"),
    ("ndcg@2", "good", "'good' is not a number in [0, 1]"),
    ("complete@2", 7.0, "7.0 is not a number in [0, 1]"),  # per-kind and budget figures were taken as given
    ("evidence_recall@1", -0.5, "-0.5 is not a number in [0, 1]"),
    ("map@2", 2.0, "2.0 is not a number in [0, 1]"),
    ("first_relevant_rank", 0.5, "0.5 is not a rank >= 1"),
    ("n_relevant", -1, "-1 is not a count >= 0"),
]


@pytest.mark.parametrize(("column", "value", "fragment"), BAD_VALUES)
def test_compare_refuses_a_value_no_metric_takes(tmp_path, column, value, fragment):
    """rb.compare took inf (delta inf, ci_high nan), a reciprocal rank of 5 or -3, and dropped every
    question of a text metric column with only a warning: each is now one line naming the column,
    the qid and the value, from a DataFrame and from a per_question.csv alike."""
    good = scores()
    bad = good.per_question.astype({column: object})
    bad.loc[1, column] = value
    bad.to_csv(tmp_path / "per_question.csv", index=False)
    for side in (bad, tmp_path / "per_question.csv"):
        with pytest.raises(rb.InputError) as error:
            rb.compare(good, side, resamples=50)
        assert f"column {column!r}, qid 'q2': {fragment}" in str(error.value) and "\n" not in str(error.value)


def test_a_judged_column_is_checked_like_its_strict_one():
    good = rb.score(QRELS, RUN, k=[1, 2], duplicates=DUPLICATES).per_question
    bad = good.assign(judged_reciprocal_rank=good["judged_reciprocal_rank"] * 10)
    with pytest.raises(rb.InputError, match=r"column 'judged_reciprocal_rank', qid 'q1': 10.0 is not a number"):
        rb.compare(good, bad, resamples=50)


def test_an_empty_metric_value_is_still_left_out_with_a_warning():
    """Only values no metric can take are refused: an empty cell is a question without that value."""
    good = scores().per_question
    gap = good.assign(**{"ndcg@2": [np.nan, *good["ndcg@2"].iloc[1:]]})
    comparison = rb.compare(good, gap, resamples=50)
    assert comparison.metrics["ndcg@2"]["n"] == len(good) - 1
    assert any("ndcg@2: 1 questions without a value" in warning for warning in comparison.warnings)


def test_the_command_line_refuses_an_out_of_range_per_question_csv(tmp_path, monkeypatch, capsys):
    """`retrieval-bench compare` reads per_question.csv through the same check as the API."""
    table = scores().per_question.assign(reciprocal_rank=[1.0, 5.0, 0.5])
    (tmp_path / "metrics" / "panel" / "default").mkdir(parents=True)
    table.to_csv(tmp_path / "metrics" / "panel" / "default" / "per_question.csv", index=False)
    monkeypatch.chdir(tmp_path)
    assert cli_main(["compare", "workspace", "workspace", "--resamples", "50"]) == 1
    error = capsys.readouterr().err
    assert error.startswith(
        "error: workspace:metrics/panel/default/per_question.csv: column 'reciprocal_rank', qid 'q2': 5.0 is not a number in [0, 1]"
    )
    assert error.count("\n") == 1


def test_the_command_line_refuses_a_negative_seed(tmp_path):
    """--seed -1 reached numpy's generator (ValueError traceback) once the runs had segment columns."""
    table = read_per_question(scores().per_question.to_csv(index=False).encode(), "per_question.csv")
    with pytest.raises(rb.InputError, match=r"^--seed must be 0 or more, got -1$"):
        compare_tables(table, table, resampling=Resampling(seed=-1))


def test_depth_all_keeps_every_chunk():
    assert rb.read_run(RUN, depth="all").equals(rb.read_run(RUN))


def test_people_s_reviews_count_as_in_the_score_stage(tmp_path):
    """score() had no reviews: once anyone reviewed, its figures differed from the pipeline's
    (a rejected question stayed in, people's grades lost to the judge's)."""
    from retrieval_bench.goldenset.reviews import append_clicks, grade_click, question_click

    chunks = pd.DataFrame({"chunk_id": ["a", "b", "c"]})
    plain = rb.score(QRELS, RUN, chunks=chunks, k=[1, 2], budgets=[], duplicates=DUPLICATES)
    nobody = rb.score(QRELS, RUN, chunks=chunks, k=[1, 2], budgets=[], duplicates=DUPLICATES, reviews=tmp_path / "no")
    assert nobody.metrics == plain.metrics and nobody.per_question.equals(plain.per_question)
    append_clicks(tmp_path, [question_click("ana", "q2", "ambiguous")])
    append_clicks(tmp_path, [grade_click("ana", "q3", "a", 3)])  # a person finds a relevant for q3 at rank 1
    reviewed = rb.score(QRELS, RUN, chunks=chunks, k=[1, 2], budgets=[], duplicates=DUPLICATES, reviews=tmp_path)
    assert reviewed.metrics["n_rejected"] == 1 and reviewed.metrics["n_questions"] == 2
    assert reviewed.metrics["mrr"] == pytest.approx((1 + 1 / 2) / 2)  # q1 and q3 strict: q2 left out
    assert reviewed.metrics["judged_mrr"] == pytest.approx(1.0)  # q3's chunk a, graded 3 by a person


def test_span_labels_read_back_by_pandas_and_integer_doc_ids_still_score():
    """Two regressions of the span checks, caught in review: offsets pandas made floats (12573.0,
    a column with nulls) were refused, and a chunk table with integer doc_ids scored 0 against an
    evidence's doc_id made text."""
    chunks = SPAN_CHUNKS.assign(doc_id=7)
    run = {"q1": {"b": 0.9, "a": 0.5, "c": 0.1}}
    for row in (
        {"qid": "q1", "doc_id": 7, "start": 11, "end": 19},
        {"qid": "q1", "doc_id": "7", "start": 11.0, "end": 19.0},
    ):
        assert rb.score([row], run, chunks=chunks, budgets=[]).metrics["mrr"] == 1.0
    with pytest.raises(rb.InputError, match="'start' must be a character offset .*got the number 11.5"):
        rb.score([{"qid": "q1", "doc_id": 7, "start": 11.5, "end": 19}], run, chunks=chunks, budgets=[])


def test_duplicates_without_chunks_keep_the_copies_of_the_chunks_scored():
    """With duplicates= and no chunks=, the table is the chunks the labels and the run name: a copy of
    some other chunk was refused as "a run of another chunking" (and was a KeyError before)."""
    copies = pd.DataFrame({"group": [0, 0, 1, 1], "chunk_id": ["a", "c", "zz", "yy"]})
    scored = rb.score(QRELS, RUN, k=[1, 2], duplicates=copies)
    assert scored.metrics["n_questions"] == 3
