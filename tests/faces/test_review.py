"""`retrieval-bench review` without a browser: what a question shows, the server's clicks, bad input
in one line, Label Studio's documented formats both ways, and the reviewers' kappa."""

from __future__ import annotations

import contextlib
import http.client
import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, dvc, git, set_params, tool_env
from review_project import make_review_project

from retrieval_bench.cli import main
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import load_all_params
from retrieval_bench.goldenset.reviews import append_clicks, grade_click, question_click, read_reviews
from retrieval_bench.review.agreement import agreement_lines
from retrieval_bench.review.items import evidence_passages, load_review, pooled_cards
from retrieval_bench.review.label_studio import export_tasks, import_clicks
from retrieval_bench.review.server import make_server
from retrieval_bench.review.tracking import track


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = make_review_project(tmp_path / "project")
    monkeypatch.chdir(root)
    return root


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err.strip()


def write_clicks(root, reviewer: str, clicks: list[dict]) -> None:
    folder = root / "data" / "reviews"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{reviewer}.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clicks))


# What a question shows


def test_the_evidence_is_the_span_in_its_document_and_each_piece_of_a_multi_evidence_question():
    documents = {"a.md": "x" * 700 + "EVIDENCE" + "y" * 10, "b.md": "first SECOND third"}
    chunks = {"c1": "labelled text"}
    (single,) = evidence_passages({"doc_id": "a.md", "start": 700, "end": 708}, documents, chunks)
    assert single["span"] == "EVIDENCE" and single["before"] == "…" + "x" * 600 and single["after"] == "y" * 10
    pieces = [{"doc_id": "a.md", "start": 700, "end": 708}, {"doc_id": "b.md", "start": 6, "end": 12}]
    multi = evidence_passages({"kind": "multi", "evidence_spans": pieces}, documents, chunks)
    assert [p["span"] for p in multi] == ["EVIDENCE", "SECOND"] and multi[1]["before"] == "first "
    assert evidence_passages({"kind": "unanswerable", "doc_id": "a.md", "start": 0, "end": 3}, documents, chunks) == []
    labelled = evidence_passages({"relevant": {"c1": 2, "c2": 1, "c3": 0}}, documents, chunks)
    assert labelled == [{"doc_id": "c1", "before": "", "span": "labelled text", "after": ""}]


def test_pooled_chunks_are_shown_once_per_text_shuffled_by_the_seed():
    chunks = dict(zip([f"c{i}" for i in range(8)], ["t0", "t1", "t2", "t3", "t4", "t1", "t6", "t7"]))
    pooled = ["c3", "c1", "c0", "c1", "c5", "c2", "c4", "c6", "c7", "unknown"]
    cards = pooled_cards(pooled, chunks, "0:q1")
    assert sorted(tuple(card["chunk_ids"]) for card in cards) == [
        ("c0",),
        ("c1", "c5"),
        ("c2",),
        ("c3",),
        ("c4",),
        ("c6",),
        ("c7",),
    ]
    assert pooled_cards(pooled, chunks, "0:q1") == cards
    orders = {tuple(card["text"] for card in pooled_cards(pooled, chunks, f"{seed}:q1")) for seed in range(20)}
    assert len(orders) > 1  # the order is the seed's, not the systems'


def test_the_sample_shows_every_kind_with_the_panels_pooled_top_chunks(project):
    review = load_review(project)
    golden = {
        row["qid"]: row for row in map(json.loads, (project / "data" / "goldenset.jsonl").read_text().splitlines())
    }
    assert len(review.items) == 6 and review.golden_qids == set(golden)
    assert {item["kind"] for item in review.items} == {"single", "multi", "unanswerable"}  # small strata too
    runs = [pd.read_parquet(project / "data" / "panel" / system / "run.parquet") for system in ("default", "bm25")]
    for item in review.items:
        pooled = {c for run in runs for c in run.loc[(run["qid"] == item["qid"]) & (run["rank"] <= 3), "chunk_id"]}
        assert {c for card in item["chunks"] for c in card["chunk_ids"]} == pooled
        assert len(item["evidence"]) == {"unanswerable": 0, "multi": 2}.get(item["kind"], 1)


