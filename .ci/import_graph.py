"""The package's import graph, and per top-level package how tangled it is inside: its modules, the
import arrows between them, and its import depth (the longest chain of imports inside the package,
in arrows: 0 when no module of it imports another). The one graph builder: the house rules of
tests/project/test_architecture.py read the same graph.

    python .ci/import_graph.py              # this checkout (the figures of docs/reference/layout.md)
    python .ci/import_graph.py /tmp/before  # another source root, e.g. a `git worktree` of an older commit

The packages are those of the layers (core < stores, llm, embedding < corpus, goldenset, retrieval <
evaluation) and `faces`, the modules beside the package's __init__ (api, cli, show, lockfile, repro_log).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "stores", "llm", "embedding", "corpus", "goldenset", "retrieval", "evaluation", "faces")


def package_dir(root: Path) -> Path:
    return root / "src" / "retrieval_bench"


def imports(path: Path) -> set[str]:
    """Every dotted name a module imports, anywhere in it (inside functions and TYPE_CHECKING too);
    `from a import b` gives both `a` and `a.b`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def module_name(path: Path, package: Path) -> str:
    """`llm.cache` for <package>/llm/cache.py; `llm` for its __init__.py; `__init__` for the package's."""
    parts = list(path.relative_to(package).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def module_paths(root: Path = ROOT) -> dict[str, Path]:
    package = package_dir(root)
    return {module_name(path, package): path for path in sorted(package.rglob("*.py"))}


def package_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the package modules it imports (lazy and TYPE_CHECKING imports too: a circle
    through a type hint is still two modules that cannot be read, or split, one without the other)."""
    modules = module_paths(root)
    graph = {}
    for name, path in modules.items():
        found = set()
        for imported in imports(path):
            dotted = imported.removeprefix("retrieval_bench").lstrip(".")
            if imported.startswith("retrieval_bench") and dotted in modules:
                found.add(dotted)
        graph[name] = found - {name} - {name.rpartition(".")[0]}  # `from pkg.x import y` also names pkg
    return graph


def package_of(module: str) -> str:
    """The top-level package a module is in; the loose modules (api, cli, show, ...) are `faces`."""
    top = module.split(".")[0]
    return top if top in PACKAGES else "faces"


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of a graph (Tarjan), each sorted: a component of more
    than one module is an import circle. Arrows to modules outside the graph are left out."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph[module] & graph.keys()):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of a graph: its strongly connected components of more than one module."""
    return [component for component in components(graph) if len(component) > 1]


def longest_chain(graph: dict[str, set[str]]) -> int:
    """The longest import chain of a graph, in arrows; the modules of a circle count as one."""
    component_of = {module: i for i, component in enumerate(components(graph)) for module in component}
    # Tarjan emits a component after every component it imports: one pass in that order suffices.
    depth: dict[int, int] = {}
    for module in sorted(graph, key=component_of.__getitem__):
        c = component_of[module]
        below = [depth[component_of[d]] + 1 for d in graph[module] & graph.keys() if component_of[d] != c]
        depth[c] = max([depth.get(c, 0), *below])
    return max(depth.values(), default=0)


def figures(graph: dict[str, set[str]]) -> dict[str, dict[str, int]]:
    """Per package: its modules, the import arrows between them, its import depth, and the modules
    in an import circle (0 where the house rules hold)."""
    result = {}
    for package in PACKAGES:
        inside = {
            m: {d for d in deps if package_of(d) == package} for m, deps in graph.items() if package_of(m) == package
        }
        result[package] = {
            "modules": len(inside),
            "arrows": sum(len(deps) for deps in inside.values()),
            "depth": longest_chain(inside),
            "in_circles": sum(len(c) for c in import_cycles(inside)),
        }
    return result


def table(rows: dict[str, dict[str, int]]) -> str:
    """The figures as a Markdown table, one row per package and a total of modules and arrows."""
    circles = any(row["in_circles"] for row in rows.values())
    lines = ["| package | modules | arrows inside | import depth |" + (" in a circle |" if circles else "")]
    lines.append("|---|---:|---:|---:|" + ("---:|" if circles else ""))
    for name, row in rows.items():
        extra = f" {row['in_circles']} |" if circles else ""
        lines.append(f"| {name} | {row['modules']} | {row['arrows']} | {row['depth']} |{extra}")
    total = [sum(row[key] for row in rows.values()) for key in ("modules", "arrows")]
    lines.append(f"| all | {total[0]} | {total[1]} | |" + (" |" if circles else ""))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "root", nargs="?", type=Path, default=ROOT, help="the source root (holding src/retrieval_bench)"
    )
    root = parser.parse_args().root.resolve()
    if not package_dir(root).is_dir():
        print(f"{root}: no src/retrieval_bench here", file=sys.stderr)
        return 1
    print(table(figures(package_graph(root))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
