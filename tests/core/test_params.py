"""params.yaml: no key DVC would misread, every key checked, typos told the closest valid key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import DEFAULTS, load_all_params, require_dvc_keys
from retrieval_bench.core.params_panel import embedded_pairs, settings_key
from retrieval_bench.core.params_sections import DVC_IGNORED_KEYS

ROOT = Path(__file__).resolve().parents[2]


def leaves(tree, path=()):
    for key, value in tree.items():
        yield (*path, key)
        if isinstance(value, dict):
            yield from leaves(value, (*path, key))


@pytest.mark.parametrize(
    "tree", [DEFAULTS, yaml.safe_load((ROOT / "params.yaml").read_text())], ids=["defaults", "params.yaml"]
)
def test_no_param_key_is_one_dvc_leaves_out_of_its_run_cache(tree):
    # treeverse/dvc#10296: a key named size or nfiles, at any depth, is dropped from the run-cache key.
    named = [".".join(path) for path in leaves(tree) if path[-1] in DVC_IGNORED_KEYS]
    assert named == []


def test_the_bundled_params_are_valid_and_complete():
    params = load_all_params(ROOT / "params.yaml")
    assert set(params) == set(DEFAULTS) | {"embedded"}  # embedded: derived from the panel, no default of its own
    # The panel is the sample's own (by default the default system alone): its systems are retrieval overrides.
    written = {
        ".".join(p)
        for p in leaves(yaml.safe_load((ROOT / "params.yaml").read_text()))
        if p[0] != "embedded" and (p[0] not in ("panel", "chunkings", "embedders") or len(p) == 1)
    }
    named = {".".join(p) for p in leaves(DEFAULTS) if p[0] not in ("panel", "chunkings", "embedders") or len(p) == 1}
    assert written == named  # every default is visible to the user (the names are the user's own)
    panel, chunkings, embedders = (params.pop(name) for name in ("panel", "chunkings", "embedders"))
    assert params.pop("embedded") == embedded_pairs(panel)
    assert params == {
        key: value for key, value in DEFAULTS.items() if key not in ("panel", "chunkings", "embedders")
    }  # and params.yaml states the defaults
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    # Each named chunking, embedder and system is its base section with what params.yaml writes for it
    # laid over it (nested keys one by one), whatever the sample's names.
    assert chunkings == {name: merged(params["load"]["chunking"], raw["chunkings"][name]) for name in raw["chunkings"]}
    assert embedders == {name: merged(params["embed"], raw["embedders"][name]) for name in raw["embedders"]}
    assert panel == {name: merged(params["retrieval"], raw["panel"][name]) for name in raw["panel"]}
    # The sample's panel is a decision between models and chunk sizes (issue 29): at least two of
    # each, every one used by a system, and the default system is the retrieval section itself.
    assert len(chunkings) >= 2 and {system["chunking"] for system in panel.values()} == set(chunkings)
    assert len(embedders) >= 2 and {system["embedder"] for system in panel.values()} == set(embedders)
    assert panel["default"] == {**params["retrieval"], "chunking": "default", "embedder": "default"}


def merged(base: dict, written: dict | None) -> dict:
    """`written` laid over `base`, nested mappings key by key (an independent reading of the rule)."""
    out = dict(base)
    for key, value in (written or {}).items():
        out[key] = merged(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def write(tmp_path: Path, tree: dict) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        ({"load": {"chunk_size": 500}}, "unknown key params.load.chunk_size; did you mean params.load.chunking?"),
        ({"scoring": {"k": [1]}}, "unknown key params.scoring; did you mean params.score?"),
        (
            {"load": {"chunking": {"size": 400}}},
            "it is called params.load.chunking.chars now (DVC ignores param keys named nfiles/size: treeverse/dvc#10296)",
        ),
        ({"score": {"ties": "random"}}, "score.ties must be one of expected, optimistic, pessimistic, got 'random'"),
        ({"score": {"weights": "real"}}, "score.weights must be one of none, real-mix, got 'real'"),
        ({"retrieval": {"bm25": {"stemmer": "porter"}}}, "retrieval.bm25.stemmer must be one of english, none"),
        (
            {"load": {"chunking": {"chars": 400, "overlap": 400}}},
            "load.chunking needs chars > 0 and 0 <= overlap < chars",
        ),
        ({"load": {"chunking": {"chars": "800"}}}, "params.load.chunking.chars must be int, got '800'"),
        (
            {"panel": {"bm25": {"chunking": "default", "embedder": "default", "method": "bm42"}}},
            "panel.bm25.method must be one of",
        ),
        (
            {"panel": {"ann": {"chunking": "default", "embedder": "default", "ann": {"ef_serch": 8}}}},
            "unknown key params.panel.ann.ann.ef_serch; did you mean params.panel.ann.ann.ef_search?",
        ),
        ({"panel": {"bad name": {"method": "bm25"}}}, "panel name 'bad name' is not usable"),
        (  # `1:` unquoted: the rule it was told ("digits") seemed to allow it
            {"panel": {1: {"method": "bm25"}}},
            "panel name 1 is not usable: it names a params key (panel.NAME) and a folder (data/panel/NAME), so it "
            "must be 1-64 ASCII letters, digits, - and _, starting with a letter or digit; YAML read it as the "
            "number 1: quote the name as you wrote it",
        ),
        (
            {"panel": {"x": {"chunking": "default", "embedder": "default", "depth": 0}}},
            "panel.x.depth must be a positive int (chunks per question) or 'all'",
        ),
        ({"panel": ["dense"]}, "panel must be a mapping of system names to retrieval settings"),
        (
            {
                "load": {"source": "lancedb:stores/docs.lancedb?table=chunks"},
                "panel": {
                    "s1": {
                        "chunking": "default",
                        "embedder": "default",
                        "method": "store",
                        "store": {"search": {"bogus": 1}},
                    }
                },
            },
            "panel.s1.store.search: lancedb has no query parameter 'bogus'",
        ),
        (
            {"panel": {"s1": {"chunking": "default", "embedder": "default", "method": "store"}}},
            "panel.s1.method store needs panel.s1.store.address",
        ),
        ({"validity": {"fail_on": "sometimes"}}, "validity.fail_on must be one of disagrees, none, not-agrees"),
        ({"validity": {"margin": 0}}, "validity.margin must be above 0, got 0"),
        ({"validity": {"level_margin": 1.5}}, "validity.level_margin must be between 0.0 and 1.0, got 1.5"),
        ({"validity": {"max_style_auc": 0.3}}, "validity.max_style_auc must be between 0.5 and 1.0, got 0.3"),
        ({"validity": {"max_style_auc": 0.5}}, "validity.max_style_auc must be above 0.5, got 0.5"),
        (
            {"validity": {"candidates": [["default", "nope"]]}},
            "validity.candidates must be pairs of two different panel systems (default), got ['default', 'nope']",
        ),
        ({"validity": {"candidates": [["default", "default"]]}}, "validity.candidates must be pairs of two different"),
        ({"costs": {"rounds": 0}}, "costs.rounds must be between 1 and 1000, got 0"),
        ({"costs": {"rounds": 2.5}}, "params.costs.rounds must be int, got 2.5"),
        ({"costs": {"embed_texts": 0}}, "costs.embed_texts must be between 1 and 100000, got 0"),
        # the retrieve and score stages run every panel system: the single system moved into the panel
        (
            {"panel": {"bm25": {"chunking": "default", "embedder": "default", "method": "bm25"}}},
            "panel has no `default` system, the one `show`, `compare` and judge.pool read when none is named",
        ),
        ({"panel": {}}, "`default: {chunking: default, embedder: default}` under panel (have: none)"),
        (
            {"judge": {"pool": ["data/run.parquet"]}},
            "judge.pool data/run.parquet moved: the default system's run is data/panel/default/run.parquet",
        ),
        (
            {
                "panel": {
                    "default": {"chunking": "default", "embedder": "default", "trec_export": "runs/a.trec"},
                    "b": {"chunking": "default", "embedder": "default", "method": "bm25", "trec_export": "runs/a.trec"},
                }
            },
            "panel.b and panel.default both write trec_export 'runs/a.trec': give each system a file of its own",
        ),
        (
            {"embed": {"engine": "ray", "device": "cpu", "ray": {"num_gpus_per_actor": 1}}},
            "embed.ray.num_gpus_per_actor > 0 needs embed.backend torch and embed.device null or cuda (got backend torch, device cpu)",
        ),
    ],
)
def test_bad_params_name_the_key_and_what_was_expected(tmp_path, tree, message):
    with pytest.raises(InputError) as error:
        load_all_params(write(tmp_path, tree))
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    "target",
    [
        "dvc.yaml",
        "params.yaml",
        "data/documents.parquet",
        "data/panel/default/run.parquet",
        "metrics/x.trec",
        "src/a.trec",
    ],
)
def test_a_trec_export_never_overwrites_the_projects_own_files(tmp_path, target):
    """retrieve wrote a TREC run over dvc.yaml (and params.yaml, a run.parquet) when told to."""
    with pytest.raises(InputError, match=f"retrieval.trec_export '{target}' would overwrite the project's own files"):
        load_all_params(write(tmp_path, {"retrieval": {"trec_export": target}}))
    for fine in ("runs/dense.trec", "data/dense.trec", "exports/run.txt"):
        assert (
            load_all_params(write(tmp_path, {"retrieval": {"trec_export": fine}}))["retrieval"]["trec_export"] == fine
        )


def test_validity_candidates_name_the_panels_systems(tmp_path):
    """The pairs were checked against the default panel before the file's own panel was read, so
    every pair of the user's systems was refused."""
    pick = {"chunking": "default", "embedder": "default"}
    panel = {"default": pick, "hybrid": {**pick, "method": "hybrid"}, "bm25": {**pick, "method": "bm25"}}
    tree = {"panel": panel, "validity": {"candidates": [["default", "hybrid"]]}}
    assert load_all_params(write(tmp_path, tree))["validity"]["candidates"] == [["default", "hybrid"]]
    tree["validity"]["candidates"] = [["default", "dense"]]
    with pytest.raises(InputError, match=r"panel systems \(bm25, default, hybrid\), got \['default', 'dense'\]"):
        load_all_params(write(tmp_path, tree))


