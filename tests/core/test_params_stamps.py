"""check_params' stamp of generate.style_examples: a content digest, remembered between repros
while the file's size and time stay, as load.source's is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.corpus import source_stamp

MEMO = Path(paths.SOURCE_DIGEST_MEMO)


def test_the_style_examples_stamp_hashes_an_unchanged_file_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".dvc").mkdir()
    examples = tmp_path / "examples.jsonl"
    examples.write_text('{"question": "How do I enable WAL?"}\n')
    hashed, digest = [], source_stamp.content_digest
    monkeypatch.setattr(
        source_stamp, "content_digest", lambda root, listing: hashed.append(root) or digest(root, listing)
    )
    first = source_stamp.style_examples_stamp("examples.jsonl", MEMO)
    assert source_stamp.style_examples_stamp("examples.jsonl", MEMO) == first and len(hashed) == 1
    examples.write_text('{"question": "What is a checkpoint?"}\n')
    os.utime(examples, ns=(1, 2))
    assert source_stamp.style_examples_stamp("examples.jsonl", MEMO)["md5"] != first["md5"] and len(hashed) == 2
    assert source_stamp.style_examples_stamp(None, MEMO) == {"file": None, "md5": None}  # the sample's: unchanged bytes


def stamps(panel: dict, retrieval: dict | None = None) -> dict:
    return source_stamp.panel_settings({"panel": panel, "retrieval": retrieval or {}}, MEMO)


def test_a_run_file_or_retriever_module_is_stamped_in_its_systems_settings(tmp_path, monkeypatch):
    """A run file or Python retriever outside runs/ (DVC's dependency of retrieve), edited in place:
    retrieve "didn't change" and the metrics stayed those of the old run. Its stamp in the system's
    settings file moves with it; Python's bytecode beside the module does not move it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "ext.trec").write_text("q1 Q0 a 1 1.0 x\n")
    (tmp_path / "myretr").mkdir()
    (tmp_path / "myretr" / "__init__.py").write_text("def search(questions, depth):\n    return []\n")
    panel = {
        "file": {"method": "run-file", "run_file": "exports/ext.trec"},
        "plug": {"method": "python", "python": "myretr.search:search"},
        "dense": {"method": "dense"},
    }
    first = stamps(panel)
    assert first[paths.settings_of("dense")] == {"method": "dense"}
    assert list(first[paths.settings_of("file")]["external_inputs"]) == ["exports/ext.trec"]
    assert list(first[paths.settings_of("plug")]["external_inputs"]) == ["myretr", "myretr.py"]
    (tmp_path / "myretr" / "__pycache__").mkdir()
    (tmp_path / "myretr" / "__pycache__" / "x.pyc").write_bytes(b"bytecode")
    assert stamps(panel) == first
    (tmp_path / "exports" / "ext.trec").write_text("q1 Q0 b 1 1.0 x\n")
    (tmp_path / "myretr" / "__init__.py").write_text("def search(questions, depth):\n    return [1]\n")
    again = stamps(panel)
    for system in ("file", "plug"):
        assert again[paths.settings_of(system)] != first[paths.settings_of(system)]
    # runs/ is DVC's own dependency, and a system's export is retrieve's output: neither is stamped
    panel = {
        "mine": {"method": "python", "python": "runs.plug:search"},
        "dense": {"method": "dense", "trec_export": "exports/ext.trec"},
        "again": {"method": "run-file", "run_file": "exports/ext.trec"},
    }
    assert all("external_inputs" not in settings for settings in stamps(panel).values())
    os.mkfifo(tmp_path / "pipe.trec")  # a run file that would never end: refused, naming the key
    with pytest.raises(InputError, match=r"^panel\.fifo\.run_file: .*pipe\.trec"):
        stamps({"fifo": {"method": "run-file", "run_file": "pipe.trec"}})
    # not under runs/ though their names start so: stamped; a folder as a run file: one line
    near = stamps({"a": {"method": "run-file", "run_file": "runs.trec"}})
    assert list(near[paths.settings_of("a")]["external_inputs"]) == ["runs.trec"]
    out = stamps({"a": {"method": "run-file", "run_file": "runs/../exports/ext.trec"}})
    assert list(out[paths.settings_of("a")]["external_inputs"]) == ["runs/../exports/ext.trec"]
    with pytest.raises(InputError, match=r"^panel\.a\.run_file: \.: expected a file, found a folder"):
        stamps({"a": {"method": "run-file", "run_file": "."}})
    # the default system as the user wrote it, in the retrieval section: its error names that key
    default = {"method": "run-file", "run_file": "."}
    with pytest.raises(InputError, match=r"^retrieval\.run_file: \.: expected a file"):
        stamps({"default": default}, retrieval=default)


def test_a_local_model_folder_is_stamped_by_the_files_that_decide_its_outputs(tmp_path, monkeypatch):
    """An embedder's or a cross-encoder's model folder retrained in place moved no param: its stamp
    (data/model_stamps/<embedder>.json, the rerank system's settings file) moves with its weights,
    configs and tokenizer, not with a file that decides nothing or a new modification time alone,
    and is hashed once while unchanged. A model named on the hub is stamped by its name."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".dvc").mkdir()
    model = tmp_path / "models" / "mine"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"weights v1")
    (model / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    hashed, digest = [], source_stamp.content_digest
    monkeypatch.setattr(
        source_stamp, "content_digest", lambda root, listing: hashed.append(root) or digest(root, listing)
    )
    params = {
        "embedders": {"default": {"model": "sentence-transformers/all-MiniLM-L6-v2"}, "mine": {"model": "models/mine"}},
        "panel": {
            "rerank": {"method": "rerank", "rerank": {"model": "models/mine", "first_stage": "dense"}},
            "hub": {
                "method": "rerank",
                "rerank": {"model": "cross-encoder/ms-marco-MiniLM-L6-v2", "first_stage": "dense"},
            },
        },
        "retrieval": {},
    }

    def stamped() -> tuple[dict, dict, dict]:
        models = source_stamp.model_stamps(params, MEMO)
        systems = source_stamp.panel_settings(params, MEMO)
        return (
            models[paths.model_stamp_of("mine")],
            models[paths.model_stamp_of("default")],
            systems[paths.settings_of("rerank")]["rerank_model_files"],
        )

    first, by_name, rerank = stamped()
    assert by_name == {"model": "sentence-transformers/all-MiniLM-L6-v2", "kind": "by name"}
    assert first["kind"] == "local folder" and first["files"] == 2 and rerank == first
    assert "rerank_model_files" not in source_stamp.panel_settings(params, MEMO)[paths.settings_of("hub")]
    assert len(hashed) == 1  # once for both: the memo keeps it while names, sizes and times stay
    (model / "README.md").write_text("a model card\n")
    (model / "onnx").mkdir()
    (model / "onnx" / "model.onnx").write_bytes(b"an export")
    os.utime(model / "model.safetensors", ns=(1, 2))
    assert stamped()[0] == first  # hashed again (a time moved), the same digest
    (model / "model.safetensors").write_bytes(b"weights v2")
    (model / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    retrained, _, rerank = stamped()
    assert retrained["md5"] != first["md5"] and rerank == retrained
