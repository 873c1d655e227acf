"""dvc.yaml lists, under each stage's deps, its script and every package of the library modules it
imports (directly or not), so editing any code a stage runs re-runs that stage: .ci/dvc_deps.py
writes them (`make deps`), and this checks that the file is current. A package is a folder without
sub-packages; .dvcignore keeps bytecode out of a folder dep's hash."""

import importlib.util
import re
from pathlib import Path

import pytest
import yaml
from conftest import dvc, git

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("dvc_deps", ROOT / ".ci" / "dvc_deps.py")
dvc_deps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dvc_deps)


def test_every_stage_runs_its_own_script_with_arguments_every_item_spells():
    """One script per stage, named after it (stages/NAME.py runs as `python -m stages.NAME`); a
    foreach stage passes its ${key} (or its items' ${item.FIELD}s), and a matrix stage only ${item.AXIS} of its own axes (DVC
    fails a stage whose item lacks a name its command uses)."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    scripts = {path.stem for path in (ROOT / "stages").glob("*.py")} - {"__init__"}
    assert set(stages) == scripts
    for name, stage in stages.items():
        command = stage.get("do", stage)["cmd"].split()
        assert command[:3] == ["python", "-m", f"stages.{name}"], name
        arguments = command[3:]
        if "foreach" in stage and not arguments[0].startswith("${item."):
            assert arguments == ["${key}"], name
        elif "foreach" in stage:  # a mapping of items: each argument one of its fields
            assert all(re.fullmatch(r"\$\{item\.\w+\}", argument) for argument in arguments), name
        elif "matrix" in stage:
            axes = [re.fullmatch(r"\$\{item\.(\w+)\}", argument) for argument in arguments]
            assert all(axes) and [axis[1] for axis in axes] == list(stage["matrix"]), name
        else:
            assert arguments == [], name


def test_every_stage_depends_on_all_the_code_it_runs():
    text = (ROOT / "dvc.yaml").read_text()
    assert dvc_deps.rewritten(text) == text, "dvc.yaml's code deps are not current: run `make deps`"
    stages = yaml.safe_load(text)["stages"]
    for name, stage in stages.items():
        deps = [dep if isinstance(dep, str) else next(iter(dep)) for dep in stage.get("do", stage)["deps"]]
        assert [dep for dep in deps if dep.startswith(("src/", "stages/"))] == dvc_deps.code_deps(name)


def test_a_stage_depends_on_each_package_it_imports_once():
    """Every module a stage runs lies in one of its code deps: its package's folder, or its own file
    where that folder has sub-packages (a folder dep takes in everything below it); no dep lies
    inside another, and a stage depends on no package it does not import."""
    for name in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]:
        script, *deps = dvc_deps.code_deps(name)
        modules = {f"src/retrieval_bench/{m.replace('.', '/')}.py" for m in dvc_deps.closure(ROOT / script)}
        for dep in deps:
            assert not any(dep.startswith(other + "/") for other in deps), (name, dep)
            if not dep.endswith(".py"):
                assert not any((sub / "__init__.py").is_file() for sub in (ROOT / dep).iterdir()), (name, dep)
            assert any(module == dep or module.startswith(dep + "/") for module in modules), (name, dep)
        assert all(any(m == dep or m.startswith(dep + "/") for dep in deps) for m in modules), name
    assert dvc_deps.package_dep("llm.transport.errors") == "src/retrieval_bench/llm/transport"
    assert dvc_deps.package_dep("evaluation.stats") == "src/retrieval_bench/evaluation/stats.py"
    assert dvc_deps.package_dep("api") == "src/retrieval_bench/api.py"


def test_the_closure_follows_lazy_imports_and_packages(tmp_path):
    """A module imported inside a function, and `from package import module`, are both deps."""
    script = ROOT / "stages" / "embed_corpus.py"
    needed = dvc_deps.closure(script)
    assert "embedding.embed" in needed  # imported at the top
    assert "embedding.embed_ray" in needed  # imported inside embed.embedding_engine only
    assert "retrieval.ann" in dvc_deps.closure(
        ROOT / "stages" / "retrieve.py"
    )  # from retrieval_bench.retrieval import ann


def test_a_stale_dep_list_is_rewritten():
    text = (ROOT / "dvc.yaml").read_text()
    stale = text.replace("        - src/retrieval_bench/corpus\n", "        - src/retrieval_bench/corpus/chunk.py\n", 1)
    assert stale != text
    assert dvc_deps.rewritten(stale) == text


@pytest.mark.pipeline
def test_bytecode_and_editor_files_in_a_package_rerun_nothing(tmp_path):
    """DVC hashes a folder dep over its files but those .dvcignore names (checked with the real dvc)."""
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text("A = 1\n")
    (tmp_path / "pkg" / "sub" / "b.py").write_text("B = 2\n")
    (tmp_path / ".dvcignore").write_text((ROOT / ".dvcignore").read_text())
    (tmp_path / "dvc.yaml").write_text("stages:\n  s:\n    cmd: cp pkg/a.py out\n    deps: [pkg]\n    outs: [out]\n")
    git("init", "-q", cwd=tmp_path)
    dvc("init", "-q", cwd=tmp_path)
    dvc("repro", cwd=tmp_path)
    for junk in ("__pycache__/a.cpython-312.pyc", "sub/__pycache__/b.cpython-312.pyc", "a.py~", ".a.py.swp"):
        (tmp_path / "pkg" / junk).parent.mkdir(exist_ok=True)
        (tmp_path / "pkg" / junk).write_bytes(b"junk")
    assert "up to date" in dvc("status", cwd=tmp_path).stdout
    (tmp_path / "pkg" / "sub" / "b.py").write_text("B = 3\n")  # a module of a sub-package
    assert "modified" in dvc("status", cwd=tmp_path).stdout
