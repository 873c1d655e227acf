"""The two embed stages under the real `dvc repro`: each embeds only what changed (counted, from
the stages' own output), the caches (local, under .dvc/tmp) prune to what the data needs without
changing a stage, and a fresh clone that pulls from a local DVC remote embeds nothing: the
stages' outputs, and DVC's run-cache for a state the teammate ran, come from the remote."""

from __future__ import annotations

import json
import os
import random
import re
import sys

import numpy as np
import pytest
from conftest import copy_project, dvc, git, run, set_params

from retrieval_bench.core import paths

pytestmark = pytest.mark.pipeline
N_CHUNKS, N_QUESTIONS = 400, 30
# The lines the two stages print for the default chunking and embedder (the single system's).
CORPUS, QUESTIONS = "embed_corpus default with default", "embed_questions with default"
WORDS = (
    "page cache journal index btree vacuum checkpoint writer reader lock schema table column row "
    "query planner statistics trigger view transaction savepoint rollback commit pragma wal"
).split()


def synthetic_text(rng: random.Random, i: int) -> str:
    return f"Note {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 40))) + "."


def write_corpus(folder, chunks: dict[str, str], queries: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "chunks.jsonl").write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in chunks.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()))
    (folder / "qrels.tsv").write_text("".join(f"{q}\tc{int(q[1:]) * 7 % N_CHUNKS:04d}\t1\n" for q in queries))


def embedded(output: str, stage: str) -> tuple[int, int] | None:
    """(from the cache, embedded) as the stage printed them (`stage`: its line's start, CORPUS or
    QUESTIONS); None if the stage did not run."""
    found = re.search(rf"^{re.escape(stage)}: .*?(\d+) from the cache, (\d+) embedded", output, re.MULTILINE)
    return (int(found.group(1)), int(found.group(2))) if found else None


def repro(project, *extra: str) -> str:
    """As `make repro`: the source stamped first (check_params sees a source edited in place), then DVC."""
    run([sys.executable, "-m", "stages.check_params"], cwd=project)
    return dvc("repro", *extra, "embed_corpus", "embed_questions", cwd=project).stdout