def test_ray_address_local_is_the_engines_own_local_instance(tmp_path):
    """Ray's `local` and null both start the engine's private instance (with its watchdog), never
    the cluster path; so nothing past params.yaml tells them apart."""
    params = load_all_params(write(tmp_path, {"embed": {"ray": {"address": "local"}}}))
    assert params["embed"]["ray"]["address"] is None


def test_a_null_store_address_is_load_source_for_every_reader(tmp_path):
    store = "lancedb:stores/docs.lancedb?table=chunks"
    params = load_all_params(write(tmp_path, {"load": {"source": store}, "retrieval": {"method": "store"}}))
    assert params["retrieval"]["store"]["address"] == store
    other = "qdrant:stores/q?collection=c"
    params = load_all_params(write(tmp_path, {"load": {"source": store}, "retrieval": {"store": {"address": other}}}))
    assert params["retrieval"]["store"]["address"] == other
    assert load_all_params(write(tmp_path, {}))["retrieval"]["store"]["address"] is None  # a path source: no store
    pick = {"chunking": "default", "embedder": "default"}
    panel = {"s1": {**pick, "method": "store", "store": {"address": None}}, "s2": {**pick, "store": {"address": other}}}
    params = load_all_params(write(tmp_path, {"load": {"source": store}, "panel": {"default": pick, **panel}}))
    assert [params["panel"][name]["store"]["address"] for name in panel] == [store, other]


