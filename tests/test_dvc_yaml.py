"""dvc.yaml lists every library module each stage imports (directly or not) under its deps, so
editing any code a stage runs re-runs that stage."""

import ast
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "retrieval_bench"


def imported_modules(path: Path) -> set[str]:
    """retrieval_bench modules (dotted, below the package) imported anywhere in `path`, lazy
    imports inside functions too; `from retrieval_bench.pkg import module` counts the module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("retrieval_bench"):
            base = node.module.removeprefix("retrieval_bench").lstrip(".")
            for alias in node.names:
                dotted = f"{base}.{alias.name}".lstrip(".")
                if module_path(dotted).is_file():
                    found.add(dotted)
                elif base:
                    found.add(base)
        elif isinstance(node, ast.Import):
            found.update(
                a.name.removeprefix("retrieval_bench.") for a in node.names if a.name.startswith("retrieval_bench.")
            )
    return found


def module_path(dotted: str) -> Path:
    return PACKAGE / (dotted.replace(".", "/") + ".py")


def closure(script: Path) -> set[str]:
    todo, seen = list(imported_modules(script)), set()
    while todo:
        module = todo.pop()
        if module not in seen and module_path(module).is_file():
            seen.add(module)
            todo.extend(imported_modules(module_path(module)))
    return seen


def test_every_stage_depends_on_all_the_code_it_runs():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert set(stages) == {
        "check_params",
        "load_chunks",
        "generate_goldenset",
        "embed_corpus",
        "embed_questions",
        "retrieve",
        "judge",
        "score",
        "retrieve_panel",
        "score_panel",
        "leaderboard",
    }
    for name, stage in stages.items():
        script = f"stages/{name}.py"
        if "foreach" in stage:  # one stage per panel system, named on the command line
            stage = stage["do"]
            assert stage["cmd"] == f"python -m stages.{name} ${{key}}"
        else:
            assert stage["cmd"] == f"python -m stages.{name}"
        deps = {dep if isinstance(dep, str) else next(iter(dep)) for dep in stage["deps"]}
        assert script in deps
        needed = {f"src/retrieval_bench/{module.replace('.', '/')}.py" for module in closure(ROOT / script)}
        assert needed <= deps, f"{name} lacks deps {sorted(needed - deps)}"
        listed = {dep for dep in deps if dep.startswith("src/")}
        assert listed <= needed, f"{name} lists modules it does not import: {sorted(listed - needed)}"
