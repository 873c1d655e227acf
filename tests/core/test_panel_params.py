"""chunkings, embedders and the panel systems that pick them: each name's settings over its base
section, and every mistake one line naming the key the user wrote."""

from __future__ import annotations

import pytest
import yaml
from conftest import ROOT

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import load_all_params
from retrieval_bench.core.params_panel import named, panel_system

SYSTEM = {"chunking": "default", "embedder": "default", "method": "dense"}


def write(tmp_path, **sections) -> str:
    params = {
        "chunkings": {"default": {}, "c400": {"chars": 400, "overlap": 50}},
        "embedders": {"default": {}, "seq64": {"max_seq_length": 64}},
        "panel": {"default": {"chunking": "default", "embedder": "default"}, "a": SYSTEM},
        **sections,
    }
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return str(path)


def error(tmp_path, **sections) -> str:
    with pytest.raises(InputError) as caught:
        load_all_params(write(tmp_path, **sections))
    assert "\n" not in str(caught.value)
    return str(caught.value)


def test_each_chunking_and_embedder_is_its_keys_over_the_base(tmp_path):
    params = load_all_params(write(tmp_path, load={"chunking": {"chars": 1000, "overlap": 100}}))
    assert named(params, "chunkings", "default") == {"chars": 1000, "overlap": 100}
    assert named(params, "chunkings", "c400") == {"chars": 400, "overlap": 50}
    seq64 = named(params, "embedders", "seq64")
    assert seq64["max_seq_length"] == 64 and seq64["model"] == params["embed"]["model"]
    assert seq64["batch_size"] == params["embed"]["batch_size"]  # how to embed: shared by every embedder
    assert named(params, "embedders", "default") == params["embed"]
    system = panel_system(params["panel"], "a")
    assert (system["chunking"], system["embedder"], system["method"]) == ("default", "default", "dense")


@pytest.mark.parametrize(
    ("sections", "says"),
    [
        ({"chunkings": {"c400": {"chars": 400}}}, "chunkings must be a mapping of names to settings with a `default`"),
        ({"chunkings": {"default": {}, "c4": {"chars": 400, "stride": 5}}}, "unknown key chunkings.c4.stride"),
        ({"chunkings": {"default": {}, "c4": {"size": 400}}}, "size"),
        ({"chunkings": {"default": {}, "c4": {"chars": 40, "overlap": 40}}}, "chunkings.c4 needs chars > 0"),
        ({"chunkings": {"default": {}, "c.4": {}}}, "chunkings name 'c.4' is not usable"),
        ({"embedders": {"default": {}, "x": {"backend": "tpu"}}}, "embedders.x.backend must be one of"),
        ({"embedders": {"default": {}, "x": {"batch_size": 8}}}, "unknown key embedders.x.batch_size"),
        ({"embedders": {"default": {}, "x": {"max_seq_length": 0}}}, "embedders.x.max_seq_length must be a positive"),
        (
            {"embedders": {"default": {}, "x": {"quantize": "int8"}}},
            "embedders.x.quantize int8 needs embedders.x.backend onnx",
        ),
        ({"panel": {"a": {"method": "dense"}}}, "panel.a must name its chunking"),
        ({"panel": {"a": {"chunking": "default", "method": "bm25"}}}, "panel.a must name its embedder"),
        (
            {"panel": {"a": {**SYSTEM, "chunking": "c300"}}},
            "panel.a.chunking 'c300' is not one of chunkings: default, c400",
        ),
        ({"panel": {"a": {**SYSTEM, "embedder": "mpnet"}}}, "panel.a.embedder 'mpnet' is not one of embedders"),
        ({"panel": {"a": {**SYSTEM, "depth": 0}}}, "panel.a.depth must be a positive int"),
    ],
)
def test_a_mistake_is_one_line_naming_the_key(tmp_path, sections, says):
    assert says in error(tmp_path, **sections)


def test_a_size_key_under_a_chunking_is_refused_with_the_reason(tmp_path):
    message = error(tmp_path, chunkings={"default": {}, "c4": {"size": 400}})
    assert "chunkings.c4.size" in message and "10296" in message


def test_a_stage_argument_naming_nothing_lists_the_names(tmp_path):
    params = load_all_params(write(tmp_path))
    with pytest.raises(InputError, match="embedders has no 'mpnet' \\(have: default, seq64\\)"):
        named(params, "embedders", "mpnet")


def test_what_to_write_reads_back_as_written():
    """A name YAML reads as a number or a boolean ('017' as 15, 'yes' as true) is quoted in the
    line that says what to write: pasted unquoted, it failed again."""
    from retrieval_bench.core.errors import flow_yaml

    value = {"017": {"chunking": "default", "embedder": "yes"}, "c400-e5": {"chunking": "c400", "embedder": "e5"}}
    spelled = flow_yaml(value)
    assert yaml.safe_load(spelled) == value and "\n" not in spelled
    assert flow_yaml({"default-default": {"chunking": "default", "embedder": "default"}}) == (
        "{default-default: {chunking: default, embedder: default}}"
    )


