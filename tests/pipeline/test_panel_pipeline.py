"""A panel of systems under the real `dvc repro`: every system retrieved and scored by its own
stages, one leaderboard, and editing one system reruns only its stages (not served from the
run-cache: it is emptied first)."""

import json
import shutil

import pandas as pd
import pytest
from conftest import copy_project, dvc, git, read_metrics, run, set_params

from retrieval_bench.core import paths

pytestmark = pytest.mark.pipeline

# Four of the sample's systems: both chunkings, both embedders, two methods (a smaller panel, a faster test).
PANEL = {
    "default": {"chunking": "default", "embedder": "default"},  # the retrieval section as it is: dense
    "dense-c400": {"chunking": "c400", "embedder": "default", "method": "dense"},
    "dense-seq64": {"chunking": "default", "embedder": "seq64", "method": "dense"},
    "bm25": {"chunking": "default", "embedder": "default", "method": "bm25"},
}
SYSTEMS = list(PANEL)
USING_C400 = {"dense-c400"}
USING_SEQ64 = {"dense-seq64"}
SHORT_DOCS = 6  # documents shorter than both chunkings: one identical chunk in each


def quoting_set(project) -> list[dict]:
    """Another tool's question set, as careless as they come: 10 words of a document each, quoted
    ("What does the documentation say about ...?"), in the hand-written JSONL format."""
    rows = []
    for path in sorted((project / "data" / "sample" / "sqlite").glob("*.md")):
        words = path.read_text(encoding="utf-8").split()
        for start in range(40, len(words) - 10, 150):
            quote = " ".join(words[start : start + 10])
            rows.append(
                {"question": f"What does the documentation say about {quote}?", "doc_id": path.name, "evidence": quote}
            )
    return rows


