"""The LLM layer is a few rooms on a few floors (#43): each sub-package of llm/ is a room a newcomer
can name (transport, checks, cache, providers, cost, runs), a module imports only its own room, the
rooms below it and core/, no two rooms import each other through any chain, and the tallest stack
of rooms is at most MAX_FLOORS high. Imports are read from the source (lazy and TYPE_CHECKING ones
too: a room that needs another for a type hint still cannot be read without it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The one import reader and graph algorithms (.ci/import_graph.py, as test_architecture uses them).
spec = importlib.util.spec_from_file_location("import_graph", ROOT / ".ci" / "import_graph.py")
import_graph = importlib.util.module_from_spec(spec)
spec.loader.exec_module(import_graph)
LLM = ROOT / "src" / "retrieval_bench" / "llm"
MAX_FLOORS = 6
MAX_ROOMS = 6
# Each room's floor, lowest first: a room imports only rooms on a lower floor.
FLOORS = {
    "transport": 1,
    "checks": 1,
    "cache": 1,
    "providers": 2,
    "cost": 3,
    "runs": 4,
}


def rooms() -> dict[str, list[Path]]:
    """Room -> its modules; the layer's own __init__.py is in no room (it is a docstring)."""
    found: dict[str, list[Path]] = {}
    for path in sorted(LLM.rglob("*.py")):
        parts = path.relative_to(LLM).parts
        if len(parts) > 1:
            found.setdefault(parts[0], []).append(path)
    return found


def imported_rooms(path: Path) -> set[str]:
    """The llm rooms a module imports anywhere in it (`from retrieval_bench.llm.ROOM...` or
    `import retrieval_bench.llm.ROOM...`, inside functions and `if TYPE_CHECKING:` too)."""
    names = import_graph.imports(path)
    prefix = "retrieval_bench.llm."
    return {name.removeprefix(prefix).split(".")[0] for name in names if name.startswith(prefix)}


def room_graph() -> dict[str, set[str]]:
    """Room -> the other rooms its modules import."""
    return {room: set().union(*(imported_rooms(path) for path in paths)) - {room} for room, paths in rooms().items()}


def floors(graph: dict[str, set[str]]) -> int:
    """The most rooms on one import chain (a room alone is 1)."""
    return import_graph.longest_chain(graph) + 1 if graph else 0


def test_every_module_of_the_layer_is_in_a_room_with_a_floor():
    loose = sorted(p.name for p in LLM.glob("*.py") if p.name != "__init__.py")
    assert loose == [], "a module of llm/ belongs in one of its rooms"
    assert sorted(rooms()) == sorted(FLOORS), "a new room of llm/ needs its floor in FLOORS"
    assert len(FLOORS) <= MAX_ROOMS
    assert all((LLM / room / "__init__.py").is_file() for room in FLOORS)


def test_no_room_imports_a_room_that_is_not_below_it():
    upward = sorted(
        f"{path.relative_to(LLM).as_posix()} -> {other}"
        for room, paths in rooms().items()
        for path in paths
        for other in imported_rooms(path)
        if other != room and FLOORS.get(other, MAX_FLOORS + 1) >= FLOORS[room]
    )
    assert upward == []


def test_no_cycle_between_rooms_and_at_most_six_floors():
    graph = room_graph()
    assert import_graph.import_cycles(graph) == []
    assert floors(graph) <= MAX_FLOORS
    assert max(FLOORS.values()) <= MAX_FLOORS


def test_the_floor_checks_find_a_cycle_and_a_tall_stack(tmp_path):
    circles = import_graph.import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert [sorted(circle) for circle in circles] == [["a", "b", "c"]]
    assert floors({str(i): {str(i - 1)} if i else set() for i in range(8)}) == 8
    hinted = tmp_path / "x.py"
    hinted.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from retrieval_bench.llm.runs.tasks import Task\n"
        "def f():\n    import retrieval_bench.llm.cost.guard\n"
        "from retrieval_bench.llm import providers\n"
    )
    assert imported_rooms(hinted) == {"runs", "cost", "providers"}
