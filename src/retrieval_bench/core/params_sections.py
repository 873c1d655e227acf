"""params.yaml read as YAML within bounds, a key twice refused; its embed section and retrieval's
rerank and ANN settings checked (params.py checks the rest), with the numeric bounds beyond which a
value only costs time or memory."""

from __future__ import annotations

import math
import re
import sys
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from retrieval_bench.core.endpoints import http_url_problem
from retrieval_bench.core.errors import InputError, describe_os_error, quoted
from retrieval_bench.core.files import file_state
from retrieval_bench.core.question_sets import QUESTION_KINDS
from retrieval_bench.core.values import trec_record

# DVC leaves every param key named `size` or `nfiles` out of its run-cache key
# (treeverse/dvc#10296), so a change to such a key is silently served stale outputs: no key of
# params.yaml, at any depth, may have those names.
DVC_IGNORED_KEYS = {"size", "nfiles"}

# A params file is a few kilobytes: these bounds refuse, in one line, what would otherwise take
# minutes or all the memory (a multi-gigabyte file, /dev/zero, a YAML alias bomb) or a traceback
# (10,000 nesting levels).
MAX_PARAMS_BYTES = 1 << 20
MAX_NESTING = 32
MAX_VALUES = 100_000  # keys and items, aliases counted each time they are used


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, line: int, first: int) -> None:
        super().__init__(f"line {line}: key {key!r} appears twice (first at line {first})")


class _ParamsLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML's safe loader that refuses a key written twice in one mapping (PyYAML keeps the last,
    silently; DVC refuses the file)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # keys merged in may be overridden
                continue
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            try:
                if key in first_lines:
                    raise _DuplicateKey(key, line, first_lines[key])
                first_lines[key] = line
            except TypeError:  # an unhashable key: the constructor names it below
                break
        mapping: dict[Any, Any] = super().construct_mapping(node, deep)
        return mapping


# Scalars as YAML 1.2 reads them, as DVC reads params.yaml (ruamel): booleans are true and false
# only (YAML 1.1 also took yes/no/on/off: a panel system named `on` was True here and "on" to
# DVC); an integer with a leading zero is decimal (0100 was 64 here, 100 to DVC), 0o/0x/0b mark
# octal, hexadecimal and binary; 1:30 is text (YAML 1.1's base 60); 1e3 is a float.
_BOOL, _INT, _FLOAT = (f"tag:yaml.org,2002:{name}" for name in ("bool", "int", "float"))
_ParamsLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag not in (_BOOL, _INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_ParamsLoader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_ParamsLoader.add_implicit_resolver(
    _INT, re.compile(r"^[-+]?(?:0x[0-9a-fA-F_]+|0o[0-7_]+|0b[01_]+|[0-9][0-9_]*)$"), list("-+0123456789")
)
_ParamsLoader.add_implicit_resolver(
    _FLOAT,
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
        |[0-9][0-9_]*[eE][-+]?[0-9]+
        |\.(?:inf|Inf|INF))
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def _yaml_12_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node)).replace("_", "")
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    base = {"0x": 16, "0o": 8, "0b": 2}.get(digits[:2].lower(), 10)
    try:
        value = sign * int(digits[2:] if base != 10 else digits, base)
    except ValueError:  # over Python's 4,300 decimal digits
        value = None
    if value is None or abs(value) > sys.float_info.max:  # beyond any float: no setting takes it
        raise yaml.constructor.ConstructorError(
            None, None, f"an integer of {len(digits)} digits is no setting's value", node.start_mark
        )
    return value


_ParamsLoader.add_constructor(_INT, _yaml_12_int)


