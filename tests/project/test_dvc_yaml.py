"""dvc.yaml lists every library module each stage imports (directly or not) under its deps, so
editing any code a stage runs re-runs that stage: .ci/dvc_deps.py writes them (`make deps`), and
this checks that the file is current."""

import importlib.util
import re
from pathlib import Path

import yaml

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
        assert [dep for dep in deps if dep.endswith(".py")] == dvc_deps.code_deps(name)


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
    stale = text.replace("      - src/retrieval_bench/corpus/duplicates.py\n", "", 1)
    assert stale != text
    assert dvc_deps.rewritten(stale) == text
