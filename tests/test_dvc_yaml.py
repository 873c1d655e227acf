"""dvc.yaml lists every library module each stage imports (directly or not) under its deps, so
editing any code a stage runs re-runs that stage: .ci/dvc_deps.py writes them (`make deps`), and
this checks that the file is current."""

import importlib.util
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("dvc_deps", ROOT / ".ci" / "dvc_deps.py")
dvc_deps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dvc_deps)

STAGES = {
    "check_params": "python -m stages.check_params",
    "load_chunks": "python -m stages.load_chunks",
    "chunk": "python -m stages.chunk ${key}",
    "generate_goldenset": "python -m stages.generate_goldenset",
    "embed_corpus": "python -m stages.embed_corpus ${item.chunking} ${item.embedder}",
    "embed_questions": "python -m stages.embed_questions ${key}",
    "retrieve": "python -m stages.retrieve ${key}",  # one per panel system, `default` included
    "judge": "python -m stages.judge",
    "score": "python -m stages.score ${key}",
    "leaderboard": "python -m stages.leaderboard",
}


def test_every_stage_runs_its_own_script():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert set(stages) == set(STAGES)
    for name, stage in stages.items():
        body = stage.get("do", stage)  # foreach: one stage per name, named on the command line
        assert body["cmd"] == STAGES[name]


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