def test_retrieval_trec_export_is_the_default_systems_and_messages_name_what_the_user_wrote(tmp_path):
    """retrieval.trec_export: written by the default system alone (every system inherits the
    retrieval section, and one file cannot hold two runs); another writes only the file it names.
    A system that overrides nothing is the retrieval section, and its messages say retrieval.X."""
    pick = {"chunking": "default", "embedder": "default"}
    panel = {"default": pick, "bm25": {**pick, "method": "bm25"}, "own": {**pick, "trec_export": "runs/own.trec"}}
    params = load_all_params(write(tmp_path, {"retrieval": {"trec_export": "runs/dense.trec"}, "panel": panel}))
    exports = {name: system["trec_export"] for name, system in params["panel"].items()}
    assert exports == {"default": "runs/dense.trec", "bm25": None, "own": "runs/own.trec"}
    assert [settings_key(params, name) for name in panel] == ["retrieval", "panel.bm25", "panel.own"]
    params = load_all_params(write(tmp_path, {"panel": {"default": {**pick, "depth": 50}}}))
    assert settings_key(params, "default") == "panel.default"  # its own depth: the key the user wrote


def test_a_settings_object_takes_its_sections_keys_of_the_same_names_and_the_given_ones_over_them():
    from retrieval_bench.corpus.load import LoadSettings
    from retrieval_bench.embedding.settings import EmbedSettings, RaySettings

    params = load_all_params()
    load = LoadSettings.from_params({**params["load"], "split": "dev"})
    assert (load.split, load.id_field) == ("dev", params["load"]["id_field"])
    embed = EmbedSettings.from_params(params["embed"], "embedders.x.model")
    assert embed.model_key == "embedders.x.model" and embed.ray == RaySettings.from_params(params["embed"]["ray"])
    assert (
        embed.batch_size == params["embed"]["batch_size"]
        and embed.document_prompt == params["embed"]["document_prompt"]
    )
    with pytest.raises(KeyError, match="html_skip"):  # a key the section lacks is an error, not a silent default
        LoadSettings.from_params({k: v for k, v in params["load"].items() if k != "html_skip"})


