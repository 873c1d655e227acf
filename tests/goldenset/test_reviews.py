"""The reviews format: clicks appended and read back, last click wins, bad lines as one line."""

import json

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from retrieval_bench.core.errors import InputError
from retrieval_bench.evaluation.stats import cohen_kappa
from retrieval_bench.goldenset.reviews import (
    append_clicks,
    golden_reviews,
    grade_click,
    question_click,
    read_reviews,
    review_report,
)


def test_clicks_round_trip_and_last_click_wins(tmp_path):
    append_clicks(tmp_path, [question_click("ana", "q1", "fine")])
    append_clicks(tmp_path, [grade_click("ana", "q1", "a.md:0-10", 3)])
    append_clicks(tmp_path, [question_click("ana", "q1", "ambiguous")])  # changed her mind
    append_clicks(tmp_path, [grade_click("ana", "q1", "a.md:0-10", 1)])
    append_clicks(tmp_path, [question_click("bo", "q2", "fine")])
    reviews = read_reviews(tmp_path, known_qids={"q1", "q2"})
    assert reviews.reviewers == ["ana", "bo"]
    assert reviews.questions[["reviewer", "qid", "mark"]].values.tolist() == [
        ["ana", "q1", "ambiguous"],
        ["bo", "q2", "fine"],
    ]
    assert reviews.grades[["qid", "chunk_id", "grade"]].values.tolist() == [["q1", "a.md:0-10", 1]]
    assert reviews.rejected().values.tolist() == [["q1", "ambiguous"]]
    assert len((tmp_path / "ana.jsonl").read_text().splitlines()) == 4  # append-only: every click kept


def test_the_golden_set_report_counts_rejections_by_set_and_kind_and_says_nothing_without_reviews(tmp_path, capsys):
    golden = [
        {"qid": "q1", "kind": "single", "question_set": "generated"},
        {"qid": "q2", "kind": "multi", "question_set": "generated"},
        {"qid": "q3", "kind": "single", "source": "hand-written"},
    ]
    assert review_report(tmp_path / "absent", golden) == {}
    append_clicks(tmp_path, [grade_click("ana", "q1", "a.md:0-10", 3)])
    assert review_report(tmp_path, golden) == {}  # grades alone mark no question
    for qid, mark in (("q1", "gives_away"), ("q2", "fine"), ("q3", "fine"), ("q-gone", "ambiguous")):
        append_clicks(tmp_path, [question_click("ana", qid, mark)])
    report = review_report(tmp_path, golden)["reviews"]
    assert "1 clicks on questions no longer in the golden set are left out" in capsys.readouterr().err
    assert (report["n_reviewed"], report["n_rejected"]) == (3, 1) and report["by_reason"]["gives_away"] == 1
    generated = report["by_set"]["generated"]
    assert generated["single"]["rejection_rate"] == 1.0 and generated["multi"]["rejection_rate"] == 0.0
    assert report["by_set"]["hand-written"]["single"] == {
        "n_reviewed": 1,
        "n_rejected": 0,
        "by_reason": {"ambiguous": 0, "not_answerable": 0, "gives_away": 0, "not_real": 0},
        "rejection_rate": 0.0,
    }


def test_no_folder_is_no_reviews(tmp_path):
    reviews = read_reviews(tmp_path / "absent")
    assert reviews.questions.empty and reviews.grades.empty and reviews.reviewers == []


def test_a_line_cut_short_by_a_crash_is_skipped(tmp_path):
    append_clicks(tmp_path, [question_click("ana", "q1", "fine")])
    with open(tmp_path / "ana.jsonl", "a") as handle:
        handle.write('{"type": "grade", "qid": "q1", "chu')
    assert len(read_reviews(tmp_path).questions) == 1