# The server


def post(address: str, body) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{address}/click", data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_each_click_is_in_the_file_when_acknowledged_and_a_bad_one_writes_nothing(project):
    review = load_review(project)
    server = make_server(0, review, "ana", project / "data" / "reviews")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"http://127.0.0.1:{server.server_address[1]}"
    path = project / "data" / "reviews" / "ana.jsonl"
    try:
        first, card = review.items[0], review.items[0]["chunks"][0]
        assert post(address, {"qid": first["qid"], "mark": "ambiguous"}) == (200, {"saved": 1})
        assert len(path.read_text().splitlines()) == 1
        assert post(address, {"qid": first["qid"], "chunk_ids": card["chunk_ids"], "grade": 3})[0] == 200
        before = path.read_text()
        for bad, message in [
            ({"qid": first["qid"], "chunk_ids": card["chunk_ids"], "grade": 4}, "grade 4: expected 0, 1, 2 or 3"),
            ({"qid": "q-not-sampled", "mark": "fine"}, "question 'q-not-sampled' is not in the review sample"),
            ({"qid": first["qid"], "chunk_ids": ["never-shown"], "grade": 2}, "chunk 'never-shown' was not shown"),
            ({"qid": first["qid"], "mark": "great"}, "mark 'great': expected one of fine"),
            ({"qid": first["qid"], "chunk_ids": card["chunk_ids"], "grade": 2.0}, "grade 2.0: expected 0, 1, 2 or 3"),
        ]:
            status, answer = post(address, bad)
            assert status == 400 and message in answer["error"]
        deep = urllib.request.Request(  # the server closed the connection with a RecursionError traceback
            f"{address}/click", data=b"[" * 60_000, method="POST", headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(deep)
        assert refused.value.code == 400 and "nested deeper" in json.load(refused.value)["error"]
        assert path.read_text() == before
        with urllib.request.urlopen(f"{address}/state") as answer:
            state = json.load(answer)
        assert state["marks"] == {first["qid"]: "ambiguous"}
        assert state["grades"] == {first["qid"]: {chunk_id: 3 for chunk_id in card["chunk_ids"]}}
    finally:
        server.shutdown()
        server.server_close()


def test_a_grade_of_a_card_of_copies_lands_whole_or_not_at_all(project, monkeypatch, capsys):
    """A card standing for two chunk ids was written as two appends: a server killed between them
    left one id graded (the page reads a card's grade from its first id), and a full disk a
    traceback, no reply, and a line and a half in the file."""
    import errno
    import io

    from retrieval_bench.goldenset import reviews

    review = load_review(project)
    item, card = review.items[0], review.items[0]["chunks"][0]
    server = make_server(0, review, "ana", project / "data" / "reviews")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"http://127.0.0.1:{server.server_address[1]}"
    path = project / "data" / "reviews" / "ana.jsonl"
    try:
        assert post(address, {"qid": item["qid"], "mark": "fine"})[0] == 200
        before = path.read_bytes()

        def full_disk(descriptor: int) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(reviews.os, "fsync", full_disk)  # after the bytes went in: they must come out
        status, answer = post(address, {"qid": item["qid"], "chunk_ids": card["chunk_ids"], "grade": 3})
        assert status == 507 and answer["error"] == "no space left on the device"
        assert path.read_bytes() == before
        assert capsys.readouterr().err.strip() == "review: a click was not saved: no space left on the device"
    finally:
        server.shutdown()
        server.server_close()
    monkeypatch.undo()
    writes: list[int] = []

    class Counted(io.FileIO):  # the file as append_clicks opens it, its writes counted
        def write(self, data) -> int:
            writes.append(len(data))
            return super().write(data)

    monkeypatch.setattr(reviews, "open", lambda name, mode, buffering: Counted(name, "a+"), raising=False)
    copies = ["different.md:1325-1877", "serverless.md:415-967"]  # one card: one grade, a line per chunk id
    reviews.append_clicks(path.parent, [grade_click("ana", item["qid"], chunk_id, 2) for chunk_id in copies])
    added = path.read_bytes()[len(before) :].decode().splitlines()
    assert [json.loads(line)["chunk_id"] for line in added] == copies and len(writes) == 1


def raw_request(port: int, method: str, path: str, headers: dict, body: bytes = b"") -> int:
    """The status of a request sent as written (urllib would set Host itself)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in {**headers, "Content-Length": str(len(body))}.items():
            connection.putheader(name, value)
        connection.endheaders(body)
        return connection.getresponse().status
    finally:
        connection.close()


def test_the_server_answers_its_own_page_only(project):
    """DNS rebinding (a page elsewhere reaching 127.0.0.1 under its own host name) and cross-site
    posts (another page's Origin, or a text/plain body that skips the browser's CORS check) get
    403/415 and write nothing; the page's own requests pass."""
    review = load_review(project)
    server = make_server(0, review, "ana", project / "data" / "reviews")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port, qid = server.server_address[1], review.items[0]["qid"]
    click = json.dumps({"qid": qid, "mark": "fine"}).encode()
    own, as_json = {"Host": f"127.0.0.1:{port}"}, {"Content-Type": "application/json"}
    try:
        assert raw_request(port, "GET", "/state", {"Host": "attacker.example"}) == 403
        assert raw_request(port, "POST", "/click", {"Host": f"attacker.example:{port}", **as_json}, click) == 403
        foreign = {**own, **as_json, "Origin": "http://attacker.example"}
        assert raw_request(port, "POST", "/click", foreign, click) == 403
        assert raw_request(port, "POST", "/click", {**own, "Content-Type": "text/plain"}, click) == 415
        assert not (project / "data" / "reviews" / "ana.jsonl").exists()
        assert raw_request(port, "GET", "/state", {"Host": f"localhost:{port}"}) == 200
        assert (
            raw_request(port, "POST", "/click", {**own, **as_json, "Origin": f"http://127.0.0.1:{port}"}, click) == 200
        )
    finally:
        server.shutdown()
        server.server_close()


def test_ctrl_c_stops_the_server_in_one_line_naming_the_file_then_dvc_tracks_it(project):
    def serve_then_stop() -> tuple[str, str]:
        server = subprocess.Popen(
            [sys.executable, "-m", "retrieval_bench.cli", "review", "--reviewer", "bo", "--port", "0"],
            cwd=project,
            env={**tool_env(), "PYTHONPATH": str(ROOT / "src")},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        first = server.stdout.readline()
        assert first.startswith("review: 6 questions for bo at http://127.0.0.1:")
        assert "data/reviews/bo.jsonl" in first
        server.send_signal(signal.SIGINT)
        out, err = server.communicate()
        assert server.returncode == 0 and err == ""
        return out

    assert serve_then_stop() == "review: stopped; every click is in data/reviews/bo.jsonl\n"  # no click: no file
    git("init", "-q", cwd=project)
    dvc("init", "-q", cwd=project)
    write_clicks(project, "bo", [question_click("bo", "q0", "fine")])  # a click of the page, as the server writes it
    assert serve_then_stop().splitlines() == [
        "review: stopped; every click is in data/reviews/bo.jsonl",
        "review: data/reviews/bo.jsonl is tracked by DVC: commit data/reviews/bo.jsonl.dvc and "
        "data/reviews/.gitignore, and `dvc push` shares the clicks (teammates: `dvc pull`)",
    ]
    assert (project / "data" / "reviews" / "bo.jsonl.dvc").is_file()


# Bad input: one line, exit status 1


def test_no_golden_set_yet_says_to_run_make_repro(project, capsys):
    (project / "data" / "goldenset.jsonl").unlink()
    assert main(["review", "--reviewer", "ana"]) == 1
    assert (
        error_line(capsys) == "error: data/goldenset.jsonl: no golden set yet; run `make repro` (or `dvc repro`) first"
    )


def test_a_sample_larger_than_the_golden_set_is_all_of_it(project, capsys, monkeypatch):
    from retrieval_bench.review import items

    review = items.load_review(project, 9)
    assert len(review.items) == 8
    assert (
        "review.sample 9 is more than the golden set's 8 questions: all of them are the sample"
        in capsys.readouterr().out
    )


@pytest.mark.parametrize("name", ["../etc", "a b", "", "-x", "é"])
def test_a_reviewer_name_that_is_not_a_file_safe_word(project, capsys, name):
    assert main(["review", f"--reviewer={name}"]) == 1
    assert "expected a file-safe word" in error_line(capsys)


def test_a_port_in_use(project, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["review", "--reviewer", "ana", "--port", str(port)]) == 1
    assert (
        error_line(capsys)
        == f"error: port {port} on 127.0.0.1 is in use: pass --port with another (0 picks a free one)"
    )


def test_a_reviews_file_naming_an_unknown_question_or_a_grade_outside_0_3(project, capsys, tmp_path):
    """A teammate's click on a question a regenerated golden set lacks is left out with a warning, as
    the pipeline does (it stopped everyone's review); a grade outside 0-3 stops it in one line."""
    write_clicks(project, "bo", [question_click("bo", "q0", "fine"), question_click("bo", "q-gone", "fine")])
    nothing = tmp_path / "nothing.json"
    nothing.write_text("[]")
    assert main(["review", "--reviewer", "ana", "--import", str(nothing)]) == 0
    assert (
        "warning: data/reviews: 1 clicks on questions no longer in the golden set are left out"
        in capsys.readouterr().err
    )
    write_clicks(project, "bo", [{**grade_click("bo", "q0", "d0.md:0-120", 1), "grade": 5}])
    assert main(["review", "--agreement"]) == 1
    assert "data/reviews/bo.jsonl:1: grade 5: expected 0, 1, 2 or 3" in error_line(capsys)


def test_review_params_out_of_bounds(project):
    for key, value in [("review.sample", 0), ("review.depth", 101), ("review.seed", -1)]:
        set_params(project, **{key: value})
        with pytest.raises(InputError, match=rf"{key} must be between"):
            load_all_params(project / "params.yaml")
        set_params(project, **{key: 3})


def test_an_export_format_other_than_label_studio(project, capsys):
    assert main(["review", "--export", "prodigy", "out.json"]) == 1
    assert error_line(capsys) == "error: --export prodigy: expected one of label-studio"


# Label Studio


def test_the_export_is_label_studios_task_list_and_its_config_names_every_field(project, capsys):
    assert main(["review", "--export", "label-studio", "tasks.json"]) == 0
    tasks = json.loads((project / "tasks.json").read_text())
    review = load_review(project)
    assert [task["data"]["qid"] for task in tasks] == review.qids and all(set(task) == {"data"} for task in tasks)
    config = ET.fromstring((project / "tasks.xml").read_text())
    objects = {tag.get("name"): tag.get("value") for tag in config if tag.tag in ("Text", "HyperText")}
    for control in config.iter("Choices"):
        assert control.get("toName") in objects
    for task, item in zip(tasks, review.items, strict=True):
        assert all(value[1:] in task["data"] for value in objects.values())  # every $field is in every task
        for slot, card in enumerate(item["chunks"], 1):
            assert (
                task["data"][f"chunk_{slot}"] == card["text"] and task["data"][f"chunk_ids_{slot}"] == card["chunk_ids"]
            )
        assert "<mark>" in task["data"]["evidence"] or item["kind"] == "unanswerable"


def annotated(task: dict, results: list[tuple[str, str]], updated_at: str, cancelled: bool = False) -> dict:
    """An annotation as Label Studio's JSON export writes it (labelstud.io/guide/task_format)."""
    return {
        "id": 1000 + len(task.setdefault("annotations", [])),
        "completed_by": 7,
        "result": [
            {
                "id": f"r{i}",
                "from_name": name,
                "to_name": "question" if name == "mark" else name.replace("grade_", "chunk_"),
                "type": "choices",
                "origin": "manual",
                "value": {"choices": [choice]},
            }
            for i, (name, choice) in enumerate(results)
        ],
        "was_cancelled": cancelled,
        "ground_truth": False,
        "created_at": updated_at,
        "updated_at": updated_at,
        "lead_time": 12.5,
        "task": task.get("id", 1),
    }


def test_a_label_studio_export_comes_back_as_clicks_the_last_annotation_winning(project, capsys):
    assert main(["review", "--export", "label-studio", "tasks.json"]) == 0
    tasks = json.loads((project / "tasks.json").read_text())
    first, second = tasks[0], tasks[1]
    for number, task in enumerate(tasks, 1):
        task.update(id=number, project=3, created_at="2026-12-01T10:00:00Z", predictions=[])
    # listed newest first: the older one must not win
    first["annotations"] = [
        annotated(first, [("mark", "gives the answer away"), ("grade_1", "1")], "2026-12-02T10:00:00Z")
    ]
    first["annotations"].append(annotated(first, [("mark", "fine"), ("grade_1", "3")], "2026-12-01T10:00:00Z"))
    first["annotations"].append(annotated(first, [("mark", "not_real")], "2026-12-03T10:00:00Z", cancelled=True))
    second["annotations"] = [annotated(second, [("grade_2", "0"), ("mark", "ambiguous")], "2026-12-02T11:00:00Z")]
    (project / "export.json").write_text(json.dumps(tasks))
    assert main(["review", "--import", "export.json", "--reviewer", "lee"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[-1].startswith("review: data/reviews/lee.jsonl is not tracked by DVC (no DVC project here)")
    reviews = read_reviews(project / "data" / "reviews")
    marks = dict(zip(reviews.questions["qid"], reviews.questions["mark"]))
    assert marks == {first["data"]["qid"]: "gives_away", second["data"]["qid"]: "ambiguous"}
    grades = {(q, c): g for q, c, g in zip(reviews.grades["qid"], reviews.grades["chunk_id"], reviews.grades["grade"])}
    expected = {(first["data"]["qid"], c): 1 for c in first["data"]["chunk_ids_1"]}
    expected |= {(second["data"]["qid"], c): 0 for c in second["data"]["chunk_ids_2"]}
    assert grades == expected and set(reviews.reviewers) == {"lee"}


@pytest.mark.parametrize(
    "results, message",
    [
        ([("grade_1", "4")], "grade_1 '4': expected a grade 0, 1, 2 or 3"),
        ([("mark", "great")], "mark 'great': expected one of fine"),
        ([("rating", "2")], "result 'rating': expected mark or grade_N"),
    ],
)
def test_a_label_studio_export_with_a_bad_result_is_one_line_and_writes_nothing(project, capsys, results, message):
    assert main(["review", "--export", "label-studio", "tasks.json"]) == 0
    tasks = json.loads((project / "tasks.json").read_text())
    tasks[0]["annotations"] = [annotated(tasks[0], [("mark", "fine")], "2026-12-01T10:00:00Z")]
    tasks[1]["annotations"] = [annotated(tasks[1], results, "2026-12-01T10:00:00Z")]
    (project / "export.json").write_text(json.dumps(tasks))
    capsys.readouterr()
    assert main(["review", "--import", "export.json", "--reviewer", "lee"]) == 1
    line = error_line(capsys)
    assert line.startswith(f"error: export.json: task 2 ({tasks[1]['data']['qid']}): ") and message in line
    assert not (project / "data" / "reviews" / "lee.jsonl").exists()


@pytest.mark.parametrize(
    "annotations, message",
    [
        ({"result": []}, "task 1 ("),
        ("x", "annotations must be a list of annotation objects, got 'x'"),
        (["x"], "annotations must be a list of annotation objects"),
        ([{"result": "x"}], "an annotation's result must be a list, got 'x'"),
    ],
)
def test_an_import_whose_annotations_are_malformed_is_one_line(project, capsys, annotations, message):
    """A malformed annotations field was skipped: "0 clicks appended", exit 0."""
    qid = load_review(project).qids[0]
    (project / "export.json").write_text(json.dumps([{"id": 1, "data": {"qid": qid}, "annotations": annotations}]))
    assert main(["review", "--import", "export.json", "--reviewer", "lee"]) == 1
    line = error_line(capsys)
    assert line.startswith(f"error: export.json: task 1 ({qid}): ") and message in line


def test_an_import_nested_too_deep_is_one_line(project, capsys):
    (project / "export.json").write_text("[" * 100_000)
    assert main(["review", "--import", "export.json", "--reviewer", "lee"]) == 1
    assert "export.json:1: JSON nested 100000 levels deep" in error_line(capsys)


def test_an_import_of_a_task_not_in_the_review_sample(project, capsys, tmp_path):
    (project / "export.json").write_text(json.dumps([{"id": 1, "data": {"qid": "elsewhere"}, "annotations": []}]))
    with pytest.raises(InputError, match=r"task 1: question 'elsewhere' is not in the review sample"):
        import_clicks(project / "export.json", "lee", set(load_review(project).qids))
    export_tasks([], tmp_path / "none.json")
    assert json.loads((tmp_path / "none.json").read_text()) == []


# Agreement


def kappa_by_table(a: list, b: list) -> float:
    """Cohen's kappa from the confusion table (a hand computation, not evaluation.stats')."""
    labels = sorted(set(a) | set(b))
    table = np.zeros((len(labels), len(labels)))
    for x, y in zip(a, b):
        table[labels.index(x), labels.index(y)] += 1
    table /= table.sum()
    chance = float(table.sum(axis=1) @ table.sum(axis=0))
    return (float(np.trace(table)) - chance) / (1 - chance)


@pytest.mark.parametrize("case", range(10))
def test_kappa_is_on_the_overlap_of_two_reviewers(project, case):
    rng = np.random.default_rng(case)
    qids = [f"q{i}" for i in range(8)]
    marks = ["fine", "ambiguous", "not_real"]
    ana = {q: str(rng.choice(marks)) for q in rng.choice(qids, 6, replace=False)}
    bo = {q: str(rng.choice(marks)) for q in rng.choice(qids, 6, replace=False)}
    grades_ana = {(q, f"c{j}"): int(rng.integers(4)) for q in qids for j in range(3) if rng.random() < 0.7}
    grades_bo = {(q, f"c{j}"): int(rng.integers(4)) for q in qids for j in range(3) if rng.random() < 0.7}
    write_clicks(
        project,
        "ana",
        [question_click("ana", q, "fine") for q in ana]  # changed their mind: the last click counts
        + [question_click("ana", q, m) for q, m in ana.items()]
        + [grade_click("ana", q, c, g) for (q, c), g in grades_ana.items()],
    )
    write_clicks(
        project,
        "bo",
        [question_click("bo", q, m) for q, m in bo.items()]
        + [grade_click("bo", q, c, g) for (q, c), g in grades_bo.items()],
    )
    (line,) = agreement_lines(read_reviews(project / "data" / "reviews"))
    both, pairs = sorted(set(ana) & set(bo)), sorted(set(grades_ana) & set(grades_bo))
    parts = []
    for n, kappa, what in [
        (len(both), kappa_by_table([ana[q] for q in both], [bo[q] for q in both]), "questions in common, marks"),
        (
            len(pairs),
            kappa_by_table([grades_ana[p] for p in pairs], [grades_bo[p] for p in pairs]),
            "chunks in common, grades",
        ),
    ]:
        if n:
            shown = "n/a (one label throughout)" if np.isnan(kappa) else f"{kappa:.3f}"
            parts.append(f"{n} {what} kappa {shown}")
    assert line == "ana and bo: " + "; ".join(parts)


def test_the_agreement_command_leaves_out_clicks_on_questions_no_longer_in_the_golden_set(project, capsys):
    """It read every click, where the server and the pipeline leave a regenerated set's stale
    ones out with one warning: 36 questions in common against the server's 30."""
    write_clicks(project, "ana", [question_click("ana", q, "fine") for q in ("q0", "q1", "gone")])
    write_clicks(project, "bo", [question_click("bo", q, "fine") for q in ("q0", "q1", "gone")])
    assert main(["review", "--agreement"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("ana and bo: 2 questions in common")
    assert "2 clicks on questions no longer in the golden set are left out" in captured.err


def test_the_agreement_command_without_an_overlap(project, capsys):
    write_clicks(project, "ana", [question_click("ana", "q0", "fine")])
    write_clicks(project, "bo", [question_click("bo", "q1", "fine")])
    assert main(["review", "--agreement"]) == 0
    assert capsys.readouterr().out == "no two reviewers in data/reviews reviewed the same question\n"


def test_a_reviews_file_is_tracked_by_dvc_alone_and_a_clone_that_has_not_pulled_it_is_told_to(
    project, capsys, tmp_path
):
    """Each reviewer's file gets its own .dvc (two reviewers never share a hash to conflict on); a
    teammate's clone without the file says in one line to pull it (the review command and every
    stage read reviews through read_reviews), and `dvc pull` brings exactly the clicks back."""
    path = Path("data/reviews/ana.jsonl")
    write_clicks(project, "ana", [question_click("ana", "q0", "fine")])
    assert track(path) == (
        f"review: {path} is not tracked by DVC (no DVC project here): commit it, or `dvc add` it in one"
    )
    git("init", "-q", cwd=project)
    dvc("init", "-q", cwd=project)
    dvc("remote", "add", "-d", "team", str(tmp_path / "remote"), cwd=project)
    write_clicks(project, "bo", [question_click("bo", "q0", "ambiguous")])
    for reviewer in ("ana", "bo"):
        line = track(Path(f"data/reviews/{reviewer}.jsonl"))
        assert line == (
            f"review: data/reviews/{reviewer}.jsonl is tracked by DVC: commit data/reviews/{reviewer}.jsonl.dvc "
            "and data/reviews/.gitignore, and `dvc push` shares the clicks (teammates: `dvc pull`)"
        )
    folder = project / "data" / "reviews"
    assert (folder / "ana.jsonl.dvc").is_file() and (folder / "bo.jsonl.dvc").is_file()
    assert {"/ana.jsonl", "/bo.jsonl"} <= set((folder / ".gitignore").read_text().split())
    clicks = (folder / "ana.jsonl").read_text()
    dvc("push", "-q", cwd=project)
    (folder / "ana.jsonl").unlink()  # a teammate's clone: the .dvc file came with git, the clicks not yet
    shutil.rmtree(project / ".dvc" / "cache")
    assert main(["review", "--agreement"]) == 1
    assert error_line(capsys) == (
        "error: data/reviews/ana.jsonl.dvc: its reviews file is tracked by DVC but not here: "
        "run `dvc pull data/reviews/ana.jsonl.dvc`"
    )
    dvc("config", "cache.type", "hardlink", cwd=project)  # a team whose DVC links files to its cache
    dvc("pull", "-q", "data/reviews/ana.jsonl.dvc", cwd=project)
    assert (folder / "ana.jsonl").read_text() == clicks and (folder / "ana.jsonl").stat().st_nlink == 2
    assert main(["review", "--agreement"]) == 0 and "ana and bo: 1 questions in common" in capsys.readouterr().out
    # the next click (the page's and --import's, both through append_clicks) undoes the link first,
    # so it never writes into the cache
    append_clicks(folder, [question_click("ana", "q1", "fine")])
    assert (folder / "ana.jsonl").stat().st_nlink == 1
    assert (folder / "ana.jsonl").read_text().startswith(clicks) and (folder / "ana.jsonl").read_text() != clicks
    dvc("checkout", "-f", "-q", "data/reviews/ana.jsonl.dvc", cwd=project)
    assert (folder / "ana.jsonl").read_text() == clicks  # the cache still holds what was pushed
    dvc("config", "cache.type", "symlink", cwd=project)
    dvc("checkout", "-f", "-q", "--relink", "data/reviews/ana.jsonl.dvc", cwd=project)
    assert (folder / "ana.jsonl").is_symlink()
    append_clicks(folder, [question_click("ana", "q1", "fine")])
    assert not (folder / "ana.jsonl").is_symlink() and (folder / "ana.jsonl").read_text() != clicks
    dvc("checkout", "-f", "-q", "data/reviews/ana.jsonl.dvc", cwd=project)
    assert (folder / "ana.jsonl").read_text() == clicks
    with dvc_lock_held(project):  # another DVC command at work: the line says why, the clicks stay
        write_clicks(project, "cy", [question_click("cy", "q0", "fine")])
        assert track(Path("data/reviews/cy.jsonl")) == (
            "review: data/reviews/cy.jsonl is not tracked by DVC yet (Unable to acquire lock); every click is in "
            "it: `dvc add data/reviews/cy.jsonl` tracks it"
        )
    assert not (folder / "cy.jsonl.dvc").exists() and read_reviews(folder).reviewers == ["ana", "bo", "cy"]
    # a team that shares reviews through git keeps doing so: a committed file is left to git
    write_clicks(project, "lee", [question_click("lee", "q1", "fine")])
    git("add", "data/reviews/lee.jsonl", cwd=project)
    assert (
        track(Path("data/reviews/lee.jsonl"))
        == "review: data/reviews/lee.jsonl is tracked by git: commit it to share the clicks"
    )
    assert not (folder / "lee.jsonl.dvc").exists()
    assert track(Path("data/reviews/nobody.jsonl")) is None  # no clicks, nothing to track


@contextlib.contextmanager
def dvc_lock_held(project):
    from dvc.repo import Repo

    lock = Repo(str(project)).lock  # the project's own lock, as its config makes it
    lock.lock()
    try:
        yield
    finally:
        lock.unlock()


def test_the_reviews_folder_is_in_git_so_every_clone_has_it_for_the_stages_that_read_it():
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "data/reviews"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "data/reviews/README.md" in listed
    assert read_reviews(ROOT / "data" / "reviews").reviewers == sorted(
        p.removeprefix("data/reviews/").removesuffix(".jsonl") for p in listed if p.endswith(".jsonl")
    )


def test_an_import_whose_result_value_is_not_an_object_or_grades_a_chunk_not_shown(project, capsys):
    assert main(["review", "--export", "label-studio", "tasks.json"]) == 0
    tasks = json.loads((project / "tasks.json").read_text())
    tasks[0]["annotations"] = [annotated(tasks[0], [("mark", "fine")], "2026-12-01T10:00:00Z")]
    tasks[0]["annotations"][0]["result"][0]["value"] = ["fine"]
    (project / "export.json").write_text(json.dumps(tasks))
    capsys.readouterr()
    assert main(["review", "--import", "export.json", "--reviewer", "lee"]) == 1
    assert "result 'mark': expected a single choice in value.choices" in error_line(capsys)
    tasks[0]["annotations"] = [annotated(tasks[0], [("grade_1", "2")], "2026-12-01T10:00:00Z")]
    tasks[0]["data"]["chunk_ids_1"] = ["edited-in"]
    (project / "export.json").write_text(json.dumps(tasks))
    assert main(["review", "--import", "export.json", "--reviewer", "lee"]) == 1
    assert "export.json: chunk 'edited-in' was not shown for question" in error_line(capsys)
    assert not (project / "data" / "reviews" / "lee.jsonl").exists()


@pytest.mark.parametrize("target, expected", [("tasks.xml", "an .xml file"), ("data", "a folder")])
def test_an_export_to_an_xml_file_or_a_folder_is_refused_before_writing(project, capsys, target, expected):
    """tasks.xml: the labeling config (FILE with .xml) would overwrite the tasks."""
    (project / "data").mkdir(exist_ok=True)
    assert main(["review", "--export", "label-studio", target]) == 1
    assert f"error: --export label-studio {target}: {expected}" in error_line(capsys)
    assert not (project / "tasks.xml").exists()


@pytest.mark.parametrize("port", ["70000", "-1", "eighty"])
def test_a_port_outside_0_to_65535_is_argparses_one_line(project, capsys, port):
    with pytest.raises(SystemExit) as stopped:
        main(["review", "--reviewer", "ana", "--port", port])
    assert stopped.value.code == 2 and "expected a port, 0 to 65535" in capsys.readouterr().err


def test_a_golden_set_with_a_question_twice_is_refused_not_sampled_twice(project, capsys):
    golden = project / "data" / "goldenset.jsonl"
    lines = golden.read_text().splitlines()
    golden.write_text("\n".join([*lines, lines[0]]) + "\n")
    assert main(["review", "--export", "label-studio", "tasks.json"]) == 1
    assert error_line(capsys).startswith("error: data/goldenset.jsonl: 2 rows share qid")
