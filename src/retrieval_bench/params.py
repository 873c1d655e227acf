"""Read and validate params.yaml: every key is known, every value has the expected type."""

from __future__ import annotations

import difflib
import math
import os
import re
from pathlib import Path
from typing import Any

from retrieval_bench.io import InputError, json_kind, quoted
from retrieval_bench.params_sections import (
    DVC_IGNORED_KEYS,
    REQUEST_TIMEOUT_S,
    check_embed,
    check_inside,
    check_llm_requests,
    check_rerank_and_ann,
    check_similarity_bars,
    check_style_examples,
    first_ignored_key,
    read_yaml_file,
)
from retrieval_bench.store_address import check_retrieval_store, check_store_params

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
        "drop_echo": False,
        "drop_context_dependent": False,
        "drop_near_duplicates": False,
        "near_duplicate_jaccard": 0.7,
        "concurrency": 8,
        "max_retries": 5,
        "max_cost_usd": 5.0,
        "price": None,  # null: the price table by model (llm.prices); or a mapping like PRICE_KEYS
        "batch_poll_seconds": 30.0,
        "timeout_s": REQUEST_TIMEOUT_S,  # seconds per request (a local CPU server may need more)
        "response_format": "text",  # or json_schema: the reply's JSON schema is sent (llm.tasks.Task.schema)
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
    },
    "score": {
        "k": [1, 3, 5, 10, 20],
        "min_coverage": 0.5,
        "ties": "expected",
        "budgets": [2000, 4000],
        "budget_unit": "chars",
    },
    "judge": {
        "enabled": False,
        "provider": "anthropic",
        "model": "claude-haiku-4-5",
        "base_url": None,
        "max_tokens": 64,
        "max_attempts": 2,
        "depth": 5,
        "pool": ["data/run.parquet"],
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
    "panel": {},  # several systems, by name: each a chunking, an embedder and a retrieval override (_check_panel)
    "validity": {"threshold": 0.8, "fail_below": False},  # the agreement certificate's Kendall tau bar
}

CHOICES = {
    ("load", "missing_relevant"): {"error", "drop"},
    ("generate", "provider"): {"none", "anthropic", "anthropic-batch", "openai-compatible"},
    ("embed", "backend"): {"torch", "onnx", "openvino"},
    ("embed", "quantize"): {"none", "int8"},
    ("embed", "precision"): {"fp32", "fp16", "bf16"},
    ("embed", "engine"): {"local", "ray"},
    ("embed", "corpus_vectors"): {"embed", "stored"},
    ("retrieval", "method"): {"dense", "bm25", "hybrid", "run-file", "python", "rerank", "ann", "store"},
    ("retrieval", "fusion"): {"rrf", "weighted"},
    ("score", "ties"): {"expected", "pessimistic", "optimistic"},
    ("score", "budget_unit"): {"chars", "words"},
    ("judge", "provider"): {"none", "anthropic", "anthropic-batch", "openai-compatible"},
}

# No key may be named as one DVC leaves out of its run-cache key (DVC_IGNORED_KEYS); a params.yaml
# still using one is told the new name.
RENAMED = {"size": "chars"}

# Keys that may be null although their default is not (null = no limit).
NULLABLE = {"params.generate.max_cost_usd", "params.judge.max_cost_usd"}
# Keys whose value may be a number or a word; checked in _check_values.
MIXED = {"params.retrieval.depth"}

OPTIONAL_TYPES = {("embed", "max_seq_length"): int}


def _unknown_key(key: Any, where: str, valid: list[str]) -> str:
    """The one-line message for a key that is not in the schema, with the closest valid key."""
    message = f"unknown key {where}.{key}"
    if key in RENAMED and RENAMED[key] in valid:
        message += (
            f"; it is called {where}.{RENAMED[key]} now (DVC ignores param keys named "
            f"{'/'.join(sorted(DVC_IGNORED_KEYS))}: treeverse/dvc#10296)"
        )
    else:
        close = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.5)
        if close:
            message += f"; did you mean {where}.{close[0]}?"
    return f"{message} (valid keys under {where}: {', '.join(valid)})"


