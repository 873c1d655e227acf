"""The schema of params.yaml: every section's keys with their defaults (a key not listed is a
typo, a value has its default's type), the allowed words, and the shape check that fills them in."""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Any

from retrieval_bench.core.errors import InputError, quoted
from retrieval_bench.core.params_sections import DVC_IGNORED_KEYS, REQUEST_TIMEOUT_S

# The defaults double as the schema: a key not listed here is a typo, and a value must have
# the type of its default (an int is accepted where a float is expected; None means optional).
DEFAULTS: dict[str, dict[str, Any]] = {
    "load": {
        "source": "data/sample/sqlite",
        "id_field": "id",
        "text_field": "text",
        "chunking": {"chars": 800, "overlap": 100},
        "split": "test",
        "missing_relevant": "error",
        "duplicates": {"near": True, "min_jaccard": 0.8},
        # HTML blocks the reader drops (corpus.html.parse_selectors); PostgreSQL's docs: .navheader, .navfooter
        "html_skip": "nav, header, footer, [role=navigation], .navheader, .navfooter",
    },
    "generate": {
        "provider": "none",
        "model": "claude-haiku-4-5",
        "base_url": None,
        "max_tokens": 300,
        "max_attempts": 2,
        "max_questions": 300,
        "seed": 0,
        "passages": {"chars": 800, "overlap": 100},
        "handwritten": "data/handwritten_questions.jsonl",
        "style_examples": None,  # a question set whose questions are few-shot style examples (goldenset.style_examples)
        "style_examples_count": 8,
        "imported": {},  # question sets made by other tools, by name: {NAME: FILE} (params_panel.check_imported)
        # the question kinds and their shares, or the word match (params_sections.check_kinds)
        "kinds": {"single": 1.0},
        # how a real or hand-written question that names no kind gets one: rules (build.assigned_kind), or
        # llm (goldenset.kind_classifier: asked of generate.provider's model, cached and priced)
        "kind_classifier": "rules",
        "drop_echo": False,
        "drop_context_dependent": False,
        "drop_near_duplicates": False,
        "near_duplicate_jaccard": 0.7,
        "concurrency": 8,
        "max_retries": 5,
        "max_cost_usd": 5.0,
        "price": None,  # null: the price table by model (llm.cost.prices); or a mapping like PRICE_KEYS
        "batch_poll_seconds": 30.0,
        "timeout_s": REQUEST_TIMEOUT_S,  # seconds per request (a local CPU server may need more)
        "response_format": "text",  # or json_schema: the reply's JSON schema is sent (llm.runs.tasks.Task.schema)
        "temperature": None,  # null: the server's default (not sent)
        "model_alias": None,  # the model's name in the cache key instead of generate.model (a local model folder)
    },
    "embed": {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "batch_size": 64,
        "max_seq_length": None,
        "query_prompt": "",
        "document_prompt": "",
        "backend": "torch",
        "quantize": "none",
        "precision": "fp32",
        "device": None,
        "engine": "local",
        "ray": {
            "address": None,
            "num_actors": 2,
            "num_cpus_per_actor": 1.0,
            "num_gpus_per_actor": 0.0,
            "batch_size": 256,
            "timeout_s": 30.0,
        },
        "corpus_vectors": "embed",
    },
    "retrieval": {
        "method": "dense",
        "depth": 100,
        "rrf_k": 60,
        "weights": {"dense": 1.0, "bm25": 1.0},
        "fusion": "rrf",
        "fusion_depth": 1000,
        "bm25": {"stemmer": "english", "stopwords": "en"},
        "run_file": None,
        "python": None,
        "trec_export": None,
        "rerank": {"model": None, "first_stage": "dense", "candidates": 50, "batch_size": 32},
        "ann": {
            "index": "hnsw",
            "hnsw_m": 32,
            "ef_construction": 200,
            "ef_search": 64,
            "nlist": 256,
            "nprobe": 16,
            "pq_m": 48,
            "pq_bits": 8,
        },
        "store": {"address": None, "search": None, "filter": None},
        "device": "cpu",
    },
    "score": {
        "k": [1, 3, 5, 10, 20],
        "min_coverage": 0.5,
        "ties": "expected",
        "budgets": [2000, 4000],
        "budget_unit": "chars",
        "weights": "none",
    },
    "judge": {
        "enabled": False,
        "provider": "anthropic",
        "model": "claude-haiku-4-5",
        "base_url": None,
        "max_tokens": 64,
        "max_attempts": 2,
        "depth": 5,
        "pool": ["data/panel/default/run.parquet"],  # the default system's run
        "min_grade": 2,
        "ambiguous_at": 3,
        "concurrency": 8,
        "max_retries": 5,
        "max_cost_usd": 5.0,
        "price": None,  # as generate.price: null = the price table by judge.model
        "batch_poll_seconds": 30.0,
        "timeout_s": REQUEST_TIMEOUT_S,
        "response_format": "text",
        "temperature": None,
        "model_alias": None,
    },
    "chunkings": {"default": {}},  # named chunkings, each over load.chunking (checked in _check_named)
    "embedders": {"default": {}},  # named embedders, each over embed's EMBEDDER_KEYS (checked in _check_named)
    # the systems, by name: each a chunking, an embedder and a retrieval override (params_panel.check_panel)
    "panel": {"default": {"chunking": "default", "embedder": "default"}},
    # the certificate (evaluation.certificate.verdict): the verdict that fails the leaderboard stage,
    # the practical margins of a decision pair and of the level, the pairs always decided, the style bar
    "validity": {"fail_on": "none", "margin": 0.03, "level_margin": 0.10, "candidates": [], "max_style_auc": 0.85},
    # the people's review (`retrieval-bench review`): the questions shown (goldenset.review_sample) and the
    # pooled chunks per question; the PPI figures take the reviewed questions as that random sample
    "review": {"sample": 100, "seed": 0, "depth": 5},
    # the cost measurement (search: evaluation.panel.costs.measure; embedding: embedding.embed_cost): the
    # repeats after the warm-up. A median of 5: identical tasks' ranges fail to overlap with probability 2/C(10,5) < 1%
    "costs": {"rounds": 5, "embed_texts": 64},
}