def test_a_line_cut_inside_a_character_is_skipped_but_bad_bytes_before_the_end_are_an_error(tmp_path):
    """A cut inside "café" (b"caf\\xc3") stopped the page, --agreement and the pipeline at "not
    UTF-8 text", so the click that would repair the file could never be made."""
    append_clicks(tmp_path, [question_click("ana", "q1", "fine")])
    with open(tmp_path / "ana.jsonl", "ab") as handle:
        handle.write(b'{"type": "grade", "qid": "q1", "chunk_id": "caf\xc3')
    assert len(read_reviews(tmp_path).questions) == 1
    append_clicks(tmp_path, [question_click("ana", "q2", "fine")])  # cuts it off
    assert read_reviews(tmp_path).questions["qid"].tolist() == ["q1", "q2"]
    with open(tmp_path / "ana.jsonl", "ab") as handle:
        handle.write(b'{"type": "grade", "qid": "q1", "chunk_id": "caf\xc3"}\n')  # a whole line: broken
    with pytest.raises(InputError, match=r"ana.jsonl:3: not UTF-8 text"):
        read_reviews(tmp_path)


def test_a_click_after_a_line_cut_short_cuts_it_off_and_one_after_a_line_without_newline_keeps_it(tmp_path):
    """The next append never lands glued to the last line: an unfinished one (never acknowledged) is
    cut off, a complete one (a hand edit) gets its newline; every acknowledged click stays readable."""
    append_clicks(tmp_path, [question_click("ana", "q1", "fine")])
    with open(tmp_path / "ana.jsonl", "a") as handle:
        handle.write('{"type": "grade", "qid": "q1", "chu')
    append_clicks(tmp_path, [question_click("ana", "q2", "ambiguous")])
    assert read_reviews(tmp_path).questions["qid"].tolist() == ["q1", "q2"]
    (tmp_path / "bo.jsonl").write_text(json.dumps(question_click("bo", "q1", "fine")))  # no final newline
    append_clicks(tmp_path, [question_click("bo", "q2", "fine")])
    assert sorted(read_reviews(tmp_path).questions.query("reviewer == 'bo'")["qid"]) == ["q1", "q2"]


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            '{"type": "question", "qid": ["q1"], "mark": "fine", "reviewer": "ana"}',
            "qid ['q1']: expected a question id",
        ),
        ('{"type": "question", "qid": "q1", "mark": "fine"}', "ana.jsonl:1: no reviewer"),
        ('{"type": "question", "qid": "q1", "mark": "fine", "reviewer": ""}', "ana.jsonl:1: reviewer '': expected"),
        ("[" * 100_000 + "]" * 100_000, "ana.jsonl:1: JSON nested 100000 levels deep"),
    ],
)
def test_what_the_pipeline_reads_of_a_bad_line_is_one_line_not_a_traceback(tmp_path, text, expected):
    (tmp_path / "ana.jsonl").write_text(text + "\n")
    with pytest.raises(InputError) as error:
        golden_reviews(tmp_path, {"q1"})
    assert expected in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            {"type": "grade", "qid": "q1", "chunk_id": "c", "grade": 4, "reviewer": "ana"},
            "grade 4: expected 0, 1, 2 or 3",
        ),
        ({"type": "grade", "qid": "q1", "chunk_id": "c", "grade": True, "reviewer": "ana"}, "grade True"),
        ({"type": "grade", "qid": "q1", "chunk_id": "c", "grade": 2.0, "reviewer": "ana"}, "grade 2.0: expected 0, 1"),
        (
            {"type": "question", "qid": "q9", "mark": "fine", "reviewer": "ana"},
            "question 'q9' is not in the golden set",
        ),
        ({"type": "question", "qid": "q1", "mark": "meh", "reviewer": "ana"}, "mark 'meh': expected one of fine"),
        ({"type": "vote", "qid": "q1", "reviewer": "ana"}, "type 'vote'"),
        ({"type": "question", "qid": "q1", "mark": "fine", "reviewer": "bo"}, "reviewer 'bo' in ana's file"),
    ],
)
def test_bad_lines_are_one_line_naming_file_and_line(tmp_path, line, expected):
    (tmp_path / "ana.jsonl").write_text(
        json.dumps(question_click("ana", "q1", "fine")) + "\n" + json.dumps(line) + "\n"
    )
    with pytest.raises(InputError) as error:
        read_reviews(tmp_path, known_qids={"q1"})
    message = str(error.value)
    assert expected in message and f"{tmp_path / 'ana.jsonl'}:2:" in message and "\n" not in message


