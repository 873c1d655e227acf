"""The house rules a newcomer relies on, checked on the source: imports run one way through the
layers and in no circle, the LLM layer is imported only by the golden-set build and the judge,
stages are thin I/O shells, every artefact path is spelled once."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "retrieval_bench"
STAGES = ROOT / "stages"
MAX_STAGE_LINES = 60
MAX_FUNCTION_LINES = 60  # a function a reader holds in view at once
MAX_MODULE_LINES = 450  # a module read in one sitting
# The golden-set build and relevance judging are the clients of the LLM layer (remote.py completes its reply cache;
# evidence.py and style_examples.py escape passages as the prompt does: llm/passage_escape.py).
MAY_IMPORT_LLM = {
    "goldenset/selection.py",
    "goldenset/assemble.py",
    "goldenset/remote.py",
    "goldenset/evidence.py",
    "goldenset/style_examples.py",
    "goldenset/judge.py",
    # params.yaml's provider names are the LLM registry's: checked where the whole file is
    "api.py",
    "stages/check_params.py",
}
ARTEFACT = re.compile(r"^(data|metrics)/\S+$")
# Every module of the package, by package or module (the longest prefix wins), in a layer; a module
# imports only from its own layer or lower ones. A new module must be placed here.
GROUND, SERVICES, DOMAIN, EVALUATION, FACES = range(5)
LAYERS = {
    "core": GROUND,
    "stores": SERVICES,
    "llm": SERVICES,
    "embedding": SERVICES,
    "corpus": DOMAIN,
    "goldenset": DOMAIN,
    "retrieval": DOMAIN,
    "evaluation": EVALUATION,
    "api": FACES,
    "cli": FACES,
    "show": FACES,
    "lockfile": FACES,
    "__init__": FACES,
}


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


def module_name(path: Path) -> str:
    """`llm.cache` for src/retrieval_bench/llm/cache.py; `llm` for its __init__.py; `__init__` for the package's."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def package_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (lazy and TYPE_CHECKING imports too: a circle
    through a type hint is still two modules that cannot be read, or split, one without the other)."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        found = set()
        for imported in imports(path):
            dotted = imported.removeprefix("retrieval_bench").lstrip(".")
            if imported.startswith("retrieval_bench") and dotted in modules:
                found.add(dotted)
        graph[name] = found - {name} - {name.rpartition(".")[0]}  # `from pkg.x import y` also names pkg
    return graph


def layer_of(module: str) -> int | None:
    prefixes = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    return LAYERS[max(prefixes, key=len)] if prefixes else None


def label(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix() if PACKAGE in path.parents else path.relative_to(ROOT).as_posix()


def test_only_the_goldenset_build_imports_the_llm_layer():
    offenders = []
    for path in python_files():
        name = label(path)
        if name.startswith("llm/") or name in MAY_IMPORT_LLM or name == "stages/generate_goldenset.py":
            continue
        if any(
            module == "retrieval_bench.llm" or module.startswith("retrieval_bench.llm.") for module in imports(path)
        ):
            offenders.append(name)
    assert offenders == []


def test_stages_are_thin_io_shells():
    lengths = {path.name: len(path.read_text().splitlines()) for path in STAGES.glob("*.py")}
    assert {name: n for name, n in lengths.items() if n > MAX_STAGE_LINES} == {}


def test_every_artefact_path_is_spelled_once_in_paths_py():
    spelled = []
    for path in python_files():
        if path.name in ("paths.py", "params_schema.py"):  # params_schema.py: the defaults of user-set paths
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and ARTEFACT.match(node.value):
                spelled.append(f"{label(path)}: {node.value}")
    assert spelled == []


def test_every_module_has_a_layer():
    assert sorted(m for m in package_graph() if layer_of(m) is None) == []


def test_imports_run_down_the_layers_only():
    """ground < services < domain < evaluation < faces: editing a metric reruns what scores, not what
    retrieves; editing a store adapter reruns what reads stores, not every stage."""
    upward = [f"{m} -> {d}" for m, deps in package_graph().items() for d in deps if layer_of(d) > layer_of(m)]
    assert sorted(upward) == []


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycles():
    assert import_cycles(package_graph()) == []


def test_the_cycle_finder_finds_a_circle_through_a_type_hint(tmp_path):
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    hinted = tmp_path / "x.py"
    hinted.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from retrieval_bench.llm.settings import Settings\n"
    )
    assert "retrieval_bench.llm.settings" in imports(hinted)


def test_functions_and_modules_stay_short():
    """Every function (methods and nested ones too, def line to last line) and every module of the package."""
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{label(path)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
            ):
                too_long.append(f"{label(path)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert too_long == []


def test_the_ground_is_a_package_and_only_the_faces_stay_loose():
    """The ground layer is core/ (errors, files, the stage command line, paths, params, ...): the
    modules beside the package's __init__ are its faces alone."""
    loose = sorted(path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__")
    assert loose == ["api", "cli", "lockfile", "show"]
    assert all(LAYERS[name] == FACES for name in loose)


def test_no_library_function_outside_the_api_takes_more_than_six_positional_parameters():
    """Settings travel as one frozen object (evaluation.score.settings.Scoring, llm.settings.Settings),
    and anything past the sixth parameter is passed by name: no two adjacent ints swapped unseen."""
    crowded = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "api.py":  # the public API mirrors the command line's options
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                positional = [a.arg for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")]
                if len(positional) > 6:
                    crowded.append(f"{label(path)}:{node.lineno} {node.name}")
    assert crowded == []
