"""core.item_memo: a panel system whose inputs did not change gets its last outputs back, and one
whose inputs, settings or code changed is computed again."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from retrieval_bench.core import paths
from retrieval_bench.core.item_memo import KEPT, ItemMemo


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A DVC project's shape: .dvc/, a dvc.yaml whose stage `work` lists code and an input."""
    (tmp_path / ".dvc").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "code.py").write_text("VERSION = 1\n")
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "a.txt").write_text("a\n")
    stage = {"cmd": "python -m stages.work", "deps": ["src", "inputs"], "outs": ["out"]}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"work": stage}}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    return tmp_path


class Work:
    """An item's computation: writes out/<item>.txt from the input and the settings, counting calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.settings: dict[str, int] = {"depth": 10}

    def inputs(self, item: str) -> tuple[list[str], dict[str, int]]:
        return ["inputs"], self.settings

    @staticmethod
    def outputs(item: str) -> list[str]:
        return [f"out/{item}.txt", f"out/{item}.json"]

    def compute(self, item: str) -> None:
        self.calls.append(item)
        Path("out").mkdir(exist_ok=True)
        text = Path("inputs/a.txt").read_text() + str(self.settings)
        Path(f"out/{item}.txt").write_text(f"{item}: {text}")
        Path(f"out/{item}.json").write_text(f'{{"n": {len(self.calls)}}}')

    def run(self, items: list[str]) -> list[str]:
        return ItemMemo("work").run(items, self.inputs, self.outputs, self.compute)


def wipe_outputs() -> None:
    """What DVC does before it runs a stage without persistent outputs."""
    for path in Path("out").glob("*"):
        path.unlink()


def test_an_unchanged_item_gets_its_outputs_back_byte_for_byte(project, capsys):
    work = Work()
    assert work.run(["x", "y"]) == ["x", "y"]
    assert capsys.readouterr().out.splitlines()[-1] == "work: 2 of 2 computed"  # no "others" when none is
    written = {path.name: path.read_bytes() for path in Path("out").iterdir()}
    wipe_outputs()
    assert work.run(["x", "y"]) == [] and work.calls == ["x", "y"]
    assert {path.name: path.read_bytes() for path in Path("out").iterdir()} == written
    said = capsys.readouterr().out
    assert "work x: unchanged since a run before" in said and "work: 0 of 2 computed, the others unchanged" in said


def test_an_input_a_setting_or_the_code_changed_computes_again(project):
    work = Work()
    work.run(["x"])
    Path("inputs/a.txt").write_text("b\n")  # content
    assert work.run(["x"]) == ["x"]
    (project / "inputs" / "new.txt").write_text("n\n")  # a file added to an input folder
    assert work.run(["x"]) == ["x"]
    work.settings = {"depth": 20}
    assert work.run(["x"]) == ["x"]
    (project / "src" / "code.py").write_text("VERSION = 2\n")  # the stage's code, as dvc.yaml lists it
    assert work.run(["x"]) == ["x"]
    assert work.run(["x"]) == []
    assert Path("out/x.txt").read_text() == "x: b\n{'depth': 20}"


def test_an_edit_undone_is_copied_back_and_only_the_newest_keys_are_kept(project):
    work = Work()
    for depth in range(KEPT + 2):
        work.settings = {"depth": depth}
        work.run(["x"])
    entries = [entry for entry in (project / paths.STAGE_MEMO / "work" / "x").iterdir()]
    assert len(entries) == KEPT
    work.settings = {"depth": KEPT + 1}  # the newest: kept
    assert work.run(["x"]) == []
    work.settings = {"depth": 0}  # the oldest: dropped
    assert work.run(["x"]) == ["x"]


def test_an_item_taken_out_loses_its_entries_and_an_entry_gone_is_computed(project):
    work = Work()
    work.run(["x", "y"])
    work.run(["x"])
    assert sorted(entry.name for entry in (project / paths.STAGE_MEMO / "work").iterdir()) == ["x"]
    for kept in (project / paths.STAGE_MEMO / "work" / "x").rglob("1"):
        kept.unlink()  # half an entry (a cleanup beside this run): computed, not half copied
    assert work.run(["x"]) == ["x"]


def test_outside_a_dvc_project_nothing_is_kept(project):
    (project / ".dvc").rmdir()
    work = Work()
    work.run(["x"])
    assert work.run(["x"]) == ["x"] and not (project / ".dvc").exists()


def test_a_stage_dvc_yaml_does_not_list_keeps_nothing(project):
    work = Work()
    assert ItemMemo("other").run(["x"], work.inputs, work.outputs, work.compute) == ["x"]
    assert ItemMemo("other").run(["x"], work.inputs, work.outputs, work.compute) == ["x"]


def test_the_memo_lives_under_dvc_root_for_an_experiment(project, tmp_path_factory, monkeypatch):
    """`dvc exp run` runs the stage in a copy of the project with DVC_ROOT naming the project."""
    workspace = tmp_path_factory.mktemp("exp")
    for name in ("dvc.yaml",):
        (workspace / name).write_text((project / name).read_text())
    for folder in ("src", "inputs"):
        (workspace / folder).mkdir()
        for file in (project / folder).iterdir():
            (workspace / folder / file.name).write_text(file.read_text())
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("DVC_ROOT", str(project))
    work = Work()
    work.run(["x"])
    assert (project / paths.STAGE_MEMO / "work" / "x").is_dir() and not (workspace / ".dvc").exists()


def test_items_named_by_hand_or_an_experiment_keep_the_others_entries(project, monkeypatch):
    work = Work()
    work.run(["x", "y"])
    ItemMemo("work").run(["x"], work.inputs, work.outputs, work.compute, known=["x", "y"])  # stages.retrieve x
    monkeypatch.setenv("DVC_EXP_BASELINE_REV", "0" * 40)  # a queued experiment with a panel of its own
    work.run(["x"])
    assert sorted(entry.name for entry in (project / paths.STAGE_MEMO / "work").iterdir()) == ["x", "y"]


def test_an_output_an_earlier_item_wrote_is_read_afresh_by_a_later_one(project):
    """A system exporting a TREC run that a later system reads, in one stage run: the file was
    hashed for a system before the exporter rewrote it, and the reader's key sees the new bytes."""

    def inputs(item: str) -> tuple[list[str], None]:
        return (["inputs"] if item == "x" else ["out/x.txt"]), None

    def compute(item: str) -> None:
        Path("out").mkdir(exist_ok=True)
        source = "inputs/a.txt" if item == "x" else "out/x.txt"
        Path(f"out/{item}.txt").write_text(f"{item} from {Path(source).read_text()}")
        Path(f"out/{item}.json").write_text("{}")

    compute("x")  # r's input exists before the first run
    assert ItemMemo("work").run(["r", "x", "y"], inputs, Work.outputs, compute) == ["r", "x", "y"]
    Path("inputs/a.txt").write_text("b\n")
    computed = ItemMemo("work").run(["r", "x", "y"], inputs, Work.outputs, compute)
    assert computed == ["x", "y"] and Path("out/y.txt").read_text() == "y from x from b\n"