@pytest.mark.parametrize("name", ["", "../x", "a b", "é", "-lead", "x" * 65])
def test_reviewer_names_must_be_file_safe_words(tmp_path, name):
    with pytest.raises(InputError, match="expected a file-safe word"):
        append_clicks(tmp_path, [question_click(name, "q1", "fine")])
    assert list(tmp_path.iterdir()) == []


def test_invalid_json_in_the_middle_is_an_error(tmp_path):
    (tmp_path / "ana.jsonl").write_text('{"type": \n' + json.dumps(question_click("ana", "q1", "fine")) + "\n")
    with pytest.raises(InputError, match=r"ana.jsonl:1: invalid JSON"):
        read_reviews(tmp_path)


def test_cohen_kappa_equals_sklearn_on_random_cases():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n, labels = int(rng.integers(2, 60)), int(rng.integers(2, 5))
        a = rng.integers(0, labels, n)
        b = np.where(rng.random(n) < rng.random(), a, rng.integers(0, labels, n))
        expected = cohen_kappa_score(a, b)
        if np.isnan(expected):
            assert np.isnan(cohen_kappa(a, b))
        else:
            assert cohen_kappa(a, b) == pytest.approx(expected, abs=1e-12)


def test_cohen_kappa_by_hand():
    # 10 items: both "yes" 4, both "no" 3, a yes/b no 2, a no/b yes 1 -> p_o 0.7; a yes 0.6, b yes 0.5
    a = ["y"] * 4 + ["n"] * 3 + ["y"] * 2 + ["n"]
    b = ["y"] * 4 + ["n"] * 3 + ["n"] * 2 + ["y"]
    chance = 0.6 * 0.5 + 0.4 * 0.5
    assert cohen_kappa(a, b) == pytest.approx((0.7 - chance) / (1 - chance))
    assert np.isnan(cohen_kappa(["y", "y"], ["y", "y"])) and np.isnan(cohen_kappa([], []))


def test_the_pipeline_leaves_out_clicks_on_questions_the_golden_set_no_longer_holds(tmp_path, capsys):
    from retrieval_bench.goldenset.reviews import golden_reviews

    append_clicks(tmp_path, [question_click("ana", "gone", "fine")])
    append_clicks(tmp_path, [question_click("ana", "q1", "ambiguous")])
    reviews = golden_reviews(tmp_path, {"q1"})
    assert reviews.questions["qid"].tolist() == ["q1"] and reviews.n_unknown == 1
    assert capsys.readouterr().err.strip() == (
        f"warning: {tmp_path}: 1 clicks on questions no longer in the golden set are left out"
    )
    with pytest.raises(InputError, match="question 'gone' is not in the golden set"):
        read_reviews(tmp_path, known_qids={"q1"})  # the review page and its import stay strict


def test_grades_on_chunks_no_chunking_holds_are_said(tmp_path, capsys):
    """Re-chunking left every person's chunk grade out of the judged view without a word."""
    for chunk_id in ("a.md:0-800", "a.md:700-1500", "b.md:0-400"):
        append_clicks(tmp_path, [grade_click("ana", "q1", chunk_id, 3)])
    asked = []

    def held() -> set[str]:
        asked.append(True)
        return {"b.md:0-400", "a.md:0-1600"}

    golden_reviews(tmp_path, {"q1"}, held)
    assert (
        capsys.readouterr()
        .err.strip()
        .startswith(
            f"warning: {tmp_path}: 2 of 3 chunk grades name chunks no chunking holds (re-chunked since the review?)"
        )
    )
    golden_reviews(tmp_path, {"q1"}, lambda: {"a.md:0-800", "a.md:700-1500", "b.md:0-400"})
    assert capsys.readouterr().err == ""
    append_clicks(tmp_path / "only_questions", [question_click("bo", "q1", "fine")])
    golden_reviews(tmp_path / "only_questions", {"q1"}, held)  # no grades: the chunk tables are not read
    assert len(asked) == 1 and capsys.readouterr().err == ""