def test_embedded_is_the_panels_pairs_and_a_drifted_list_says_what_to_write(tmp_path):
    """params.yaml's `embedded` (DVC's embed_corpus stages) is derived from the panel: a pair no
    system uses is refused (it would be embedded for nothing), one missing too; two pairs that
    would share a stage name are refused."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["panel"] = {"default": {"chunking": "default", "embedder": "default"}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))  # the sample's 4 pairs, a panel using one
    with pytest.raises(
        InputError, match=r"write embedded: \{default-default: \{chunking: default, embedder: default\}\}$"
    ):
        load_all_params(path)
    params["embedded"] = {"default-default": {"chunking": "default", "embedder": "default"}}
    path.write_text(yaml.safe_dump(params))
    assert load_all_params(path)["embedded"] == params["embedded"]
    params["chunkings"]["a-b"] = {}
    params["embedders"]["b-c"], params["embedders"]["c"] = {}, {}
    params["chunkings"]["a"] = {}
    params["panel"] |= {"one": {"chunking": "a-b", "embedder": "c"}, "two": {"chunking": "a", "embedder": "b-c"}}
    del params["embedded"]
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(InputError, match="would both be embedded by stage embed_corpus@a-b-c"):
        load_all_params(path)


def test_a_chunking_only_bm25_systems_use_is_never_embedded(tmp_path, monkeypatch):
    """embedded had to hold c400-default for a BM25-only system on c400: embed_corpus@c400-default
    embedded the whole chunking for no reader. Its retrieve key names no vectors either."""
    from retrieval_bench.retrieval.inputs import retrieve_inputs

    panel = {
        "default": {"chunking": "default", "embedder": "default"},
        "bm25-c400": {"chunking": "c400", "embedder": "default", "method": "bm25"},
        "rerank-bm25": {
            "chunking": "c400",
            "embedder": "seq64",
            "method": "rerank",
            "rerank": {"model": "m", "first_stage": "bm25"},
        },
    }
    needed = {"default-default": {"chunking": "default", "embedder": "default"}}
    params = load_all_params(write(tmp_path, panel=panel, embedded=needed))
    assert params["embedded"] == needed  # c400-default and c400-seq64 left out: only BM25 systems use them
    every = {**needed, "c400-default": {"chunking": "c400", "embedder": "default"}}
    assert load_all_params(write(tmp_path, panel=panel, embedded=every))["embedded"] == every  # may be kept
    assert (
        "write embedded: {default-default: {chunking: default, embedder: default}} (may add c400-default, c400-seq64"
        in (error(tmp_path, panel=panel, embedded={}))
    )
    monkeypatch.chdir(tmp_path)
    files, _ = retrieve_inputs(params["panel"]["bm25-c400"], "bm25-c400")
    assert not any("embeddings" in str(file) for file in files)
    files, _ = retrieve_inputs(params["panel"]["default"], "default")
    assert any("embeddings" in str(file) for file in files)


def test_stored_vectors_are_read_only_by_the_default_chunking_of_embed_s_own_settings(tmp_path):
    """With embed.corpus_vectors stored the sample's seq64 embedder (64 tokens) read the store's
    vectors too, and its stage stopped: "not made by embed.model ... as configured" (cosine 0.46),
    naming settings that were right."""
    from retrieval_bench.core.params_panel import reads_stored_vectors

    embedders = {"default": {}, "seq64": {"max_seq_length": 64}, "asks": {"query_prompt": "query: "}}
    store = {"source": "lancedb:stores/x.lancedb?table=chunks"}
    params = load_all_params(
        write(tmp_path, load=store, embed={"corpus_vectors": "stored"}, embedders=embedders, embedded=None)
    )
    assert reads_stored_vectors(params, "default", "default")
    assert reads_stored_vectors(params, "default", "asks")  # a query prompt leaves the corpus vectors as they are
    assert not reads_stored_vectors(params, "default", "seq64")
    assert not reads_stored_vectors(params, "c400", "default")  # another chunking cuts the documents anew
    plain = load_all_params(write(tmp_path, embedded=None))
    assert not reads_stored_vectors(plain, "default", "default")


def test_an_embedder_no_vector_system_uses_is_named_in_a_warning(tmp_path):
    """embed_questions@seq64 loaded its model and embedded every question though no system used it."""
    from retrieval_bench.core.params_panel import unused_embedders

    panel = {
        "default": {"chunking": "default", "embedder": "default"},
        "b": {**SYSTEM, "method": "bm25", "embedder": "seq64"},
    }
    warnings = unused_embedders(load_all_params(write(tmp_path, panel=panel, embedded=None)))
    assert warnings == [  # removing seq64 alone broke params.yaml: b still named it
        "check_params: warning: embedders.seq64 is used by no system that searches vectors; remove it and set the "
        "embedder of b (which search no vectors) to default to skip embed_questions@seq64"
    ]
    assert unused_embedders(load_all_params(write(tmp_path, embedded=None))) == [
        "check_params: warning: embedders.seq64 is used by no system that searches vectors; remove it to skip "
        "embed_questions@seq64"
    ]