# generate.provider and judge.provider are checked against the LLM layer's registry
# (llm.cost.settings.check_llm_sections), which this ground layer cannot read.
CHOICES = {
    ("load", "missing_relevant"): {"error", "drop"},
    ("generate", "kind_classifier"): {"rules", "llm"},
    ("embed", "backend"): {"torch", "onnx", "openvino"},
    ("embed", "quantize"): {"none", "int8"},
    ("embed", "precision"): {"fp32", "fp16", "bf16"},
    ("embed", "engine"): {"local", "ray"},
    ("embed", "corpus_vectors"): {"embed", "stored"},
    ("retrieval", "method"): {"dense", "bm25", "hybrid", "run-file", "python", "rerank", "ann", "store"},
    ("retrieval", "fusion"): {"rrf", "weighted"},
    ("score", "ties"): {"expected", "pessimistic", "optimistic"},
    ("score", "budget_unit"): {"chars", "words"},
    ("score", "weights"): {"none", "real-mix"},
    ("validity", "fail_on"): {"none", "disagrees", "not-agrees"},
}

# No key may be named as one DVC leaves out of its run-cache key (DVC_IGNORED_KEYS); a params.yaml
# still using one is told the new name.
RENAMED = {"size": "chars"}
# Keys that are gone, and what took their place.
RETIRED = {
    "params.validity.threshold": "the certificate decides agrees / disagrees / undetermined from tests, not a "
    "Kendall tau bar (docs/explanation/golden-set-trust.md)",
    "params.validity.fail_below": "use validity.fail_on: disagrees (or not-agrees)",
}

# Keys that may be null although their default is not (null = no limit).
NULLABLE = {"params.generate.max_cost_usd", "params.judge.max_cost_usd"}
# Mappings whose keys are the user's names, not the schema's; checked on their own (params_panel).
FREE_MAPPINGS = {"params.generate.imported"}
# Keys whose value may be a mapping of the user's names or a word; checked on their own (params_sections).
CHECKED_APART = {"params.generate.kinds"}
# Keys whose value may be a number or a word; checked in _check_values.
MIXED = {"params.retrieval.depth"}

OPTIONAL_TYPES = {("embed", "max_seq_length"): int}


def unknown_key(key: Any, where: str, valid: list[str]) -> str:
    """The one-line message for a key that is not in the schema, with the closest valid key."""
    message = f"unknown key {where}.{key}"
    if f"{where}.{key}" in RETIRED:
        message += f": it is gone; {RETIRED[f'{where}.{key}']}"
    elif key in RENAMED and RENAMED[key] in valid:
        message += (
            f"; it is called {where}.{RENAMED[key]} now (DVC ignores param keys named "
            f"{'/'.join(sorted(DVC_IGNORED_KEYS))}: treeverse/dvc#10296)"
        )
    else:
        close = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.5)
        if close:
            message += f"; did you mean {where}.{close[0]}?"
    return f"{message} (valid keys under {where}: {', '.join(valid)})"


def check_shape(value: Any, default: Any, where: str, path: Path, schema: str | None = None) -> Any:
    """`value` checked against `default`'s shape and types, defaults filled in; errors name `where`,
    the key the user wrote, and `schema` (default: `where`) is the key in DEFAULTS (a panel
    system's keys are checked as the retrieval section's)."""
    schema = schema or where
    if schema in FREE_MAPPINGS:  # null (an empty value) is none
        if value is not None and not isinstance(value, dict):
            raise InputError(f"{path}: {where} must be a mapping of names to files (or {{}}), got {quoted(value)}")
        return value or {}
    if schema in CHECKED_APART:
        return value
    if isinstance(default, dict):
        if not isinstance(value, dict):
            raise InputError(f"{path}: {where} must be a mapping with keys {sorted(default)}")
        unknown = sorted((set(value) - set(default)), key=str)
        if unknown:
            raise InputError(f"{path}: {unknown_key(unknown[0], where, sorted(default))}")
        return {
            key: check_shape(value.get(key, default[key]), default[key], f"{where}.{key}", path, f"{schema}.{key}")
            for key in default
        }
    if value is None:
        if default is None or schema in NULLABLE:
            return None
        raise InputError(f"{path}: {where} must be {type(default).__name__}, got null")
    if default is None or schema in MIXED:
        return value
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, float):
        return finite(value, where, path)
    else:
        ok = isinstance(value, type(default)) and not (isinstance(value, bool) and not isinstance(default, bool))
    if not ok:
        raise InputError(f"{path}: {where} must be {type(default).__name__}, got {value!r}")
    return value


def finite(value: Any, where: str, path: Path) -> float:
    """A float param: a finite number (an int is accepted). YAML's .nan and .inf are refused here,
    once for every float key: a NaN compares false with every bound, so no later check would."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{path}: {where} must be a number, got {value!r}")
    if not math.isfinite(value):  # (an integer beyond a float is refused as the YAML is read)
        raise InputError(f"{path}: {where} must be a finite number, got {value!r}")
    return value