def read_yaml_file(path: Path) -> Any:
    """What the YAML file `path` holds; anything else (not a regular file, too large, not UTF-8,
    invalid YAML, a key twice in a mapping, an alias bomb) is a one-line InputError naming the
    file and, where there is one, the line."""
    try:
        state = file_state(path)
        if state == "not found":
            raise FileNotFoundError(path)
        if state is not None:
            raise InputError(f"{path}: {state}; expected the params file (YAML)")
        with open(path, "rb") as handle:
            data = handle.read(MAX_PARAMS_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: not found (run from the project root)") from None
    except OSError as error:
        raise InputError(f"{path}: cannot read it ({describe_os_error(error)})") from None
    return parse_yaml(data, path)


def parse_yaml(data: bytes, where: str | Path) -> Any:
    """What the YAML bytes `data` (read from `where`, a file or a file at a git revision) hold, as
    DVC reads params (YAML 1.2: `on` is a string, `1e-3` a number); too large, not UTF-8, invalid
    YAML or a key twice in a mapping is one InputError."""
    if len(data) > MAX_PARAMS_BYTES:
        raise InputError(f"{where}: over {MAX_PARAMS_BYTES >> 20} MiB; a params file is a few kilobytes of YAML")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise InputError(
            f"{where} line {line}: not UTF-8 text (byte {error.start}: 0x{data[error.start]:02x}); save it as UTF-8"
        ) from None
    try:
        return yaml.load(text, Loader=_ParamsLoader)
    except _DuplicateKey as error:
        raise InputError(f"{where} {error}") from None
    except yaml.YAMLError as error:
        raise InputError(f"{where}: invalid YAML{_yaml_problem(error, text)}") from None
    except RecursionError:  # the pure-Python loader (libyaml stops at 1,000 levels itself)
        raise InputError(f"{where}: invalid YAML (nested too deeply)") from None


def _yaml_problem(error: yaml.YAMLError, text: str) -> str:
    """Where the parser stopped and what it found, for the one-line message."""
    mark = getattr(error, "problem_mark", None)
    if isinstance(error, yaml.reader.ReaderError):
        line = text.count("\n", 0, error.position) + 1
        character = chr(error.character) if isinstance(error.character, int) else error.character  # libyaml: a code
        return f" at line {line}: character {character!r} is not allowed in YAML"
    problem = "; ".join(part for part in (getattr(error, "context", None), getattr(error, "problem", None)) if part)
    if mark is None:
        return f" ({problem or str(error).splitlines()[0]})"
    lines = text.splitlines()
    if mark.line < len(lines) and lines[mark.line][mark.column : mark.column + 1] == "\t":
        problem += "; YAML indents with spaces, not tabs"
    return f" at line {mark.line + 1}, column {mark.column + 1} ({problem})"


def first_ignored_key(raw: dict[Any, Any], path: Path) -> str | None:
    """Refuse a tree nested over MAX_NESTING levels or of over MAX_VALUES values (aliases expanded);
    return the dotted path of the first key DVC leaves out of its run-cache key, or None."""
    ignored = None
    queue: deque[tuple[str, Any, int]] = deque([("", raw, 0)])  # breadth first: the shallowest key is named
    seen = 0
    while queue:
        where, node, depth = queue.popleft()
        if depth > MAX_NESTING:
            raise InputError(f"{path}: {quoted(where[1:], 80)} is nested over {MAX_NESTING} levels deep")
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in children:
            seen += 1
            if seen > MAX_VALUES:
                raise InputError(
                    f"{path}: over {MAX_VALUES:,} keys and values (YAML aliases counted where used); "
                    "a params file holds a few hundred"
                )
            dotted = f"{where}.{key}" if isinstance(node, dict) else f"{where}[{key}]"
            if ignored is None and isinstance(node, dict) and key in DVC_IGNORED_KEYS:
                ignored = dotted[1:]
            queue.append((dotted, child, depth + 1))
    return ignored


# (lowest, highest) of numeric params: beyond the upper bound a value only costs time or memory
# (retrieval.ann.ef_search 1e8 searched for hours), so it is refused, as NaN is.
EMBED_BOUNDS = {
    "batch_size": (1, 65_536),
    "ray.num_actors": (1, 1024),
    "ray.batch_size": (1, 1 << 20),
    "ray.num_cpus_per_actor": (0, 1024),
    "ray.num_gpus_per_actor": (0, 64),
    "ray.timeout_s": (0.1, 600),
}
ANN_BOUNDS = {
    "hnsw_m": (2, 256),
    "ef_construction": (1, 4096),
    "ef_search": (1, 32_768),
    "nlist": (1, 1 << 20),
    "nprobe": (1, 1 << 20),
    "pq_m": (1, 1024),
    "pq_bits": (1, 16),
}


def check_bounds(section: dict[str, Any], bounds: Mapping[str, tuple[float, float]], where: str, path: Path) -> None:
    for key, (lowest, highest) in bounds.items():
        group, _, name = key.rpartition(".")
        value = section[group][name] if group else section[name]
        if not lowest <= value <= highest:  # NaN is refused too
            raise InputError(f"{path}: {where}.{key} must be between {lowest} and {highest}, got {value!r}")


def check_embed(embed: dict[str, Any], where: str, path: Path) -> None:
    """The embed section, or an embedder over it (`where`: embed or embedders.NAME, the key the
    messages name)."""
    if not embed["model"].strip():  # an empty path names the working folder, which is no model
        raise InputError(
            f"{path}: {where}.model must be a sentence-transformers model id or local path, got {embed['model']!r}"
        )
    device = embed["device"]
    if device is not None and not (isinstance(device, str) and re.fullmatch(r"cpu|mps|cuda(:\d+)?", device)):
        raise InputError(f"{path}: {where}.device must be null (auto), cpu, cuda, cuda:N or mps, got {device!r}")
    if embed["quantize"] == "int8" and embed["backend"] != "onnx":
        raise InputError(f"{path}: {where}.quantize int8 needs {where}.backend onnx, got {embed['backend']!r}")
    if embed["backend"] == "onnx" and embed["precision"] != "fp32":
        raise InputError(
            f"{path}: {where}.precision {embed['precision']} is not available with {where}.backend onnx "
            "(fp32 only; bf16/fp16: openvino or torch)"
        )
    if embed["backend"] != "torch" and device not in (None, "cpu"):
        raise InputError(
            f"{path}: {where}.device {device!r} needs {where}.backend torch ({embed['backend']} runs on the CPU here)"
        )
    ray = embed["ray"]
    address = ray["address"]
    if address is not None and not (isinstance(address, str) and address.strip()):
        raise InputError(
            f"{path}: {where}.ray.address must be null (start a local Ray), auto or host:port, got {address!r}"
        )
    if address == "local":  # Ray's own name for a new local instance: the engine's private one, watchdog and all
        ray["address"] = None
    check_bounds(embed, EMBED_BOUNDS, where, path)
    if (
        embed["engine"] == "ray"
        and ray["num_gpus_per_actor"] > 0
        and (embed["backend"] != "torch" or device not in (None, "cuda"))
    ):
        raise InputError(
            f"{path}: {where}.ray.num_gpus_per_actor > 0 needs {where}.backend torch and {where}.device null or cuda "
            f"(got backend {embed['backend']}, device {device})"
        )


def check_style_examples(generate: dict[str, Any], path: Path) -> None:
    examples = generate["style_examples"]
    if examples is not None and not (isinstance(examples, str) and examples.strip()):
        raise InputError(f"{path}: generate.style_examples must be a file path or null, got {examples!r}")
    if not 1 <= generate["style_examples_count"] <= STYLE_EXAMPLES_MAX:
        raise InputError(
            f"{path}: generate.style_examples_count must be 1-{STYLE_EXAMPLES_MAX} (each is sent in every request), "
            f"got {generate['style_examples_count']!r}"
        )


STYLE_EXAMPLES_MAX = 50  # few-shot style examples per question prompt: each is paid for in every request
KINDS_MATCH = "match"  # generate.kinds: generate in the mix of the real (else hand-written) questions
SHARES_TOLERANCE = 1e-9


def check_kinds(generate: dict[str, Any], path: Path) -> None:
    """generate.kinds: `match`, or a mapping of known kinds to shares >= 0 that sum to 1."""
    kinds = generate["kinds"]
    if kinds == KINDS_MATCH:
        return
    if not isinstance(kinds, dict) or not kinds:
        raise InputError(
            f"{path}: generate.kinds must be a mapping of kinds to shares (e.g. {{single: 0.8, multi: 0.2}}) "
            f"or {KINDS_MATCH}, got {kinds!r}"
        )
    for kind, share in kinds.items():
        if kind not in QUESTION_KINDS:
            raise InputError(f"{path}: generate.kinds.{kind}: unknown kind (kinds: {', '.join(QUESTION_KINDS)})")
        if isinstance(share, float) and not math.isfinite(share):  # worded as every other float param's
            raise InputError(f"{path}: params.generate.kinds.{kind} must be a finite number, got {share!r}")
        if isinstance(share, bool) or not isinstance(share, (int, float)):
            raise InputError(f"{path}: generate.kinds.{kind} must be a share between 0 and 1, got {share!r}")
        if share < 0:
            raise InputError(f"{path}: generate.kinds.{kind} is a negative share ({share!r}): shares are >= 0")
    for kind, share in kinds.items():  # after every negative one (and before fsum, which two huge ones overflow)
        if share > 1:
            raise InputError(f"{path}: generate.kinds.{kind} must be a share between 0 and 1, got {quoted(share)}")
    total = math.fsum(kinds.values())
    if abs(total - 1) > SHARES_TOLERANCE:
        listed = ", ".join(f"{kind}: {share}" for kind, share in kinds.items())
        raise InputError(f"{path}: generate.kinds: the shares sum to {round(total, 12)}, not 1 ({{{listed}}})")


# corpus.duplicates' MinHash search: its hashes, and the least probability with which it proposes a
# pair at load.duplicates.min_jaccard; below MIN_JACCARD not even one row per band reaches it.
NEAR_DUPLICATE_HASHES, NEAR_DUPLICATE_PROPOSED = 64, 0.999
MIN_JACCARD = math.ceil((1 - (1 - NEAR_DUPLICATE_PROPOSED) ** (1 / NEAR_DUPLICATE_HASHES)) * 1000) / 1000  # 0.103


def check_similarity_bars(params: dict[str, Any], path: Path) -> None:
    for where in ("load.duplicates.min_jaccard", "generate.near_duplicate_jaccard"):
        node: Any = params
        for key in where.split("."):
            node = node[key]
        if not 0 < node <= 1:
            raise InputError(f"{path}: {where} must be in (0, 1], got {node!r}")
    if params["load"]["duplicates"]["min_jaccard"] < MIN_JACCARD:
        raise InputError(
            f"{path}: load.duplicates.min_jaccard must be at least {MIN_JACCARD:.3f} (below it the MinHash search of "
            f"near-duplicates cannot promise to find 99.9% of the pairs), got {params['load']['duplicates']['min_jaccard']!r}"
        )


def check_inside(target: str | None, where: str, path: Path) -> None:
    """An output path must stay inside the project (the folder of params.yaml), symbolic links
    followed: a params.yaml from a pull request must not write anywhere else on the machine."""
    if target is None:
        return
    root = path.resolve().parent
    resolved = (root / target).resolve()
    if not resolved.is_relative_to(root) or resolved == root:
        raise InputError(
            f"{path}: {where} {target!r} is outside the project ({root}); give a path inside it, e.g. runs/run.trec"
        )


# What an export (panel.NAME.trec_export) must never overwrite: the project's own files and folders,
# and under data/ the pipeline's outputs (a TREC run goes straight in data/ as NAME.trec, or anywhere
# else in the project, as runs/NAME.trec).
PROJECT_FILES = {
    "dvc.yaml",
    "dvc.lock",
    "params.yaml",
    "pyproject.toml",
    "Makefile",
    "README.md",
    "CHANGELOG.md",
    "mkdocs.yml",
}
PROJECT_FOLDERS = {".dvc", ".git", "src", "stages", "tests", "docs", "bench", "metrics"}


def check_export_target(target: str | None, where: str, path: Path) -> None:
    """An export path inside the project (check_inside) that overwrites none of its own files."""
    check_inside(target, where, path)
    if target is None:
        return
    root = path.resolve().parent
    relative = (root / target).resolve().relative_to(root)
    parts = relative.parts
    in_data = parts[0] == "data" and not (len(parts) == 2 and relative.suffix == ".trec")
    hidden = parts[0].startswith(".")  # .git, .dvc, .github, .ci, .gitignore, .dvcignore
    if relative.as_posix() in PROJECT_FILES or parts[0] in PROJECT_FOLDERS or in_data or hidden:
        raise InputError(
            f"{path}: {where} {target!r} would overwrite the project's own files (its top-level files, {', '.join(sorted(PROJECT_FOLDERS))}, "
            "hidden files and folders, and the pipeline's outputs under data/): write it to runs/NAME.trec, or data/NAME.trec"
        )
    written = root / relative
    if written.is_dir():  # refused here, not by retrieve after every stage before it ran
        raise InputError(f"{path}: {where} {target!r} is a folder; name a file to write, e.g. runs/NAME.trec")
    if written.is_file() and not _is_trec_run(written):
        raise InputError(
            f"{path}: {where} {target!r} exists and is not a TREC run: it would be overwritten (LICENSE, a "
            "retriever's code, someone's notes); name a new file, e.g. runs/NAME.trec"
        )


def _is_trec_run(path: Path) -> bool:
    """Whether `path` starts as a TREC run does (`qid Q0 chunk_id rank score tag`), or is empty: what
    a trec_export may replace, its own earlier export."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    first = next((line for line in head.split(b"\n") if line.strip()), b"")
    try:
        return not first or bool(trec_record(first.decode("utf-8"), str(path)))
    except (UnicodeDecodeError, InputError):
        return False


RERANK_DEFAULT_MODEL = "cross-encoder/ms-marco-MiniLM-L6-v2"  # the usual choice, named in the error below


def check_rerank_and_ann(retrieval: dict[str, Any], where: str, path: Path) -> None:
    """The rerank and ANN settings of one retrieval settings, `where` naming them (retrieval or panel.NAME)."""
    rerank, ann = retrieval["rerank"], retrieval["ann"]
    model = rerank["model"]
    if model is not None and not (isinstance(model, str) and model.strip()):
        raise InputError(
            f"{path}: {where}.rerank.model must be a cross-encoder id or local path, or null, got {model!r}"
        )
    if retrieval["method"] == "rerank" and model is None:
        raise InputError(
            f"{path}: {where}.method rerank needs {where}.rerank.model, a cross-encoder id or local path "
            f"(usually {RERANK_DEFAULT_MODEL}; offline, a local copy of it)"
        )
    choices = {"rerank.first_stage": ("dense", "bm25", "hybrid"), "ann.index": ("hnsw", "ivf-flat", "ivf-pq")}
    for key, allowed in choices.items():
        group, name = key.split(".")
        if retrieval[group][name] not in allowed:
            raise InputError(
                f"{path}: {where}.{key} must be one of {', '.join(allowed)}, got {retrieval[group][name]!r}"
            )
    for key in ("candidates", "batch_size"):
        if rerank[key] <= 0:
            raise InputError(f"{path}: {where}.rerank.{key} must be a positive integer, got {rerank[key]!r}")
    check_bounds(ann, ANN_BOUNDS, f"{where}.ann", path)
    if ann["nprobe"] > ann["nlist"]:
        raise InputError(
            f"{path}: {where}.ann.nprobe ({ann['nprobe']}) cannot exceed {where}.ann.nlist ({ann['nlist']})"
        )


# The request settings of an LLM section (generate, judge): seconds per request, and how replies are asked for.
REQUEST_TIMEOUT_S = 120.0
MIN_TIMEOUT_S = 0.1  # below it no server answers, so every request would fail as timed out
MAX_TIMEOUT_S = 3600.0  # an hour per request: beyond it a stuck server only holds the run
MAX_TEMPERATURE = 2.0  # OpenAI's and vLLM's upper bound
RESPONSE_FORMATS = ("text", "json_schema")


def check_llm_requests(settings: dict[str, Any], section: str, path: Path) -> None:
    """Where and how an LLM section's requests go: base URL, spend limit, timeout, reply format,
    temperature, model alias."""
    base_url = settings["base_url"]
    problem = http_url_problem(base_url) if isinstance(base_url, str) else "is not a text"
    if base_url is not None and problem:
        raise InputError(f"{path}: {section}.base_url must be an http(s) URL or null; it {problem}: got {base_url!r}")
    limit = settings["max_cost_usd"]
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0):
        raise InputError(
            f"{path}: {section}.max_cost_usd must be a positive number of US dollars or null (no limit), got {limit!r}"
        )
    if settings["response_format"] not in RESPONSE_FORMATS:
        raise InputError(
            f"{path}: {section}.response_format must be one of {', '.join(RESPONSE_FORMATS)}, "
            f"got {settings['response_format']!r}"
        )
    timeout = settings["timeout_s"]
    if not MIN_TIMEOUT_S <= timeout <= MAX_TIMEOUT_S:
        raise InputError(
            f"{path}: {section}.timeout_s must be seconds per request, "
            f"from {MIN_TIMEOUT_S:g} to {MAX_TIMEOUT_S:g}, got {timeout!r}"
        )
    temperature = settings["temperature"]
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
            raise InputError(f"{path}: {section}.temperature must be a number or null, got {temperature!r}")
        if not 0 <= temperature <= MAX_TEMPERATURE:
            raise InputError(
                f"{path}: {section}.temperature must be null (the server's default) or between 0 and "
                f"{MAX_TEMPERATURE}, got {temperature!r}"
            )
    alias = settings["model_alias"]
    if alias is not None and not (isinstance(alias, str) and alias.strip()):
        raise InputError(
            f"{path}: {section}.model_alias must be null (the cache key uses {section}.model) or a name, got {alias!r}"
        )


# review.sample: questions on the review page (at most the golden set's, checked where it is read);
# review.depth: the top chunks of each panel system shown per question
REVIEW_BOUNDS = {"sample": (1, 100_000), "seed": (0, 2**32 - 1), "depth": (1, 100)}
VALIDITY_BOUNDS = {"margin": (0.0, 1.0), "level_margin": (0.0, 1.0), "max_style_auc": (0.5, 1.0)}


def check_validity(validity: dict[str, Any], systems: list[str], path: Path) -> None:
    """The certificate's margins and bar in range, and each named candidate pair two distinct
    panel systems."""
    check_bounds(validity, VALIDITY_BOUNDS, "validity", path)
    for key, lowest in (("margin", 0.0), ("level_margin", 0.0), ("max_style_auc", 0.5)):
        if validity[key] <= lowest:  # an AUC bar of 0.5 would bar every set from agreeing
            raise InputError(f"{path}: validity.{key} must be above {lowest:g}, got {validity[key]!r}")
    for pair in validity["candidates"]:
        named = isinstance(pair, list) and len(pair) == 2 and all(isinstance(name, str) for name in pair)
        if not (named and pair[0] != pair[1] and set(pair) <= set(systems)):
            raise InputError(
                f"{path}: validity.candidates must be pairs of two different panel systems "
                f"({', '.join(systems)}), got {pair!r}"
            )
