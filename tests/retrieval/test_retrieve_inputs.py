"""What a panel system's kept run is keyed on (retrieval.inputs.retrieve_inputs): what its method
reads, so a change there computes it again and nothing else does."""

from __future__ import annotations

from retrieval_bench.core import paths
from retrieval_bench.retrieval.inputs import retrieve_inputs


def system(**keys: object) -> dict:
    return {"chunking": "c400", "embedder": "seq64", "method": "dense", "trec_export": None, **keys}


def test_every_system_is_keyed_on_its_questions_chunks_and_vectors_and_its_settings():
    files, settings = retrieve_inputs(system(), "mine")
    assert files[:2] == [paths.GOLDENSET, paths.chunks_of("c400")]
    assert set(files[2:]) == {*paths.corpus_vectors("c400", "seq64")[:2], *paths.question_vectors("seq64")[:2]}
    assert settings == {"system": "mine", **system()}


def test_what_a_method_reads_besides_is_in_its_key_alone():
    def extra(**keys: object) -> set[str]:
        return set(retrieve_inputs(system(**keys), "mine")[0]) - set(retrieve_inputs(system(), "mine")[0])

    assert extra(method="store") == {paths.STORE_STAMP}  # a rebuilt store, not any system's
    assert extra(method="run-file", run_file="runs/other.trec") == {"runs/other.trec"}
    assert extra(method="python", python="mine.retrievers:search") == {paths.EXTERNAL_RUNS, "mine", "mine.py"}
    assert extra(method="bm25") == set() and extra(method="hybrid") == set()