def test_a_fresh_clone_adopts_the_committed_outputs_whose_key_and_digests_are_its_own(project, capsys):
    """Outputs in git (cache: false) with their key file: a machine without the memo takes them
    when its inputs give that key and every file is the one the key file records, and computes an
    item whose committed file another run wrote, or whose key is another."""
    import json
    import shutil
    import subprocess

    work = Work()

    def key_file(item: str) -> str:
        return f"keys/{item}.json"

    def run() -> list[str]:
        return ItemMemo("work").run(["x", "y"], work.inputs, work.outputs, work.compute, key_file=key_file)

    def commit(message: str) -> None:
        for command in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message]):
            subprocess.run(["git", *command], cwd=project, check=True, capture_output=True)

    run()
    recorded = json.loads(Path("keys/x.json").read_text())
    assert sorted(recorded["outputs"]) == sorted(work.outputs("x")) and len(recorded["key"]) == 40
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    commit("run")
    committed = {path.name: path.read_bytes() for path in Path("out").iterdir()}
    Path("out/y.txt").write_text("y: written by another run\n")  # committed without its key: mixed runs
    commit("y by hand")
    shutil.rmtree(project / paths.STAGE_MEMO)  # a fresh clone
    wipe_outputs()
    capsys.readouterr()
    assert run() == ["y"] and work.calls == ["x", "y", "y"]
    assert "work x: unchanged since the committed run, its outputs taken from it" in capsys.readouterr().out
    assert Path("out/x.txt").read_bytes() == committed["x.txt"] and Path("out/y.txt").read_bytes() == committed["y.txt"]
    shutil.rmtree(project / paths.STAGE_MEMO)
    work.settings = {"depth": 30}  # another key: the committed outputs are not its
    assert run() == ["x", "y"]
    assert json.loads(Path("keys/x.json").read_text())["key"] != recorded["key"]  # rewritten


def test_an_item_that_fails_leaves_no_key_beside_its_outputs(project):
    work = Work()
    key_file = lambda item: f"keys/{item}.json"  # noqa: E731
    ItemMemo("work").run(["x"], work.inputs, work.outputs, work.compute, key_file=key_file)
    work.settings = {"depth": 99}

    def failing(item: str) -> None:
        raise RuntimeError("bad input")

    with pytest.raises(RuntimeError):
        ItemMemo("work").run(["x"], work.inputs, work.outputs, failing, key_file=key_file)
    assert not Path("keys/x.json").exists()  # never an old key beside outputs this run replaced
