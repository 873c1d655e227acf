"""retrieval-bench: measure a retriever on a golden set of (question -> relevant chunk) pairs.

The Python API (retrieval_bench.api) is loaded on first use, so `import retrieval_bench` and the
`retrieval-bench` command stay fast:

    import retrieval_bench as rb
    scores = rb.score("data/goldenset.jsonl", "data/panel/default/run.parquet", chunks="data/chunkings/default/chunks.parquet")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrieval_bench.api import Comparison, Scores, compare, load_params, read_golden, read_run, score
    from retrieval_bench.core.errors import InputError

__all__ = [
    "Comparison",
    "InputError",
    "Scores",
    "__version__",
    "compare",
    "load_params",
    "read_golden",
    "read_run",
    "score",
]
_API = {"Comparison", "Scores", "compare", "load_params", "read_golden", "read_run", "score"}


def __getattr__(name: str) -> Any:
    if name in _API:
        from retrieval_bench import api

        return getattr(api, name)
    if name == "InputError":
        from retrieval_bench.core.errors import InputError

        return InputError
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("retrieval-bench")
        except PackageNotFoundError:  # run from a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module 'retrieval_bench' has no attribute {name!r}")


def __dir__() -> list[str]:  # tab completion in a notebook lists the lazy names too
    return sorted({*globals(), *__all__})
