"""Read and validate params.yaml: every key is known, every value has the expected type."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from retrieval_bench.core.errors import InputError, flow_yaml, json_kind
from retrieval_bench.core.params_panel import (
    NAMED_BASE,
    check_chunking,
    check_embedded,
    check_imported,
    check_named,
    check_panel,
    check_retrieval,
)
from retrieval_bench.core.params_schema import (
    CHOICES,
    DEFAULTS,
    OPTIONAL_TYPES,
    check_shape,
    finite,
    unknown_key,
)
from retrieval_bench.core.params_sections import (
    REVIEW_BOUNDS,
    check_bounds,
    check_embed,
    check_kinds,
    check_llm_requests,
    check_similarity_bars,
    check_style_examples,
    check_validity,
    first_ignored_key,
    read_yaml_file,
)
from retrieval_bench.core.paths import DEFAULT, LEGACY_RUN, run_of
from retrieval_bench.core.store_address import check_store_params

SettingsT = TypeVar("SettingsT")


def from_section(cls: type[SettingsT], section: Mapping[str, Any], **given: Any) -> SettingsT:
    """A frozen settings dataclass whose fields are the checked `section`'s keys of the same names,
    `given` (converted parts, values from elsewhere) over them: one place that copies a section
    into its settings object, so a field cannot be read from a key of another name by mistake."""
    names = [field.name for field in dataclasses.fields(cast(Any, cls)) if field.name not in given]
    return cls(**{name: section[name] for name in names}, **given)


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
    # No panel key: the default system alone; `panel: null` is refused (check_panel). No `embedded`: derived.
    raw_panel, raw_embedded = raw.pop("panel", DEFAULTS["panel"]), raw.pop("embedded", None)
    raw_named = {section: raw.pop(section, DEFAULTS[section]) for section in NAMED_BASE}
    params: dict[str, dict[str, Any]] = check_shape(raw, DEFAULTS, "params", path)
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
        params[section] = check_named(section, value, params, path)
    params["panel"] = check_panel(raw_panel, params, path)
    check_validity(params["validity"], list(params["panel"]), path)  # candidates name the panel's systems
    params["embedded"] = check_embedded(raw_embedded, params["panel"], path)
    return params


def _check_values(params: dict[str, Any], path: Path) -> None:
    ks, budgets = params["score"]["k"], params["score"]["budgets"]
    if not ks or not _distinct_positive(ks):
        raise InputError(f"{path}: score.k must be a non-empty list of distinct positive integers, got {ks!r}")
    if not _distinct_positive(budgets) or any(budget > MAX_BUDGET for budget in budgets):
        raise InputError(
            f"{path}: score.budgets must be a list of distinct positive integers up to {MAX_BUDGET:,} or [], "
            f"got {budgets!r}"
        )
    if not 0 < params["score"]["min_coverage"] <= 1:
        raise InputError(f"{path}: score.min_coverage must be in (0, 1], got {params['score']['min_coverage']!r}")
    for where in ("load.chunking", "generate.passages"):
        name, key = where.split(".")
        check_chunking(params[name][key], where, path)
    if params["generate"]["max_questions"] < 0:
        raise InputError(f"{path}: generate.max_questions must be >= 0 (0 = no limit)")
    for key, what in (("load.source", "a folder, file or store address"), ("generate.handwritten", "a file")):
        section, name = key.split(".")
        if not params[section][name].strip():  # "" is the working folder: the whole project read as the corpus
            raise InputError(f"{path}: {key} is empty: name {what}")
    check_bounds(params["generate"], {"seed": (0, 2**32 - 1)}, "generate", path)
    _check_generate(params["generate"], "generate", path)
    check_style_examples(params["generate"], path)
    check_kinds(params["generate"], path)
    check_imported(params["generate"]["imported"], path)
    check_similarity_bars(params, path)
    _check_judge(params["judge"], path)
    check_embed(params["embed"], "embed", path)
    check_store_params(params, path)
    check_retrieval(params["retrieval"], "retrieval", max(ks), path)
    check_bounds(params["review"], REVIEW_BOUNDS, "review", path)
    check_bounds(params["costs"], COSTS_BOUNDS, "costs", path)


MAX_BUDGET = 10**12  # score.budgets: characters (or tokens) of context; an int64 holds each sum


def _distinct_positive(values: list[Any]) -> bool:
    positive = all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)
    return positive and len(set(values)) == len(values)


# Values beyond these only cost time or memory (a billion timed rounds hang the leaderboard).
COSTS_BOUNDS = {"rounds": (1, 1000), "embed_texts": (1, 100_000)}
LLM_BOUNDS = {"max_tokens": (1, 1_000_000), "max_attempts": (1, 100), "concurrency": (1, 1024), "max_retries": (0, 100)}


def _check_generate(settings: dict[str, Any], section: str, path: Path) -> None:
    """The API settings of an LLM section (generate, or judge, which has the same keys)."""
    check_bounds(settings, LLM_BOUNDS, section, path)
    if not 0 < settings["batch_poll_seconds"] <= 3600:  # beyond an hour between polls a finished batch waits unread
        raise InputError(
            f"{path}: {section}.batch_poll_seconds must be seconds, more than 0 and at most 3600, "
            f"got {settings['batch_poll_seconds']!r}"
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
        raise InputError(f"{path}: {unknown_key(unknown[0], where, sorted(PRICE_KEYS))}")
    missing = [key for key in ("input_per_mtok", "output_per_mtok") if key not in price]
    if missing:
        raise InputError(f"{path}: {where} needs {' and '.join(missing)} (US dollars per million tokens)")
    for key, value in price.items():
        finite(value, f"{where}.{key}", path)
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
    if LEGACY_RUN in pool:
        raise InputError(
            f"{path}: judge.pool {LEGACY_RUN} moved: the default system's run is {run_of(DEFAULT)} "
            f"(the retrieve stage writes each panel system its own folder; metrics/panel/<system>/ holds its scores)"
        )
    _check_generate(judge, "judge", path)


def require_dvc_keys(
    params_path: str | Path = "params.yaml", dvc_yaml: str | Path = "dvc.yaml", resolved: dict[str, Any] | None = None
) -> None:
    """Every params key a dvc.yaml stage lists must be written in the params file: the library
    fills a missing one with its default, but `dvc repro` refuses the stage ("Parameters ... are
    missing") after the stages before it have run. A one-line InputError naming the first missing
    key, the stage and the default to write. Templated keys (chunkings.${key}) are the panel's,
    checked with it. A key a stage iterates (`foreach: ${embedded}`) must be written too (DVC fails
    parsing dvc.yaml without it): the error spells its `resolved` value (load_all_params') to write."""
    params_path, dvc_yaml = Path(params_path), Path(dvc_yaml)
    raw, stages = read_yaml_file(params_path), (read_yaml_file(dvc_yaml) or {}).get("stages", {})
    for stage, body in stages.items():
        for key in (body.get("do", body) or {}).get("params") or []:
            if not isinstance(key, str) or "${" in key:
                continue  # `- params.yaml:` (the whole file) or a templated key
            held: Any = raw
            for part in key.split("."):
                if not isinstance(held, dict) or part not in held:
                    section, _, name = key.partition(".")
                    default = DEFAULTS.get(section, {}).get(name) if name else None
                    add = (
                        f"; add it (default: {json.dumps(default)})"
                        if name and not isinstance(default, (dict, list))
                        else ""
                    )
                    raise InputError(
                        f"{params_path}: {key} is missing: {dvc_yaml}'s stage {stage} depends on it and `dvc repro` "
                        f"refuses a listed key that is absent{add}"
                    )
                held = held[part]
    for stage, body in stages.items():  # after the listed keys: those name the stage that reads them
        iterated = re.fullmatch(r"\$\{(\w+)\}", str(body.get("foreach", "")))
        if iterated and iterated.group(1) not in (raw or {}):
            key = iterated.group(1)
            value = (resolved or {}).get(key)
            spelled = "..." if value is None else flow_yaml(value)
            raise InputError(
                f"{params_path}: {key} is missing: {dvc_yaml}'s stage {stage} iterates it (foreach); write {key}: {spelled}"
            )
