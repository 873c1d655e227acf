"""Checks of the retrieval settings and of the panel: the named chunkings and embedders, and each
system's chunking, embedder and retrieval keys over the retrieval section."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from retrieval_bench.core.errors import InputError, flow_yaml, json_kind, quoted
from retrieval_bench.core.params_schema import CHOICES, DEFAULTS, check_shape, unknown_key
from retrieval_bench.core.params_sections import check_embed, check_export_target, check_rerank_and_ann
from retrieval_bench.core.paths import DEFAULT as DEFAULT_SYSTEM
from retrieval_bench.core.question_sets import RESERVED
from retrieval_bench.core.store_address import check_retrieval_store

MAX_RRF_K = 1_000_000  # retrieval.rrf_k: 60 is the usual; near 1e16 every fused score is one float


def check_retrieval(retrieval: dict[str, Any], where: str, max_k: int, path: Path) -> None:
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
    if not 0 <= retrieval["rrf_k"] <= MAX_RRF_K:  # far beyond it every fused score ties (or overflows)
        raise InputError(f"{path}: {where}.rrf_k must be from 0 to {MAX_RRF_K:,}, got {retrieval['rrf_k']!r}")
    if retrieval["fusion_depth"] <= 0:
        raise InputError(f"{path}: {where}.fusion_depth must be positive, got {retrieval['fusion_depth']!r}")
    weights = retrieval["weights"]
    if (
        not all(0 <= weights[name] < math.inf for name in ("dense", "bm25"))
        or not 0 < weights["dense"] + weights["bm25"] < math.inf
    ):
        # a negative weight ranks by the worst match; both 0 tie every chunk; a sum beyond floats
        # made the best chunks' fused scores inf, and the run dropped them
        raise InputError(
            f"{path}: {where}.weights must be finite numbers >= 0 with a finite sum, not both 0, got {{dense: {weights['dense']!r}, "
            f"bm25: {weights['bm25']!r}}}"
        )
    candidates = retrieval["rerank"]["candidates"]
    if retrieval["method"] == "rerank" and 0 < candidates < max_k:  # the run holds only the reranked candidates
        raise InputError(
            f"{path}: score.k {max_k} is beyond {where}.rerank.candidates {candidates}: recall@{max_k} would count "
            f"only the {candidates} reranked chunks; raise {where}.rerank.candidates to at least {max_k} or drop k {max_k}"
        )
    for key, allowed in (("stemmer", ("english", "none")), ("stopwords", ("en", "none"))):
        if retrieval["bm25"][key] not in allowed:
            raise InputError(
                f"{path}: {where}.bm25.{key} must be one of {', '.join(allowed)}, got {retrieval['bm25'][key]!r}"
            )
    for key in ("run_file", "python", "trec_export"):
        if retrieval[key] is not None and not (isinstance(retrieval[key], str) and retrieval[key]):
            raise InputError(f"{path}: {where}.{key} must be a non-empty string or null, got {retrieval[key]!r}")
    if str(retrieval["trec_export"]).lower().endswith(".jsonl"):  # run files named .jsonl are read as JSON
        raise InputError(
            f"{path}: {where}.trec_export {retrieval['trec_export']!r} is a TREC run (text lines), not JSONL: "
            f"name it .trec or .txt so that {where}.run_file reads it back"
        )
    check_export_target(retrieval["trec_export"], f"{where}.trec_export", path)
    for method, key in (("run-file", "run_file"), ("python", "python")):
        if retrieval["method"] == method and not retrieval[key]:
            raise InputError(f"{path}: {where}.method {method} needs {where}.{key}")
    if retrieval["method"] == "python" and not PYTHON_TARGET.fullmatch(retrieval["python"]):
        raise InputError(
            f"{path}: {where}.python must be 'module:function', a module importable from the project root "
            f"(e.g. runs.my_search:search), got {retrieval['python']!r}"
        )
    if not re.fullmatch(r"cpu|auto|cuda(:\d+)?", retrieval["device"]):  # whether the GPU is here: at retrieve
        raise InputError(f"{path}: {where}.device must be cpu, cuda, cuda:N or auto, got {retrieval['device']!r}")
    check_rerank_and_ann(retrieval, where, path)


# A panel system's name is a params key DVC looks up by dots (panel.NAME) and a folder
# (data/panel/NAME): no dot, slash, @ or non-ASCII letter, and short enough for any file system.
PANEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
PYTHON_TARGET = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")  # retrieval.python: module:function
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


def _valid_name(name: Any, where: str, names: str, path: Path) -> str:
    """`name` if it is PANEL_NAME_RULE's, else one InputError saying what it `names` and, for a name
    YAML read as a number or a boolean (`1:`, `yes:`), to quote it."""
    if isinstance(name, str) and PANEL_NAME.fullmatch(name):
        return name
    # `017:` reads as 15, `yes:` as true, `~:` as null: the name to quote is the one written, not its value
    read_as = (
        f"; YAML read it as {json_kind(name)}: quote the name as you wrote it" if not isinstance(name, str) else ""
    )
    raise InputError(
        f"{path}: {where} name {quoted(name)} is not usable: it names {names}, so it must be {PANEL_NAME_RULE}{read_as}"
    )


def check_named(section: str, entries: Any, params: dict[str, Any], path: Path) -> dict[str, dict[str, Any]]:
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
        where = f"{section}.{_valid_name(name, section, 'DVC stages (embed_corpus@<chunking>-<embedder>) and folders', path)}"
        override = {} if override is None else override
        if not isinstance(override, dict):
            raise InputError(f"{path}: {where} must be a mapping of {', '.join(keys)} (or {{}}), got {override!r}")
        unknown = sorted(set(override) - set(keys), key=str)
        if unknown:
            raise InputError(f"{path}: {unknown_key(unknown[0], where, keys)}")
        settings = check_shape(
            {**base, **override},
            DEFAULTS[name_of_base][key_of_base] if key_of_base else DEFAULTS["embed"],
            f"params.{where}",
            path,
            f"params.{name_of_base}" + (f".{key_of_base}" if key_of_base else ""),
        )
        if key_of_base:
            check_chunking(settings, where, path)
        else:
            for key in ("backend", "quantize", "precision"):
                if settings[key] not in CHOICES[("embed", key)]:
                    raise InputError(
                        f"{path}: {where}.{key} must be one of {', '.join(sorted(CHOICES[('embed', key)]))}, got {settings[key]!r}"
                    )
            seq = settings["max_seq_length"]
            if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool) or seq <= 0):
                raise InputError(f"{path}: {where}.max_seq_length must be a positive int or null, got {seq!r}")
            check_embed(settings, where, path)
        checked[name] = settings
    return checked


def check_imported(imported: dict[Any, Any], path: Path) -> None:
    """generate.imported: {NAME: FILE}, each name a panel name's (the leaderboard and the
    certificate name a column after it) and not a reserved question set, each file a path."""
    for name, file in imported.items():
        _valid_name(name, "generate.imported", "a question set (a leaderboard column)", path)
        if name in RESERVED:
            raise InputError(
                f"{path}: generate.imported.{name}: {name!r} is the name of a question set of the golden set's own "
                f"(reserved: {', '.join(RESERVED)}); name the imported set otherwise"
            )
        if not isinstance(file, str) or not file.strip():
            raise InputError(
                f"{path}: generate.imported.{name} must be the path of a question set file or BEIR folder, got {quoted(file)}"
            )


def check_chunking(chunking: dict[str, Any], where: str, path: Path) -> None:
    chars, overlap = chunking["chars"], chunking["overlap"]
    if chars <= 0 or not 0 <= overlap < chars:
        raise InputError(
            f"{path}: {where} needs chars > 0 and 0 <= overlap < chars, got chars={chars}, overlap={overlap}"
        )


def check_panel(panel: Any, params: dict[str, Any], path: Path) -> dict[str, dict[str, Any]]:
    """Each panel system's settings: the retrieval section with its keys over it, checked alike,
    and the `chunking` and `embedder` it names (both spelled: what each system runs on is read
    in params.yaml, not inferred)."""
    if not isinstance(panel, dict):  # null too
        raise InputError(
            f"{path}: panel must be a mapping of system names to retrieval settings "
            f"(e.g. panel: {{default: {{chunking: default, embedder: default}}}}), got {json_kind(panel)}"
        )
    systems = {}
    for name, override in panel.items():
        _valid_name(name, "panel", "a params key (panel.NAME) and a folder (data/panel/NAME)", path)
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
            if not isinstance(chosen, str) or chosen not in params[key + "s"]:
                raise InputError(
                    f"{path}: {where}.{key} {quoted(chosen)} is not one of {key}s: {', '.join(params[key + 's'])}"
                )
        retrieval, source, max_k = params["retrieval"], params["load"]["source"], max(params["score"]["k"])
        settings = check_shape(
            _merged(retrieval, override), DEFAULTS["retrieval"], f"params.{where}", path, "params.retrieval"
        )
        for key in ("method", "fusion"):
            if settings[key] not in CHOICES[("retrieval", key)]:
                raise InputError(
                    f"{path}: {where}.{key} must be one of {', '.join(sorted(CHOICES[('retrieval', key)]))}, got {settings[key]!r}"
                )
        # retrieval.trec_export is the default system's; any other writes only the one it names itself
        settings["trec_export"] = override.get(
            "trec_export", retrieval["trec_export"] if name == DEFAULT_SYSTEM else None
        )
        check_retrieval(settings, where, max_k, path)
        check_retrieval_store(settings, source, where, path)
        systems[name] = {**settings, **picked}
    if DEFAULT_SYSTEM not in systems:
        raise InputError(
            f"{path}: panel has no `default` system, the one `show`, `compare` and judge.pool read when none is "
            f"named: the retrieve and score stages run every panel system, and what was the single system is "
            f"`default: {{chunking: default, embedder: default}}` under panel (have: {', '.join(systems) or 'none'})"
        )
    _check_exports_apart(systems, path)
    return systems


# The methods that search vectors: store searches the questions' vectors (and the corpus's, for its
# recall against exact search). rerank searches them when its first stage does.
VECTOR_METHODS = frozenset({"dense", "hybrid", "ann", "store"})


def method_searches_vectors(method: str, first_stage: str) -> bool:
    """The one rule of which methods read a system's (chunking, embedder) vectors: a BM25, run-file
    or Python system never does; rerank does when its first stage does."""
    return method in VECTOR_METHODS or (method == "rerank" and first_stage in VECTOR_METHODS)


def searches_vectors(system: Mapping[str, Any]) -> bool:
    """method_searches_vectors of a system's params: resolved settings, or a system written without
    a method (the retrieval section's defaults), so its pair is embedded only for another system."""
    method = system.get("method", DEFAULTS["retrieval"]["method"])
    first_stage = (system.get("rerank") or {}).get("first_stage", DEFAULTS["retrieval"]["rerank"]["first_stage"])
    return method_searches_vectors(method, first_stage)


def embedded_pairs(panel: dict[str, dict[str, Any]], every: bool = False) -> dict[str, dict[str, str]]:
    """The (chunking, embedder) pairs the panel's vector-searching systems use (`every`: all its
    systems), each once, by the name of the stage that embeds it (CHUNKING-EMBEDDER), in panel
    order: what params.yaml's `embedded` must hold at least (and may hold at most)."""
    return {
        f"{system['chunking']}-{system['embedder']}": {"chunking": system["chunking"], "embedder": system["embedder"]}
        for system in panel.values()
        if every or searches_vectors(system)
    }


def check_embedded(embedded: Any, panel: dict[str, dict[str, Any]], path: Path) -> dict[str, dict[str, str]]:
    """params.yaml's `embedded`, DVC's list of embed_corpus stages, held to the panel it is derived
    from: a pair no system uses is never embedded, one a vector-searching system uses always is,
    and one only BM25 (run-file, Python) systems use may be left out, its embedding paid for no
    reader (kept, switching a system between dense and BM25 needs no edit here). None, the key left
    out, is every pair the panel uses, as for a missing panel; DVC's foreach still needs it written."""
    wanted, used = embedded_pairs(panel), embedded_pairs(panel, every=True)
    first_user: dict[str, str] = {}  # stage name -> the first system embedded by it
    for name, system in panel.items():  # a-b with c and a with b-c would be one stage: DVC keeps one
        stage = f"{system['chunking']}-{system['embedder']}"
        other = panel[first_user.setdefault(stage, name)]
        if (other["chunking"], other["embedder"]) != (system["chunking"], system["embedder"]):
            raise InputError(
                f"{path}: panel.{first_user[stage]} (chunking {other['chunking']}, embedder {other['embedder']}) and "
                f"panel.{name} (chunking {system['chunking']}, embedder {system['embedder']}) would both be embedded "
                f"by stage embed_corpus@{stage}: rename one of those chunkings or embedders"
            )
    if embedded is None:  # (dvc.yaml iterates it: params.require_dvc_keys asks for it there)
        return used
    fits = isinstance(embedded, dict) and all(used.get(name) == pair for name, pair in embedded.items())
    if not (fits and set(wanted) <= set(embedded)):
        only_bm25 = sorted(set(used) - set(wanted))
        may = f" (may add {', '.join(only_bm25)}: used by systems that search no vectors)" if only_bm25 else ""
        raise InputError(
            f"{path}: embedded must be the (chunking, embedder) pairs the panel's vector-searching systems use, "
            f"each embedded once (stage embed_corpus@CHUNKING-EMBEDDER); write embedded: {flow_yaml(wanted)}{may}"
        )
    return dict(embedded)


def _check_exports_apart(systems: dict[str, dict[str, Any]], path: Path) -> None:
    """Each system's trec_export is its own, and no system's run_file (an export would overwrite
    the run another system scores)."""
    writers: dict[str, str] = {}
    readers = {Path(s["run_file"]).as_posix(): name for name, s in systems.items() if s.get("run_file")}
    for name, settings in systems.items():
        export = settings["trec_export"]
        if export and export in writers:
            raise InputError(
                f"{path}: panel.{writers[export]} and panel.{name} both write trec_export {export!r}: "
                "give each system a file of its own"
            )
        if export and Path(export).as_posix() in readers:
            raise InputError(
                f"{path}: panel.{name}.trec_export {export!r} is panel.{readers[Path(export).as_posix()]}'s run_file: "
                "the export would replace the run that system scores; name another file"
            )
        writers[export] = name


def unused_embedders(params: dict[str, Any]) -> list[str]:
    """A warning line per embedder (but `default`, which must be there) that no vector-searching panel
    system uses: embed_questions@NAME still loads its model (which may not be installed here) and
    embeds the golden set's questions with it, for nothing."""
    used = {pair["embedder"] for pair in embedded_pairs(params["panel"]).values()}
    warnings = []
    for name in params["embedders"]:
        if name == "default" or name in used:
            continue
        naming = [system for system, settings in params["panel"].items() if settings["embedder"] == name]
        also = f" and set the embedder of {', '.join(naming)} (which search no vectors) to default" if naming else ""
        warnings.append(
            f"check_params: warning: embedders.{name} is used by no system that searches vectors; remove it{also} "
            f"to skip embed_questions@{name}"
        )
    return warnings


def reads_stored_vectors(params: dict[str, Any], chunking: str, embedder: str) -> bool:
    """Whether embed_corpus@chunking-embedder reads the corpus vectors from the store at load.source
    (embed.corpus_vectors stored): only the default chunking (the store's own chunks) with an embedder
    whose vectors are embed's (the same model, document prompt, length and numerics); another
    embedder (the sample's seq64, 64 tokens) embeds them, as the store's vectors are not its own."""
    embed = params["embed"]
    own = params["embedders"][embedder]
    same = all(own[key] == embed[key] for key in EMBEDDER_KEYS if key != "query_prompt")
    return embed["corpus_vectors"] == "stored" and chunking == DEFAULT_SYSTEM and same


def named(params: dict[str, Any], section: str, name: str, path: str | Path = "params.yaml") -> dict[str, Any]:
    """The settings of chunking or embedder `name` (`section`: chunkings or embedders), a stage's argument."""
    if name not in params[section]:
        raise InputError(f"{path}: {section} has no {name!r} (have: {', '.join(params[section])})")
    settings: dict[str, Any] = params[section][name]
    return settings


def panel_system(panel: dict[str, dict[str, Any]], system: str, path: str | Path = "params.yaml") -> dict[str, Any]:
    """The retrieval settings of panel system `system` (a panel stage's command-line argument)."""
    if system not in panel:
        raise InputError(f"{path}: panel has no system {system!r} (have: {', '.join(panel) or 'none'})")
    return panel[system]


PICKED_KEYS = ("chunking", "embedder")  # what a system picks beside its retrieval settings


def settings_key(params: Mapping[str, Any], system: str) -> str:
    """The params key a system's retrieval messages name: `retrieval` for a system that overrides
    none of it (the default system as the sample has it: the user wrote retrieval.X), else panel.NAME."""
    own = {key: value for key, value in params["panel"][system].items() if key not in PICKED_KEYS}
    return "retrieval" if own == params["retrieval"] else f"panel.{system}"


def embedder_key(params: dict[str, Any], embedder: str, key: str) -> str:
    """The params key an embedder's `key` (model, ...) came from, for its messages:
    embedders.NAME.key where the embedder sets a value of its own, else embed.key, which it keeps."""
    own = params["embedders"][embedder][key] != params["embed"][key]
    return f"embedders.{embedder}.{key}" if own else f"embed.{key}"


# What each method reads of a system's resolved retrieval settings, beside SYSTEM_KEYS (rerank: and
# what its first stage reads). retrieval.device finds dense candidates on a torch device.
METHOD_KEYS: dict[str, tuple[str, ...]] = {
    "dense": ("device",),
    "bm25": ("bm25",),
    "hybrid": ("device", "bm25", "fusion", "weights", "fusion_depth"),  # and rrf_k when fusion is rrf
    "ann": ("ann",),
    "store": ("store",),
    "rerank": ("rerank",),
    "run-file": ("run_file",),
    "python": ("python",),
}
SYSTEM_KEYS = ("chunking", "embedder", "method", "depth", "trec_export")


def method_settings(system: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a system's resolved settings its method reads: what its run is keyed by
    (data/panel_settings/, retrieve's kept runs). The whole retrieval section made every system
    recompute when a key only another method reads was edited (retrieval.rrf_k, a bm25 system)."""
    method = system["method"]
    keys = SYSTEM_KEYS + METHOD_KEYS[method]
    if method == "rerank":
        keys += METHOD_KEYS[system["rerank"]["first_stage"]]
    if "fusion" in keys and system.get("fusion") == "rrf":
        keys += ("rrf_k",)
    return {key: system[key] for key in sorted(set(keys)) if key in system}


def external_inputs(system: Mapping[str, Any]) -> list[str]:
    """What a system's method reads from outside the pipeline: its run file (method run-file), or
    its Python retriever's module, the top-level package folder and file in the project root
    (method python; both named, one missing: the module's appearing moves them too)."""
    if system.get("method") == "run-file" and system.get("run_file"):
        return [str(system["run_file"])]
    if system.get("method") == "python" and system.get("python"):
        top = str(system["python"]).partition(":")[0].split(".")[0]
        return [top, f"{top}.py"] if top else []
    return []