def _check(value: Any, default: Any, where: str, path: Path, schema: str | None = None) -> Any:
    """`value` checked against `default`'s shape and types, defaults filled in; errors name `where`,
    the key the user wrote, and `schema` (default: `where`) is the key in DEFAULTS (a panel
    system's keys are checked as the retrieval section's)."""
    schema = schema or where
    if isinstance(default, dict):
        if not isinstance(value, dict):
            raise InputError(f"{path}: {where} must be a mapping with keys {sorted(default)}")
        unknown = sorted((set(value) - set(default)), key=str)
        if unknown:
            raise InputError(f"{path}: {_unknown_key(unknown[0], where, sorted(default))}")
        return {
            key: _check(value.get(key, default[key]), default[key], f"{where}.{key}", path, f"{schema}.{key}")
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
        return _finite(value, where, path)
    else:
        ok = isinstance(value, type(default)) and not (isinstance(value, bool) and not isinstance(default, bool))
    if not ok:
        raise InputError(f"{path}: {where} must be {type(default).__name__}, got {value!r}")
    return value


def _finite(value: Any, where: str, path: Path) -> float:
    """A float param: a finite number (an int is accepted). YAML's .nan and .inf are refused here,
    once for every float key: a NaN compares false with every bound, so no later check would."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{path}: {where} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise InputError(f"{path}: {where} must be a finite number, got {value!r}")
    return value


def load_params(section: str, path: str | Path = "params.yaml") -> dict[str, Any]:
    """Validate the whole params file and return one section, with defaults filled in."""
    return load_all_params(path)[section]


def load_all_params(path: str | Path = "params.yaml") -> dict[str, dict[str, Any]]:
    """Validate the whole params file: every section, with defaults filled in."""
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"params: expected the path of a params file, got {json_kind(path)}")
    path = Path(path)
    raw = read_yaml_file(path)
    if raw is None:
        raise InputError(f"{path}: empty; expected a mapping of sections {', '.join(DEFAULTS)}")
    if not isinstance(raw, dict):
        raise InputError(
            f"{path}: expected a mapping of sections {', '.join(DEFAULTS)}, got {json_kind(raw)} at the top level"
        )
    ignored = first_ignored_key(raw, path)
    raw_panel = raw.pop("panel", None)
    raw_named = {section: raw.pop(section, DEFAULTS[section]) for section in NAMED_BASE}
    params = _check(raw, DEFAULTS, "params", path)
    if ignored:  # after the schema check, which tells a renamed key (load.chunking.size) its new name
        raise InputError(
            f"{path}: {ignored} is named {ignored.rpartition('.')[2]!r}, which DVC leaves out of its run-cache "
            "key (treeverse/dvc#10296): a change to it would be served stale outputs; rename it"
        )
    for (name, key), allowed in CHOICES.items():
        if params[name][key] not in allowed:
            raise InputError(
                f"{path}: {name}.{key} must be one of {', '.join(sorted(allowed))}, got {params[name][key]!r}"
            )
    for (name, key), kind in OPTIONAL_TYPES.items():
        value = params[name][key]
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool) or value <= 0):
            raise InputError(f"{path}: {name}.{key} must be a positive {kind.__name__} or null, got {value!r}")
    _check_values(params, path)
    for section, value in raw_named.items():
        params[section] = _check_named(section, value, params, path)
    params["panel"] = _check_panel(raw_panel, params, path)
    if not -1 <= params["validity"]["threshold"] <= 1:
        raise InputError(
            f"{path}: validity.threshold must be a Kendall tau in [-1, 1], got {params['validity']['threshold']!r}"
        )
    return params


def _check_values(params: dict[str, Any], path: Path) -> None:
    ks, budgets = params["score"]["k"], params["score"]["budgets"]
    if not ks or not _distinct_positive(ks):
        raise InputError(f"{path}: score.k must be a non-empty list of distinct positive integers, got {ks!r}")
    if not _distinct_positive(budgets):
        raise InputError(f"{path}: score.budgets must be a list of distinct positive integers or [], got {budgets!r}")
    if not 0 < params["score"]["min_coverage"] <= 1:
        raise InputError(f"{path}: score.min_coverage must be in (0, 1], got {params['score']['min_coverage']!r}")
    for where in ("load.chunking", "generate.passages"):
        name, key = where.split(".")
        _check_chunking(params[name][key], where, path)
    if params["generate"]["max_questions"] < 0:
        raise InputError(f"{path}: generate.max_questions must be >= 0 (0 = no limit)")
    _check_generate(params["generate"], "generate", path)
    check_style_examples(params["generate"], path)
    check_similarity_bars(params, path)
    _check_judge(params["judge"], path)
    check_embed(params["embed"], path)
    check_store_params(params, path)
    _check_retrieval(params["retrieval"], "retrieval", max(ks), path)


def _distinct_positive(values: list) -> bool:
    positive = all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)
    return positive and len(set(values)) == len(values)


def _check_generate(settings: dict[str, Any], section: str, path: Path) -> None:
    """The API settings of an LLM section (generate, or judge, which has the same keys)."""
    for key in ("max_tokens", "max_attempts", "concurrency"):
        if settings[key] <= 0:
            raise InputError(f"{path}: {section}.{key} must be a positive integer, got {settings[key]!r}")
    if settings["max_retries"] < 0:
        raise InputError(f"{path}: {section}.max_retries must be >= 0, got {settings['max_retries']!r}")
    if settings["batch_poll_seconds"] <= 0:
        raise InputError(
            f"{path}: {section}.batch_poll_seconds must be positive, got {settings['batch_poll_seconds']!r}"
        )
    check_llm_requests(settings, section, path)
    _check_price(settings["price"], section, path)


# An explicit generate.price (null: the price table by model): USD per million tokens; batch_discount optional.
PRICE_KEYS = {"input_per_mtok": 1.0, "output_per_mtok": 5.0, "batch_discount": 0.5}


def _check_price(price: Any, section: str, path: Path) -> None:
    if price is None:
        return
    where = f"params.{section}.price"
    if not isinstance(price, dict):
        raise InputError(
            f"{path}: {where} must be null (the price table) or a mapping with keys {', '.join(PRICE_KEYS)}, got {price!r}"
        )
    unknown = sorted(set(price) - set(PRICE_KEYS), key=str)
    if unknown:
        raise InputError(f"{path}: {_unknown_key(unknown[0], where, sorted(PRICE_KEYS))}")
    missing = [key for key in ("input_per_mtok", "output_per_mtok") if key not in price]
    if missing:
        raise InputError(f"{path}: {where} needs {' and '.join(missing)} (US dollars per million tokens)")
    for key, value in price.items():
        _finite(value, f"{where}.{key}", path)
    if price["input_per_mtok"] < 0 or price["output_per_mtok"] < 0 or not 0 < price.get("batch_discount", 0.5) <= 1:
        raise InputError(f"{path}: {section}.price needs prices >= 0 and 0 < batch_discount <= 1, got {price!r}")


JUDGE_POOL_REVISION = "rev:"  # a judge.pool entry naming the run of a git revision or DVC experiment


def _check_judge(judge: dict[str, Any], path: Path) -> None:
    for key in ("max_tokens", "max_attempts", "depth", "concurrency", "ambiguous_at"):
        if judge[key] <= 0:
            raise InputError(f"{path}: judge.{key} must be a positive integer, got {judge[key]!r}")
    if not 1 <= judge["min_grade"] <= 3:
        raise InputError(f"{path}: judge.min_grade must be 1, 2 or 3 (grades run 0-3), got {judge['min_grade']!r}")
    pool = judge["pool"]
    if not pool or not all(isinstance(entry, str) and entry.strip() and entry != JUDGE_POOL_REVISION for entry in pool):
        raise InputError(
            f"{path}: judge.pool must be a non-empty list of run files or {JUDGE_POOL_REVISION}<git revision>, got {pool!r}"
        )
    if len(set(pool)) != len(pool):
        raise InputError(f"{path}: judge.pool lists {next(e for e in pool if pool.count(e) > 1)!r} twice")
    _check_generate(judge, "judge", path)


def _check_retrieval(retrieval: dict[str, Any], where: str, max_k: int, path: Path) -> None:
    """One retrieval settings (the retrieval section's, or a panel system's, `where` naming it);
    `max_k`: score.k's largest cut-off, which the run must reach."""
    depth = retrieval["depth"]
    if depth != "all" and (isinstance(depth, bool) or not isinstance(depth, int) or depth <= 0):
        raise InputError(f"{path}: {where}.depth must be a positive int (chunks per question) or 'all', got {depth!r}")
    if depth != "all" and max_k > depth:  # recall@k beyond the run would silently count only `depth` chunks
        raise InputError(
            f"{path}: score.k {max_k} is beyond {where}.depth {depth}: recall@{max_k} would count only "
            f"the run's {depth} chunks; raise {where}.depth to at least {max_k} or drop k {max_k}"
        )
    if retrieval["rrf_k"] < 0:
        raise InputError(f"{path}: {where}.rrf_k must be >= 0, got {retrieval['rrf_k']!r}")
    if retrieval["fusion_depth"] <= 0:
        raise InputError(f"{path}: {where}.fusion_depth must be positive, got {retrieval['fusion_depth']!r}")
    for key, allowed in (("stemmer", ("english", "none")), ("stopwords", ("en", "none"))):
        if retrieval["bm25"][key] not in allowed:
            raise InputError(
                f"{path}: {where}.bm25.{key} must be one of {', '.join(allowed)}, got {retrieval['bm25'][key]!r}"
            )
    for key in ("run_file", "python", "trec_export"):
        if retrieval[key] is not None and not (isinstance(retrieval[key], str) and retrieval[key]):
            raise InputError(f"{path}: {where}.{key} must be a non-empty string or null, got {retrieval[key]!r}")
    check_inside(retrieval["trec_export"], f"{where}.trec_export", path)
    if str(retrieval["trec_export"]).lower().endswith(".jsonl"):  # run files named .jsonl are read as JSON
        raise InputError(
            f"{path}: {where}.trec_export {retrieval['trec_export']!r} is a TREC run (text lines), not JSONL: "
            f"name it .trec or .txt so that {where}.run_file reads it back"
        )
    for method, key in (("run-file", "run_file"), ("python", "python")):
        if retrieval["method"] == method and not retrieval[key]:
            raise InputError(f"{path}: {where}.method {method} needs {where}.{key}")
    check_rerank_and_ann(retrieval, where, path)


# A panel system's name is a DVC stage name suffix (retrieve_panel@NAME), a params key DVC looks
# up by dots (panel.NAME) and a folder (data/panel/NAME): no dot, slash, @ or non-ASCII letter,
# and short enough for any file system.
PANEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
PANEL_NAME_RULE = "1-64 ASCII letters, digits, - and _, starting with a letter or digit"


def _merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    return {
        key: _merged(base[key], override[key])
        if isinstance(base.get(key), dict) and isinstance(override.get(key), dict)
        else override.get(key, base.get(key))
        for key in {**base, **override}
    }


# A named chunking overrides load.chunking; a named embedder, these keys of embed (the others,
# batch size, device, engine, are how to embed, not what: every embedder shares them).
NAMED_BASE = {"chunkings": ("load", "chunking"), "embedders": ("embed", None)}
EMBEDDER_KEYS = ("model", "max_seq_length", "query_prompt", "document_prompt", "backend", "quantize", "precision")
NAMED_EXAMPLE = {"chunkings": "{chars: 400, overlap: 50}", "embedders": "{model: ..., max_seq_length: 256}"}


def _valid_name(name: Any, where: str, used_as: str, path: Path) -> str:
    if not isinstance(name, str) or not PANEL_NAME.fullmatch(name):
        raise InputError(
            f"{path}: {where} name {quoted(name)} is not usable: it names DVC stages ({used_as}) and folders, "
            f"so it must be {PANEL_NAME_RULE}"
        )
    return name


def _check_named(section: str, entries: Any, params: dict[str, Any], path: Path) -> dict[str, dict[str, Any]]:
    """chunkings or embedders: each name's full settings, its keys over the base section's;
    `default` (the retrieve and score stages') must be there, `{}` for the base as it is."""
    name_of_base, key_of_base = NAMED_BASE[section]
    base = params[name_of_base][key_of_base] if key_of_base else params[name_of_base]
    keys = sorted(DEFAULTS["load"]["chunking"]) if key_of_base else list(EMBEDDER_KEYS)
    if not isinstance(entries, dict) or "default" not in entries:
        raise InputError(
            f"{path}: {section} must be a mapping of names to settings with a `default` entry "
            f"(e.g. {section}: {{default: {{}}, other: {NAMED_EXAMPLE[section]}}}), got {entries!r}"
        )
    checked = {}
    for name, override in entries.items():
        where = f"{section}.{_valid_name(name, section, 'embed_corpus@<chunking>-<embedder>', path)}"
        override = {} if override is None else override
        if not isinstance(override, dict):
            raise InputError(f"{path}: {where} must be a mapping of {', '.join(keys)} (or {{}}), got {override!r}")
        unknown = sorted(set(override) - set(keys), key=str)
        if unknown:
            raise InputError(f"{path}: {_unknown_key(unknown[0], where, keys)}")
        settings = _check(
            {**base, **override},
            DEFAULTS[name_of_base][key_of_base] if key_of_base else DEFAULTS["embed"],
            f"params.{where}",
            path,
            f"params.{name_of_base}" + (f".{key_of_base}" if key_of_base else ""),
        )
        if key_of_base:
            _check_chunking(settings, where, path)
        else:
            for key in ("backend", "quantize", "precision"):
                if settings[key] not in CHOICES[("embed", key)]:
                    raise InputError(
                        f"{path}: {where}.{key} must be one of {', '.join(sorted(CHOICES[('embed', key)]))}, got {settings[key]!r}"
                    )
            seq = settings["max_seq_length"]
            if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool) or seq <= 0):
                raise InputError(f"{path}: {where}.max_seq_length must be a positive int or null, got {seq!r}")
            check_embed(settings, path)
        checked[name] = settings
    return checked


