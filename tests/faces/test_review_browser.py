"""The review page in a real browser: headless Chromium (Debian's package, driven by Playwright for
Python) goes through three questions by keyboard, reloads, and must resume at the fourth; the
reviewer's JSONL must hold exactly the clicks made, in order."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pandas as pd
import pytest
from conftest import ROOT, tool_env
from review_project import make_review_project

from retrieval_bench.goldenset.review_sample import review_sample


def chromium_and_playwright():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if chromium is None or sync_playwright is None:
        # `make test` installs Chromium where it can and the test extra holds playwright: CI must drive the page.
        assert not os.environ.get("CI"), "CI has no Chromium or no playwright (the test extra)"
        pytest.skip("no headless Chromium or no playwright here (apt-get install chromium; pip install playwright)")
    return chromium, sync_playwright


def start_review(project, *args: str) -> tuple[subprocess.Popen, str]:
    """`retrieval-bench review` serving on a free port; (the process, its page's address)."""
    env = {**tool_env(), "PYTHONPATH": str(ROOT / "src")}
    server = subprocess.Popen(
        [sys.executable, "-m", "retrieval_bench.cli", "review", "--port", "0", *args],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = server.stdout.readline()
    assert " at http://127.0.0.1:" in first, first + server.stderr.read()
    return server, first.split(" at ")[1].split()[0]


def stop(server: subprocess.Popen) -> tuple[int, str]:
    """Ctrl-C: (exit status, what it printed after its first line)."""
    server.send_signal(signal.SIGINT)
    out, _ = server.communicate()
    return server.returncode, out


def test_three_questions_by_keyboard_then_a_reload_resumes_and_the_file_holds_exactly_the_clicks(tmp_path):
    chromium, sync_playwright = chromium_and_playwright()
    project = make_review_project(tmp_path / "project")
    golden = pd.read_json(project / "data" / "goldenset.jsonl", lines=True)
    order = review_sample(golden, len(golden) - 2, 0)
    questions = dict(zip(golden["qid"], golden["question"]))
    server, address = start_review(project, "--reviewer", "ana")
    expected, posts = [], 0
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(bypass_csp=True)  # the page's CSP forbids eval, which wait_for_function uses
            requested: list[str] = []
            page.on("request", lambda request: requested.append(request.url))
            page.goto(address)
            page.wait_for_selector("body[data-ready='1']")
            # the first question's reviewer changes their mind at once: both clicks, in order, the last one wins
            steps = [[("g", "gives_away"), ("f", "fine")], [("a", "ambiguous")], [("g", "gives_away")]]
            for step, marks in enumerate(steps):
                qid = order[step]
                assert page.inner_text("#question") == questions[qid]
                cards = [
                    json.loads(card)
                    for card in page.eval_on_selector_all(".card", "cs => cs.map(c => c.dataset.chunkIds)")
                ]
                assert len(cards) >= 2
                for mark_key, mark in marks:
                    page.keyboard.press(mark_key)
                    expected.append(("question", qid, mark))
                for card, grade in zip(cards, ["2", "0"]):  # a grade selects the next ungraded chunk
                    page.keyboard.press(grade)
                    expected += [("grade", qid, chunk_id, int(grade)) for chunk_id in card]
                posts += len(marks) + 2
                page.wait_for_function(f"document.body.dataset.saved === '{posts}'")
                page.keyboard.press("ArrowRight")
            page.reload()
            page.wait_for_selector("body[data-ready='1']")
            assert page.inner_text("#question") == questions[order[3]]  # the first question without a mark
            assert page.inner_text("#progress") == f"3 of {len(order)} questions marked"
            assert page.eval_on_selector(".card.selected", "c => c.querySelector('.grade').textContent") == "–"
            for _ in range(3):
                page.keyboard.press("ArrowLeft")
            assert page.inner_text("#question") == questions[order[0]] and page.inner_text("#mark") == "fine"
            badges = page.eval_on_selector_all(".card .grade", "gs => gs.map(g => g.textContent)")
            assert badges[:2] == ["2", "0"] and set(badges[2:]) <= {"–"}
            browser.close()
        assert requested and all(url.startswith(address) for url in requested)  # nothing from the network
    finally:
        status, said = stop(server)
    lines = (project / "data" / "reviews" / "ana.jsonl").read_text().splitlines()
    clicks = [json.loads(line) for line in lines]
    assert all(click["reviewer"] == "ana" for click in clicks)
    assert [
        (c["type"], c["qid"], c["mark"])
        if c["type"] == "question"
        else (c["type"], c["qid"], c["chunk_id"], c["grade"])
        for c in clicks
    ] == expected
    path = os.path.join("data", "reviews", "ana.jsonl")
    assert status == 0 and said.splitlines() == [  # the project is no DVC project: the file is only written
        f"review: stopped; every click is in {path}",
        f"review: {path} is not tracked by DVC (no DVC project here): commit it, or `dvc add` it in one",
    ]


def test_a_held_key_clicks_once_shift_is_the_same_key_and_a_click_the_server_missed_is_undone(tmp_path):
    """Holding 3 graded four chunks 3 (four lines); Shift+F did nothing; with the server down, a
    mark stayed on the page (and in the progress) as if saved; every load logged a favicon 404."""
    chromium, sync_playwright = chromium_and_playwright()
    project = make_review_project(tmp_path / "project")
    server, address = start_review(project, "--reviewer", "ana")
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(bypass_csp=True)
            errors: list[str] = []
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.goto(address)
            page.wait_for_selector("body[data-ready='1']")
            page.keyboard.press("Shift+F")
            page.wait_for_function("document.body.dataset.saved === '1'")
            fine = page.inner_text("#mark")
            first_card = json.loads(page.eval_on_selector(".card.selected", "c => c.dataset.chunkIds"))
            for _ in range(4):  # the first keydown, then three the keyboard repeats while the key is held
                page.keyboard.down("3")
            page.keyboard.up("3")
            page.wait_for_function("document.body.dataset.saved === '2'")
            badges = page.eval_on_selector_all(".card .grade", "gs => gs.map(g => g.textContent)")
            assert badges[0] == "3" and set(badges[1:]) <= {"–"}
            assert errors == []  # no favicon 404 either
            stop(server)
            page.keyboard.press("a")
            page.wait_for_function("document.body.dataset.failed === '1'")
            assert page.inner_text("#mark") == fine  # undone: the page shows what the file holds
            assert page.inner_text("#status").startswith("NOT SAVED")
            browser.close()
    finally:
        if server.poll() is None:
            stop(server)
    clicks = [json.loads(line) for line in (project / "data" / "reviews" / "ana.jsonl").read_text().splitlines()]
    assert [(c["type"], c.get("mark"), c.get("chunk_id"), c.get("grade")) for c in clicks] == [
        ("question", "fine", None, None),
        *[("grade", None, chunk_id, 3) for chunk_id in first_card],
    ]