def dvc_listed_keys() -> list[tuple[str, str]]:
    """(stage, key) of every params key dvc.yaml's stages list, templated ones left out."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    return [
        (stage, key)
        for stage, body in stages.items()
        for key in body.get("do", body).get("params") or []
        if isinstance(key, str) and "${" not in key
    ]


def test_every_key_dvc_yaml_lists_must_be_written_in_params_yaml(tmp_path):
    """The library defaults a missing key, DVC refuses it after the stages before have run:
    check_params names it first. Each listed key, removed alone, is the error; all present, none."""
    require_dvc_keys(ROOT / "params.yaml", ROOT / "dvc.yaml")
    listed = dvc_listed_keys()
    assert len(listed) > 40
    for stage, key in listed:
        params = yaml.safe_load((ROOT / "params.yaml").read_text())
        *parents, last = key.split(".")
        holder = params
        for part in parents:
            holder = holder[part]
        del holder[last]
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        with pytest.raises(InputError) as raised:
            require_dvc_keys(tmp_path / "params.yaml", ROOT / "dvc.yaml")
        message = str(raised.value)
        # the first listed key under the one removed (removing embed, embed_corpus's embed.model)
        named, first_stage = next((k, name) for name, k in listed if k == key or k.startswith(f"{key}."))
        assert message.startswith(f"{tmp_path / 'params.yaml'}: {named} is missing: ") and "\n" not in message
        assert f"stage {first_stage} depends on it" in message, (stage, message)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    del params["load"]["split"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    with pytest.raises(InputError, match=r'load\.split is missing: .*stage load_chunks .*add it \(default: "test"\)$'):
        require_dvc_keys(tmp_path / "params.yaml", ROOT / "dvc.yaml")


# The keys no dvc.yaml stage lists, and why: a key missing here and from dvc.yaml is one whose edit
# `dvc repro` skips ("didn't change") while running the stage by hand changes its output.
UNLISTED = {
    # how requests are sent and paid for, not what they ask: a rerun reads the same cached replies
    **{
        f"{section}.{key}": "transport"
        for section in ("generate", "judge")
        for key in (
            "base_url",
            "concurrency",
            "max_retries",
            "max_cost_usd",
            "price",
            "batch_poll_seconds",
            "timeout_s",
        )
    },
    # resolved per system into data/panel_settings by check_params, a file the retrieve stage depends on
    "retrieval": "panel_settings",
    # read by `retrieval-bench review`, no stage
    **{f"review.{key}": "no stage" for key in DEFAULTS["review"]},
}


def test_every_key_that_changes_a_stages_output_is_one_dvc_yaml_lists():
    listed = set()
    for body in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].values():
        for key in (body.get("do", body)).get("params") or []:
            listed |= {key} if isinstance(key, str) else set(key)
    ends = [path for path in leaves(DEFAULTS) if not isinstance(_at(DEFAULTS, path), dict) or not _at(DEFAULTS, path)]
    unlisted = [
        ".".join(path)
        for path in ends
        if not any(".".join(path[:i]) in listed for i in range(1, len(path) + 1))
        and ".".join(path) not in UNLISTED
        and not any(".".join(path[:i]) in UNLISTED for i in range(1, len(path)))
    ]
    assert unlisted == []  # generate.drop_near_duplicates & co were: `dvc repro` kept the old golden set


def _at(tree, path):
    for key in path:
        tree = tree[key]
    return tree