def _check_chunking(chunking: dict[str, Any], where: str, path: Path) -> None:
    chars, overlap = chunking["chars"], chunking["overlap"]
    if chars <= 0 or not 0 <= overlap < chars:
        raise InputError(
            f"{path}: {where} needs chars > 0 and 0 <= overlap < chars, got chars={chars}, overlap={overlap}"
        )


def _check_panel(panel: Any, params: dict[str, Any], path: Path) -> dict[str, dict[str, Any]]:
    """Each panel system's settings: the retrieval section with its keys over it, checked alike,
    and the `chunking` and `embedder` it names (both spelled: DVC's foreach reads them)."""
    if panel is None:
        return {}
    if not isinstance(panel, dict):
        raise InputError(f"{path}: panel must be a mapping of system names to retrieval settings, got {panel!r}")
    systems = {}
    for name, override in panel.items():
        if not isinstance(name, str) or not PANEL_NAME.fullmatch(name):
            raise InputError(
                f"{path}: panel name {quoted(name)} is not usable: it names a DVC stage (retrieve_panel@NAME) "
                f"and a folder (data/panel/NAME), so it must be {PANEL_NAME_RULE}"
            )
        where = f"panel.{name}"
        if not isinstance(override, dict):
            raise InputError(
                f"{path}: {where} must be a mapping of retrieval keys (e.g. {{method: bm25}}), got {override!r}"
            )
        override = dict(override)
        picked = {section[:-1]: override.pop(section[:-1], None) for section in NAMED_BASE}
        for key, chosen in picked.items():
            if chosen is None:
                raise InputError(
                    f"{path}: {where} must name its {key} (e.g. {{chunking: default, embedder: default, "
                    f"method: ...}}): each system picks one of {key}s ({', '.join(params[key + 's'])}); "
                    f"`default` is load.chunking / embed as they are"
                )
            if chosen not in params[key + "s"]:
                raise InputError(
                    f"{path}: {where}.{key} {quoted(chosen)} is not one of {key}s: {', '.join(params[key + 's'])}"
                )
        retrieval, source, max_k = params["retrieval"], params["load"]["source"], max(params["score"]["k"])
        settings = _check(
            _merged(retrieval, override), DEFAULTS["retrieval"], f"params.{where}", path, "params.retrieval"
        )
        for key in ("method", "fusion"):
            if settings[key] not in CHOICES[("retrieval", key)]:
                raise InputError(
                    f"{path}: {where}.{key} must be one of {', '.join(sorted(CHOICES[('retrieval', key)]))}, got {settings[key]!r}"
                )
        _check_retrieval(settings, where, max_k, path)
        check_retrieval_store(settings, source, where, path)
        systems[name] = {**settings, **picked}
    return systems


def named(params: dict[str, Any], section: str, name: str, path: str | Path = "params.yaml") -> dict[str, Any]:
    """The settings of chunking or embedder `name` (`section`: chunkings or embedders), a stage's argument."""
    if name not in params[section]:
        raise InputError(f"{path}: {section} has no {name!r} (have: {', '.join(params[section])})")
    return params[section][name]


def panel_system(panel: dict[str, dict[str, Any]], system: str, path: str | Path = "params.yaml") -> dict[str, Any]:
    """The retrieval settings of panel system `system` (a panel stage's command-line argument)."""
    if system not in panel:
        raise InputError(f"{path}: panel has no system {system!r} (have: {', '.join(panel) or 'none'})")
    return panel[system]