def test_edits_embed_only_what_changed_and_a_pulled_clone_embeds_nothing(tmp_path):
    rng = random.Random(12)
    chunks = {f"c{i:04d}": synthetic_text(rng, i) for i in range(N_CHUNKS)}
    queries = {
        f"q{i}": f"what does note {i * 7 % N_CHUNKS} say about the " + rng.choice(WORDS) for i in range(N_QUESTIONS)
    }
    project = copy_project(tmp_path / "project", docs=[])
    source = project / "data" / "synthetic"
    write_corpus(source, chunks, queries)
    set_params(project, **{"load.source": "data/synthetic", "generate.max_questions": 0})
    git("add", "-A", cwd=project)
    git("commit", "-qm", "synthetic corpus", cwd=project)

    first = repro(project)
    assert embedded(first, CORPUS) == (0, N_CHUNKS)
    # embed_corpus embedded the questions too, with the model it had loaded: embed_questions loads none.
    assert embedded(first, QUESTIONS) == (N_QUESTIONS, 0)
    # What embedding costs is timed on the stage's own batches: 400 chunks in 7 batches of 64, the
    # first a warm-up (embedding.embed_cost); no model is loaded again to time it.
    cost = json.loads((project / paths.embed_cost_of("default", "default")).read_text())
    assert cost["timed_on"] == "the stage's own batches" and cost["chunks_timed"] == N_CHUNKS - 64
    run([sys.executable, "-m", "dvc", "remote", "add", "-d", "store", str(tmp_path / "remote")], cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-qm", "embedded", cwd=project)
    dvc("push", "--run-cache", cwd=project)  # this state's outputs and run-cache entries: a teammate can restore it

    # 1% of the chunks edited: 1% embedded, and the questions are not touched. Chunks no question
    # labels: the golden set carries where each labelled chunk lies (relevant_spans), so editing a
    # labelled chunk changes it (and embed_questions reruns, embedding nothing).
    edited = list(chunks)[1::100]
    labelled = {f"c{int(q[1:]) * 7 % N_CHUNKS:04d}" for q in queries}
    assert not labelled & set(edited)
    for key in edited:
        chunks[key] += " Edited."
    write_corpus(source, chunks, queries)
    output = repro(project)
    assert embedded(output, CORPUS) == (N_CHUNKS - len(edited), len(edited))
    assert embedded(output, QUESTIONS) is None and "Running stage 'embed_questions@" not in output
    cost = json.loads((project / paths.embed_cost_of("default", "default")).read_text())
    assert cost["timed_on"] == "a sample of the first 8 chunks"  # 4 chunks embedded: too few to time

    # Two questions reworded, three added: five embedded, no corpus text.
    reworded = {"q1": " exactly", "q2": " in practice"}
    for qid, words in reworded.items():
        queries[qid] += words
    added = {f"q{i}": f"which note mentions {WORDS[i % len(WORDS)]} first" for i in range(N_QUESTIONS, N_QUESTIONS + 3)}
    queries.update(added)
    write_corpus(source, chunks, queries)
    output = repro(project)
    assert embedded(output, QUESTIONS) == (N_QUESTIONS - len(reworded), len(reworded) + len(added))
    assert embedded(output, CORPUS) is None and "Running stage 'embed_corpus@" not in output

    # Prune drops the vectors of the edited-away texts; the caches are no DVC outputs: no stage changed.
    pruned = run([sys.executable, "-m", "retrieval_bench.cli", "cache", "prune"], cwd=project).stdout
    assert f"{paths.CORPUS_EMBEDDING_CACHE}: kept {N_CHUNKS} vectors, dropped {len(edited)}," in pruned
    assert f"{paths.QUESTION_EMBEDDING_CACHE}: kept {len(queries)} vectors, dropped {len(reworded)}," in pruned
    assert "changed" not in dvc("status", "embed_corpus", "embed_questions", cwd=project).stdout

    git("add", "-A", cwd=project)
    git("commit", "-qm", "edits", cwd=project)
    dvc("push", "--run-cache", cwd=project)

    clone = tmp_path / "clone"
    git("clone", "-q", str(project), str(clone), cwd=tmp_path)
    output = repro(clone, "--pull")
    assert embedded(output, CORPUS) in (None, (N_CHUNKS, 0))
    assert embedded(output, QUESTIONS) in (None, (len(queries), 0))
    for name in (paths.CORPUS_VECTORS, paths.QUESTION_VECTORS):
        np.testing.assert_array_equal(np.load(clone / name), np.load(project / name))

    # The teammate goes back to the chunks as first embedded: DVC's run-cache and that state's
    # outputs, pushed after the first run, restore the stage (the embedding cache is local: the clone has none).
    for key in edited:
        chunks[key] = chunks[key].removesuffix(" Edited.")
    write_corpus(clone / "data" / "synthetic", chunks, queries)
    output = repro(clone, "--pull")
    assert embedded(output, CORPUS) is None, output
    assert "Stage 'embed_corpus@default-default' is cached - skipping run, checking out outputs" in output
    assert not (clone / paths.CORPUS_EMBEDDING_CACHE).exists()


def test_a_local_model_retrained_in_place_re_embeds_and_an_untouched_one_does_not(tmp_path):
    """A model folder named in embed.model, retrained where it lies: no param moved, and DVC kept the
    old model's vectors (and every metric after them) as up to date. Its stamp moves with its files;
    a new modification time alone, or a file that decides nothing (an ONNX export, a README), does not."""
    import shutil

    from retrieval_bench.embedding.model_source import bundled_model_path

    rng = random.Random(5)
    n_chunks, n_questions = 24, 6
    chunks = {f"c{i:04d}": synthetic_text(rng, i) for i in range(n_chunks)}
    queries = {
        f"q{i}": f"what does note {i * 7 % n_chunks} say about the {rng.choice(WORDS)}" for i in range(n_questions)
    }
    project = copy_project(tmp_path / "project", docs=[])
    write_corpus(project / "data" / "synthetic", chunks, queries)
    (project / "data" / "synthetic" / "qrels.tsv").write_text(
        "".join(f"{q}\tc{int(q[1:]) * 7 % n_chunks:04d}\t1\n" for q in queries)
    )
    model = project / "models" / "mini"
    shutil.copytree(bundled_model_path(), model)
    set_params(project, **{"load.source": "data/synthetic", "generate.max_questions": 0, "embed.model": "models/mini"})
    git("add", "-A", cwd=project)
    git("commit", "-qm", "a local model", cwd=project)
    assert embedded(repro(project), CORPUS) == (0, n_chunks)

    (model / "README.md").write_text("retrained? no: only the card\n")
    (model / "onnx").mkdir(exist_ok=True)
    (model / "onnx" / "model.onnx").write_bytes(b"an export beside the model")
    for path in model.rglob("*"):
        os.utime(path, ns=(1, 2))
    output = repro(project)
    assert "Running stage 'embed_corpus@" not in output and "Running stage 'embed_questions@" not in output, output

    pooling = model / "1_Pooling" / "config.json"  # "retrained": CLS pooling instead of the mean, other vectors
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(config))
    before = np.load(project / paths.CORPUS_VECTORS)
    output = repro(project)
    assert embedded(output, CORPUS) == (0, n_chunks), output  # a new fingerprint: nothing from the cache
    assert "Running stage 'embed_questions@" in output
    assert not np.allclose(np.load(project / paths.CORPUS_VECTORS), before)
    assert "changed" not in dvc("status", "embed_corpus", "embed_questions", cwd=project).stdout
