"""dvc.yaml lists every library module each stage imports (directly or not) under its deps, so
editing any code a stage runs re-runs that stage."""
import ast
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "retrieval_bench"


def imported_modules(path: Path) -> set[str]:
    """retrieval_bench modules imported anywhere in `path` (lazy imports inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("retrieval_bench"):
            if node.module == "retrieval_bench":
                found.update(alias.name for alias in node.names)
            else:
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("retrieval_bench."))
    return found


def closure(script: Path) -> set[str]:
    todo, seen = list(imported_modules(script)), set()
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(imported_modules(PACKAGE / f"{module}.py"))
    return seen


def test_every_stage_depends_on_all_the_code_it_runs():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert set(stages) == {"check_params", "load_chunks", "generate_goldenset", "embed", "score"}
    for name, stage in stages.items():
        script = f"stages/{name}.py"
        assert stage["cmd"] == f"python -m stages.{name}"
        deps = {dep if isinstance(dep, str) else next(iter(dep)) for dep in stage["deps"]}
        assert script in deps
        needed = {f"src/retrieval_bench/{module}.py" for module in closure(ROOT / script)}
        assert needed <= deps, f"{name} lacks deps {sorted(needed - deps)}"
        listed = {dep for dep in deps if dep.startswith("src/")}
        assert listed <= needed, f"{name} lists modules it does not import: {sorted(listed - needed)}"
