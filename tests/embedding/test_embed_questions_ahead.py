"""embed_corpus embeds the golden set's questions ahead of embed_questions (embedding.questions):
into the very cache embed_questions reads, so it then loads no model; no golden set, an unreadable
one or the Ray engine: nothing done."""

from __future__ import annotations

import copy
import json

import numpy as np

from retrieval_bench.core.params_schema import DEFAULTS
from retrieval_bench.embedding import questions
from retrieval_bench.embedding.settings import EmbedSettings

QUESTIONS = ["How does WAL mode work?", "reset autoincrement counter", "How does WAL mode work?"]


def _settings(**changes) -> EmbedSettings:
    embed = copy.deepcopy(DEFAULTS["embed"])
    embed.update(batch_size=2, **changes)
    return EmbedSettings.from_params(embed)


def test_questions_embedded_ahead_are_served_to_embed_questions_without_a_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    golden = tmp_path / "goldenset.jsonl"
    golden.write_text("".join(json.dumps({"qid": str(i), "question": q}) + "\n" for i, q in enumerate(QUESTIONS)))
    settings = _settings(query_prompt="query: ")
    said: list[str] = []
    ahead = questions.embed_questions_ahead("default", settings, golden, said.append)
    assert ahead is not None and (ahead.cached, ahead.embedded) == (0, 2)
    assert len(said) == 1 and said[0].startswith("embed_corpus: ahead of embed_questions@default, 3 questions")

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded although every question was cached")

    monkeypatch.setattr("retrieval_bench.embedding.embed.embedding_engine", no_model)
    vectors, stats = questions.embed_questions(QUESTIONS, settings, "default")
    assert (stats.cached, stats.embedded) == (2, 0) and vectors.shape == (3, 384)
    np.testing.assert_array_equal(vectors[0], vectors[2])
    # The query prompt is part of the key: another prompt finds nothing cached.
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    _, other = questions.embed_questions(QUESTIONS[:1], _settings(query_prompt=""), "default")
    assert other.embedded == 1


def test_nothing_is_embedded_ahead_without_a_readable_golden_set_or_with_ray(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    golden = tmp_path / "goldenset.jsonl"
    assert questions.embed_questions_ahead("default", _settings(), golden) is None  # not made yet
    golden.write_text('{"qid": "1", "question": "ok?"}\n{broken\n')
    assert questions.embed_questions_ahead("default", _settings(), golden) is None  # embed_questions reports it
    golden.write_text('{"qid": "1", "text": "no question field"}\n')
    assert questions.embed_questions_ahead("default", _settings(), golden) is None
    golden.write_text('{"qid": "1", "question": "ok?"}\n')
    assert questions.embed_questions_ahead("default", _settings(engine="ray"), golden) is None
    assert not (tmp_path / ".dvc").exists()  # no cache written


def test_a_failure_ahead_is_one_line_and_leaves_the_questions_to_embed_questions(tmp_path, monkeypatch):
    from retrieval_bench.core.errors import InputError

    golden = tmp_path / "goldenset.jsonl"
    golden.write_text('{"qid": "1", "question": "ok?"}\n')

    def unwritable(*args, **kwargs):
        raise InputError(".dvc/tmp/retrieval-bench/embeddings/questions/default: permission denied")

    monkeypatch.setattr(questions, "embed_questions", unwritable)
    said: list[str] = []
    assert questions.embed_questions_ahead("default", _settings(), golden, said.append) is None
    assert said == [
        "the golden set's questions were not embedded ahead of embed_questions: "
        ".dvc/tmp/retrieval-bench/embeddings/questions/default: permission denied"
    ]


def test_embed_corpus_loads_each_encoder_once_and_nothing_outlives_it(tmp_path, monkeypatch):
    """Inside loading_once() (embed_corpus's main) the chunks, the questions embedded ahead and the
    cost sample share one encoder; another max_seq_length is another encoder; outside the scope
    every call loads its own (a test's patched load_encoder is never bypassed)."""
    from retrieval_bench.embedding import embed

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    loads: list[int | None] = []

    class Encoder:
        description = "counted"

        def batches(self, items, batch_size):
            yield [key for key, _ in items], np.ones((len(items), 384), np.float32) / np.sqrt(384)

    def counted(model_path, fingerprint, settings, log=print):
        loads.append(settings.max_seq_length)
        return Encoder()

    monkeypatch.setattr(embed, "load_encoder", counted)
    golden = tmp_path / "goldenset.jsonl"
    golden.write_text("".join(json.dumps({"qid": str(i), "question": q}) + "\n" for i, q in enumerate(QUESTIONS)))
    settings, quiet = _settings(), embed.QUIET

    @embed.loading_once()
    def stage() -> None:
        embed.embed_texts(["chunk one", "chunk two"], settings, "", tmp_path / "corpus", progress=quiet)
        assert questions.embed_questions_ahead("default", settings, golden, lambda line: None).embedded == 2
        embed.embedding_task(["a cost sample"], settings, "")()
        embed.embed_texts(["chunk three"], _settings(max_seq_length=64), "", tmp_path / "corpus", progress=quiet)

    stage()
    assert loads == [None, 64]
    embed.embed_texts(["chunk four"], settings, "", tmp_path / "corpus", progress=quiet)
    embed.embedding_task(["another sample"], settings, "")()
    assert loads == [None, 64, None, None]
