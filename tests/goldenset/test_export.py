"""A golden set exported as a BEIR folder reads back through our own BEIR loader."""

import pandas as pd

from retrieval_bench.cli import main
from retrieval_bench.core.files import write_jsonl
from retrieval_bench.corpus.load import load_corpus

CHUNKS = pd.DataFrame(
    {
        "chunk_id": ["d:0-20", "d:15-40", "e:0-30"],
        "doc_id": ["d", "d", "e"],
        "start": [0, 15, 0],
        "end": [20, 40, 30],
        "text": ["first twenty chars..", "overlapping chunk text...", "another document of thirty ch."],
    }
)
GOLDEN = [
    {"qid": "q1", "question": "span question?", "doc_id": "d", "start": 16, "end": 20},  # inside both d chunks
    {"qid": "q2", "question": "label question?", "relevant": {"e:0-30": 3, "d:0-20": 0}},
    # No chunk holds 70% of this evidence, but both d chunks are wholly evidence: relevant.
    {"qid": "q3", "question": "long evidence?", "doc_id": "d", "start": 0, "end": 40},
    {"qid": "q4", "question": "unanswerable?", "doc_id": "gone", "start": 0, "end": 40},  # not in the corpus
]


def test_export_then_import_round_trip(tmp_path, capsys):
    CHUNKS.to_parquet(tmp_path / "chunks.parquet")
    write_jsonl(tmp_path / "golden.jsonl", GOLDEN)
    status = main(
        [
            "export-beir",
            str(tmp_path / "beir"),
            "--chunks",
            str(tmp_path / "chunks.parquet"),
            "--goldenset",
            str(tmp_path / "golden.jsonl"),
            "--min-coverage",
            "0.7",
        ]
    )
    assert status == 0 and "wrote 3 of 4 queries" in capsys.readouterr().out
    corpus = load_corpus(tmp_path / "beir")
    assert corpus.chunks["chunk_id"].tolist() == CHUNKS["chunk_id"].tolist()
    assert corpus.chunks["text"].tolist() == CHUNKS["text"].tolist()
    assert [{k: v for k, v in label.items() if k != "relevant_spans"} for label in corpus.labels] == [
        {"qid": "q1", "question": "span question?", "relevant": {"d:0-20": 1, "d:15-40": 1}},
        {"qid": "q2", "question": "label question?", "relevant": {"e:0-30": 3}},
        {"qid": "q3", "question": "long evidence?", "relevant": {"d:0-20": 1, "d:15-40": 1}},
    ]


def test_export_without_a_run_is_a_clear_error(tmp_path, capsys):
    assert main(["export-beir", str(tmp_path / "out"), "--chunks", str(tmp_path / "none.parquet")]) == 1
    assert "none.parquet: not found; run `dvc repro` first" in capsys.readouterr().err
