"""The house rules a newcomer relies on, checked on the source: the LLM layer is imported only by
the golden-set build, stages are thin I/O shells, every artefact path is spelled once."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "retrieval_bench"
STAGES = ROOT / "stages"
MAX_STAGE_LINES = 60
# The golden-set build and relevance judging are the clients of the LLM layer.
MAY_IMPORT_LLM = {"goldenset/selection.py", "goldenset/assemble.py", "evaluation/judging.py"}
ARTEFACT = re.compile(r"^(data|metrics)/\S+$")


def python_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py")) + sorted(STAGES.glob("*.py"))


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def label(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix() if PACKAGE in path.parents else path.relative_to(ROOT).as_posix()


def test_only_the_goldenset_build_imports_the_llm_layer():
    offenders = []
    for path in python_files():
        name = label(path)
        if name.startswith("llm/") or name in MAY_IMPORT_LLM or name == "stages/generate_goldenset.py":
            continue
        if any(module == "retrieval_bench.llm" or module.startswith("retrieval_bench.llm.") for module in imports(path)):
            offenders.append(name)
    assert offenders == []


def test_stages_are_thin_io_shells():
    lengths = {path.name: len(path.read_text().splitlines()) for path in STAGES.glob("*.py")}
    assert {name: n for name, n in lengths.items() if n > MAX_STAGE_LINES} == {}


def test_every_artefact_path_is_spelled_once_in_paths_py():
    spelled = []
    for path in python_files():
        if path.name == "paths.py" or path.name == "params.py":  # params.py: the defaults of two user-set paths
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and ARTEFACT.match(node.value):
                spelled.append(f"{label(path)}: {node.value}")
    assert spelled == []
