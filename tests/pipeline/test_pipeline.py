"""The real `dvc repro` in a fresh repository: metrics, caching, and re-running only what changed."""

import json

import pandas as pd
import pytest
from conftest import dvc, git, read_metrics, set_params

from retrieval_bench.core import paths

pytestmark = pytest.mark.pipeline


def ran_stages(output: str) -> set[str]:
    """The stages that ran, besides check_params, which runs whenever params.yaml changed."""
    ran = {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")}
    return ran - {"check_params"}


def test_repro_caches_and_reruns_only_what_changed(reproduced_template, reproduced):
    assert ran_stages(reproduced_template.output) == {
        "load_chunks",
        "chunk@default",
        "generate_goldenset",
        "embed_corpus@default-default",
        "embed_questions@default",
        "retrieve",
        "judge",
        "score",
        "leaderboard",
    }  # a panel of its default system alone
    metrics = read_metrics(reproduced)
    expected = {f"recall@{k}" for k in (1, 3, 5, 10, 20)} | {"mrr", "ndcg@10", "n_questions", "n_chunks"}
    assert expected <= set(metrics)
    assert metrics["n_questions"] >= 10 and metrics["n_chunks"] >= 50
    recalls = [metrics[f"recall@{k}"] for k in (1, 3, 5, 10, 20)]
    assert all(0 <= r <= 1 for r in recalls) and recalls == sorted(recalls)
    assert 0 < metrics["mrr"] <= 1 and 0 < metrics["ndcg@10"] <= 1
    per_question = pd.read_csv(reproduced / "metrics" / "panel" / "default" / "per_question.csv")
    assert len(per_question) == metrics["n_questions"]
    assert per_question["reciprocal_rank"].mean() == pytest.approx(metrics["mrr"])
    # the embedding cost, timed by the embed stage: 68 chunks in batches of 64 are too few batches for
    # its own (embedding.embed_cost), so it timed a sample of costs.embed_texts (8) in costs.rounds (1)
    cost = json.loads((reproduced / paths.embed_cost_of("default", "default")).read_text())
    assert cost["timed_on"] == "a sample of the first 8 chunks" and cost["repeats"] == 1 and cost["wall"]["median"] > 0

    assert ran_stages(dvc("repro", cwd=reproduced).stdout) == set()  # nothing changed, nothing runs
    git("add", "-A", cwd=reproduced)
    git("commit", "-qm", "baseline", cwd=reproduced)

    set_params(reproduced, **{"score.k": [1, 2, 5]})
    assert ran_stages(dvc("repro", cwd=reproduced).stdout) == {"score", "leaderboard"}
    diff = dvc("metrics", "diff", "HEAD", "--json", cwd=reproduced).stdout  # the headline: recall@10 is gone
    headline = json.loads(diff)[paths.headline_of("default")]
    assert headline["recall@10"]["new"] is None and headline["recall@5"]["old"] is None
    every = dvc("metrics", "diff", "HEAD", "--json", "--targets", "metrics/panel/default/metrics.json", cwd=reproduced)
    assert '"recall@2"' in every.stdout and '"recall@20"' in every.stdout  # a new metric and a removed one

    # No vector or score depends on the batch size; the embedding cost does: the embed stage times it
    # again (its vectors from the embedding cache, the same bytes, so nothing after it reruns but the
    # leaderboard, which reads the new cost).
    set_params(reproduced, **{"embed.batch_size": 7})
    assert ran_stages(dvc("repro", cwd=reproduced).stdout) == {"embed_corpus@default-default", "leaderboard"}
    assert json.loads((reproduced / paths.embedding_info("default", "default")).read_text())["embedded"] == 0
    cost = json.loads((reproduced / paths.embed_cost_of("default", "default")).read_text())
    assert cost["batch_size"] == 7 and cost["timed_on"].startswith("a sample of the first ")
    board = json.loads((reproduced / paths.COSTS).read_text())["systems"]["default"]
    assert board["embed_seconds_per_1000"] == cost["wall"]["median"]


def stages_to_rerun(project) -> set[str]:
    """The stages `dvc status` finds changed (their own deps or params), besides check_params."""
    return set(json.loads(dvc("status", "--json", cwd=project).stdout)) - {"check_params"}


def test_editing_a_metric_definition_reruns_only_score(reproduced):
    """A stage depends on the packages it imports (dvc.yaml, .ci/dvc_deps.py): an edit to any module
    of one reruns it, bytecode written beside the modules reruns nothing (.dvcignore)."""
    assert stages_to_rerun(reproduced) == set()
    package = reproduced / "src" / "retrieval_bench"
    (package / "evaluation" / "score" / "__pycache__").mkdir(exist_ok=True)
    (package / "evaluation" / "score" / "__pycache__" / "metrics.cpython-312.pyc").write_bytes(b"bytecode")
    assert stages_to_rerun(reproduced) == set()

    store_base = package / "stores" / "base.py"
    original = store_base.read_text()
    store_base.write_text(original + "# an edit to the store adapters' shared part\n")
    assert stages_to_rerun(reproduced) == {
        "load_chunks",
        "embed_corpus@default-default",
        "retrieve",
        "leaderboard",
    }  # those that may read a vector store (the leaderboard times each system's retrieval)
    store_base.write_text(original)

    metrics = package / "evaluation" / "score" / "metrics.py"
    metrics.write_text(metrics.read_text() + "# a metric definition edited\n")
    assert stages_to_rerun(reproduced) == {"score", "leaderboard"}  # the leaderboard draws rank histograms
    output = dvc("repro", "--no-run-cache", cwd=reproduced).stdout  # a stage whose deps changed runs, never restored
    assert ran_stages(output) == {
        "score",
        "leaderboard",
    }  # not the golden set, retrieve (minutes at scale), judge


def test_the_costs_rounds_rerun_the_leaderboard_and_the_embed_stages_timing_alone(reproduced):
    """costs.rounds changes how the costs are timed: the search's by the leaderboard, the embedding's
    by the embed stage (its vectors served from the cache), nothing else."""
    set_params(reproduced, **{"costs.rounds": 2})
    assert stages_to_rerun(reproduced) == {"embed_corpus@default-default", "leaderboard"}


def test_rechunking_reruns_load_keeps_the_golden_set_and_every_question_scorable(reproduced):
    # Hand-written questions whose evidence is a whole 800-character chunk: at 400 characters no
    # chunk holds half of it, but every chunk inside it is wholly evidence, so each stays scorable.
    from retrieval_bench.corpus.load import chunk_documents, read_documents_folder

    documents = read_documents_folder(reproduced / "data" / "sample" / "sqlite")
    chunks = chunk_documents(documents, 800, 100)
    picked = chunks.iloc[::4]
    records = [
        {
            "qid": f"whole-{i}",
            "question": f"What does passage {i} of {row.doc_id} explain?",
            "doc_id": row.doc_id,
            "evidence": row.text,
        }
        for i, row in enumerate(picked.itertuples())
    ]
    (reproduced / "data" / "whole_chunks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    set_params(
        reproduced, **{"generate.handwritten": "data/whole_chunks.jsonl", "generate.max_questions": len(records)}
    )
    dvc("repro", cwd=reproduced)
    before = pd.read_csv(reproduced / "metrics" / "panel" / "default" / "per_question.csv")
    metrics_before = read_metrics(reproduced)
    assert metrics_before["n_questions"] == len(records) and metrics_before["n_questions_without_relevant_chunk"] == 0
    git("add", "-A", cwd=reproduced)
    git("commit", "-qm", "800", cwd=reproduced)

    set_params(reproduced, **{"load.chunking.chars": 400})  # the chunk length alone (DVC ignores keys named size)
    status = dvc("status", cwd=reproduced).stdout
    assert "chunk@default" in status and "load_chunks" not in status and "generate_goldenset" not in status
    output = dvc("repro", cwd=reproduced)
    assert ran_stages(output.stdout) == {
        "chunk@default",
        "embed_corpus@default-default",
        "retrieve",
        "judge",
        "score",
        "leaderboard",
    }  # no new questions, no LLM bill
    after = pd.read_csv(reproduced / "metrics" / "panel" / "default" / "per_question.csv")
    assert set(after["qid"]) == set(before["qid"]) == {r["qid"] for r in records}  # the user's own ids
    metrics_after = read_metrics(reproduced)
    assert metrics_after["n_chunks"] > metrics_before["n_chunks"]
    assert metrics_after["n_questions_without_relevant_chunk"] == 0 and (after["n_relevant"] >= 1).all()
    assert "have no relevant chunk" not in output.stderr

    # A typo'd key fails the next repro with a suggestion, though every stage is cached.
    git("add", "-A", cwd=reproduced)
    git("commit", "-qm", "400", cwd=reproduced)
    set_params(reproduced, **{"score.min_coverge": 0.4})
    failed = dvc("repro", cwd=reproduced, check=False)
    assert failed.returncode != 0
    assert "unknown key params.score.min_coverge; did you mean params.score.min_coverage?" in failed.stderr