def ran_stages(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")} - {"check_params"}


def test_a_panel_is_scored_in_one_repro_and_one_edited_system_reruns_alone(tmp_path):
    project = copy_project(tmp_path / "project", panel=True)
    for i in range(SHORT_DOCS):
        (project / "data" / "sample" / "sqlite" / f"short{i}.md").write_text(f"Short note {i} about page {i * 7}.\n")
    quotes = quoting_set(project)
    (project / "data" / "quotes.jsonl").write_text("".join(json.dumps(row) + "\n" for row in quotes))
    set_params(project, panel=PANEL, **{"generate.imported": {"quotes": "data/quotes.jsonl"}})
    first = dvc("repro", cwd=project)
    each_text_embedded_once_per_embedder(project)
    assert {"retrieve", "score", "leaderboard", "judge"} <= ran_stages(first.stdout)
    for stage in ("retrieve", "score"):  # one stage each for the whole panel, every system computed
        assert f"{stage}: {len(SYSTEMS)} of {len(SYSTEMS)} computed" in first.stdout

    board = json.loads((project / "metrics" / "leaderboard.json").read_text())
    assert board["systems"] == SYSTEMS and board["correction"].startswith("Holm")
    # the slice's hand-written questions, and the imported set beside them: the headline is the reference's
    assert set(board["question_sets"]) == {"all", "hand-written", "quotes"} and board["headline_set"] == "hand-written"
    assert board["question_sets"]["quotes"]["n_questions"] == len(quotes)
    assert "leaderboard: best on mrr of hand-written: " in first.stdout
    mrr = board["question_sets"]["all"]["metrics"]["mrr"]
    for system in SYSTEMS:
        row = mrr["systems"][system]
        assert row["ci_low"] <= row["mean"] <= row["ci_high"]
        own = json.loads((project / "metrics" / "panel" / system / "metrics.json").read_text())
        assert row["mean"] == pytest.approx(own["mrr"])
        assert system == mrr["best"] or {"p_vs_best", "p_holm", "differs_from_best"} <= set(row)
    assert mrr["systems"]["default"]["mean"] == pytest.approx(read_metrics(project)["mrr"])  # show's and compare's
    curve = pd.read_csv(project / "metrics" / "plots" / "recall_at_k.csv")
    assert set(curve["system"]) == set(SYSTEMS) and curve.groupby("system")["recall"].is_monotonic_increasing.all()
    bars = pd.read_csv(project / "metrics" / "plots" / "first_relevant_rank_histogram.csv")
    assert (
        set(bars["system"]) == set(SYSTEMS)
        and (bars.groupby("system")["questions"].sum() == bars["questions"].sum() / len(SYSTEMS)).all()
    )
    table = pd.read_csv(project / "metrics" / "leaderboard.csv")
    assert set(table["system"]) == set(SYSTEMS) and "p_holm" in table
    assert "Holm" in (project / "metrics" / "leaderboard.md").read_text()
    per_question = pd.read_csv(project / "metrics" / "panel" / "bm25" / "per_question.csv")
    assert {"question_set", "document", "folder", "length_bucket"} <= set(per_question.columns)
    # the imported set is certified against the hand-written questions, its verdict printed by the
    # stage and by `show`, and kept (as a number) in the headline
    certificate = json.loads((project / "metrics" / "certificate.json").read_text())
    assert (
        certificate["available"]
        and certificate["reference"] == "hand-written"
        and list(certificate["sets"]) == ["quotes"]
    )
    verdict = certificate["sets"]["quotes"]["verdict"]
    assert verdict in {"agrees", "disagrees", "undetermined"}
    line = f"certificate: quotes ({len(quotes)}) "
    assert line in first.stdout
    headline = json.loads((project / "metrics" / "headline.json").read_text())
    assert headline["certificate"]["quotes"]["verdict"] == {"agrees": 1, "undetermined": 0, "disagrees": -1}[verdict]
    shown = run(["retrieval-bench", "show"], cwd=project).stdout
    assert "panel leaderboard" in shown and all(system in shown for system in SYSTEMS) and line in shown
    # the measured outputs exist on a run from scratch: the costs, the decision table (show's first line), the plot
    assert all((project / path).is_file() for path in paths.MEASURED_OUTPUTS) and shown.startswith("Ship ")

    git("add", "-A", cwd=project)
    git("commit", "-qm", "panel", cwd=project)
    shutil.rmtree(project / ".dvc" / "cache" / "runs", ignore_errors=True)  # nothing may be restored from the run-cache
    set_params(project, **{"panel.bm25": {"chunking": "default", "embedder": "default", "method": "bm25", "depth": 20}})
    again = dvc("repro", cwd=project)  # score.k goes to 20
    # judge depends on every system's run (judge.pool may name any); off, it pools nothing at once
    assert ran_stages(again.stdout) == {"retrieve", "judge", "score", "leaderboard"}
    assert (
        f"retrieve: 1 of {len(SYSTEMS)} computed" in again.stdout
        and f"score: 1 of {len(SYSTEMS)} computed" in again.stdout
    )
    assert "is cached - skipping run" not in again.stdout
    # depth 20, and a tie at the cutoff kept whole (retrieval/run.py): past 20 only chunks tied with the 20th
    run_at_20 = pd.read_parquet(project / "data" / "panel" / "bm25" / "run.parquet").sort_values(["qid", "rank"])
    assert run_at_20.groupby("qid").size().min() == 20
    for _, rows in run_at_20.groupby("qid"):
        assert (rows["score"].iloc[19:] == rows["score"].iloc[19]).all()

    # One chunking edited: it is cut again, embedded by the embedders its systems use, and those systems computed.
    git("commit", "-qam", "bm25 at depth 20", cwd=project)
    shutil.rmtree(project / ".dvc" / "cache" / "runs", ignore_errors=True)
    set_params(project, **{"chunkings.c400": {"chars": 300, "overlap": 50}})
    rechunked = dvc("repro", cwd=project)
    panel = {"retrieve", "score"}
    assert ran_stages(rechunked.stdout) == {"chunk@c400", "embed_corpus@c400-default", *panel, "judge", "leaderboard"}
    for stage in panel:  # the systems on c400 computed, the others copied back
        assert f"{stage}: {len(USING_C400)} of {len(SYSTEMS)} computed" in rechunked.stdout

    # One embedder edited: the chunking its systems use and the questions embedded again with it, its systems computed.
    git("commit", "-qam", "c400 at 300 characters", cwd=project)
    shutil.rmtree(project / ".dvc" / "cache" / "runs", ignore_errors=True)
    set_params(project, **{"embedders.seq64": {"max_seq_length": 48}})
    reembedded = dvc("repro", cwd=project)
    embeds = {"embed_corpus@default-seq64", "embed_questions@seq64"}
    assert ran_stages(reembedded.stdout) == {*embeds, *panel, "judge", "leaderboard"}
    for stage in panel:
        assert f"{stage}: {len(USING_SEQ64)} of {len(SYSTEMS)} computed" in reembedded.stdout


def each_text_embedded_once_per_embedder(project):
    """Two chunkings sharing chunk texts (the short documents are one chunk in each): the default
    embedder's encoder saw every distinct chunk text of both once, whichever chunking holds it (the
    second chunking's copy came from the first's cache); seq64, which no system pairs with c400,
    embedded the default chunking alone (issue 42: a pair no system uses is not embedded)."""
    texts = {
        chunking: set(pd.read_parquet(project / "data" / "chunkings" / chunking / "chunks.parquet")["text"])
        for chunking in ("default", "c400")
    }
    assert len(texts["default"] & texts["c400"]) >= SHORT_DOCS
    for embedder, chunkings in (("default", ("default", "c400")), ("seq64", ("default",))):
        infos = [json.loads((project / paths.embedding_info(chunking, embedder)).read_text()) for chunking in chunkings]
        assert sum(info["embedded"] for info in infos) == len(set().union(*(texts[c] for c in chunkings)))
    assert not (project / paths.embedding_info("c400", "seq64")).exists()
