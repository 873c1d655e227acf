"""load_chunks depends on data/source_stamp.json, which stands for load.source (a path DVC could
hash, or a vector store it cannot): an edit re-runs load_chunks, a touch does not, a store server
is re-read on every repro."""

import json
import os
import sys
import time

import pytest
from conftest import copy_project, dvc, run

from retrieval_bench.core.params import load_all_params
from retrieval_bench.corpus.source_stamp import source_stamp, stamps


def test_a_path_is_stamped_by_content_not_by_time(tmp_path):
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("alpha")
    (folder / "sub" / "b.md").write_text("beta")
    first = source_stamp(str(folder))
    assert first["files"] == 2 and first["kind"] == "path"
    os.utime(folder / "a.md", ns=(1, 1))
    assert source_stamp(str(folder)) == first
    (folder / "a.md").write_text("alphA")
    assert source_stamp(str(folder))["md5"] != first["md5"]
    (folder / "a.md").write_text("alpha")
    (folder / "sub" / "b.md").rename(folder / "b.md")  # same bytes under another name: another corpus
    assert source_stamp(str(folder))["md5"] != first["md5"]
    assert source_stamp(str(tmp_path / "absent"))["missing"] is True


def test_a_local_store_is_stamped_by_file_times_and_a_server_always_anew(tmp_path):
    store = tmp_path / "store.lancedb"
    store.mkdir()
    (store / "data.lance").write_bytes(b"\0" * 64)
    address = f"lancedb:{store}?table=chunks"
    first = source_stamp(address)
    assert first["kind"] == "local store" and source_stamp(address) == first
    os.utime(store / "data.lance", ns=(time.time_ns(), time.time_ns() + 10**9))
    assert source_stamp(address) != first
    server = "chroma:http://127.0.0.1:8000?collection=chunks"
    assert source_stamp(server)["kind"] == "store server"
    assert source_stamp(server) != source_stamp(server)


NAMED = {"chunking": "default", "embedder": "default"}  # what every panel system names


def test_the_store_stamp_covers_the_stores_panel_systems_search(tmp_path):
    """retrieve depends on data/store_stamp.json (and a store system's key holds it): a store only a panel
    system searches is in it, so rebuilding that store re-runs the system; with no system searching a store it is constant."""
    store = tmp_path / "panel.lancedb"
    store.mkdir()
    (store / "data.lance").write_bytes(b"\0" * 64)
    address = f"lancedb:{store}?table=chunks"
    params_file = tmp_path / "params.yaml"
    params_file.write_text(
        json.dumps({"panel": {"default": NAMED, "s1": {**NAMED, "method": "store", "store": {"address": address}}}})
    )
    params = load_all_params(params_file)
    first = stamps(params)[1]
    assert first == {address: source_stamp(address)}
    os.utime(store / "data.lance", ns=(time.time_ns(), time.time_ns() + 10**9))
    assert stamps(params)[1] != first
    params_file.write_text(json.dumps({"panel": {"default": NAMED, "s1": {**NAMED, "method": "bm25"}}}))
    assert stamps(load_all_params(params_file))[1] == {"source": None}


@pytest.mark.pipeline
def test_load_chunks_reruns_on_an_edit_and_not_on_a_touch(tmp_path):
    """`make repro` stamps load.source before `dvc repro` (check_params is not always_changed, so
    that `dvc status` is clean after a run): an edit re-runs load_chunks, a touch does not."""
    project = copy_project(tmp_path / "p")
    dvc("repro", "load_chunks", cwd=project)

    def stamped_repro() -> set[str]:  # what `make repro` runs
        run([sys.executable, "-m", "stages.check_params"], cwd=project)
        return ran(dvc("repro", "load_chunks", cwd=project).stdout)

    doc = project / "data" / "sample" / "sqlite" / "wal.md"
    os.utime(doc, ns=(time.time_ns(), time.time_ns() + 5 * 10**9))
    assert "load_chunks" not in stamped_repro()
    doc.write_text(doc.read_text() + "\nA new closing paragraph about checkpoints.\n")
    assert "load_chunks" not in ran(dvc("repro", "load_chunks", cwd=project).stdout)  # DVC alone: not seen
    assert "load_chunks" in stamped_repro()
    stamp = json.loads((project / "data" / "source_stamp.json").read_text())
    assert stamp["source"] == "data/sample/sqlite" and stamp["files"] == 3


def ran(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")}


def test_an_unchanged_folder_is_not_read_again_and_an_edit_is(tmp_path, monkeypatch):
    from retrieval_bench.corpus import source_stamp as module

    folder, memo = tmp_path / "docs", tmp_path / ".dvc" / "tmp" / "memo.json"
    folder.mkdir()
    (folder / "a.md").write_text("alpha")
    memo.parent.parent.mkdir()
    first = source_stamp(str(folder), memo)
    reads = []
    monkeypatch.setattr(module, "content_digest", lambda root, listing: reads.append(root) or (0, "never used"))
    assert source_stamp(str(folder), memo) == first and reads == []  # served from the memo
    (folder / "a.md").write_text("alphA")
    assert source_stamp(str(folder), memo)["md5"] == "never used" and reads == [folder]  # a new time: read again


def test_object_storage_is_stamped_anew_like_a_server():
    stamped = source_stamp("lancedb:s3://bucket/docs.lancedb?table=chunks")
    assert stamped["kind"] == "store server" and "read_at" in stamped
