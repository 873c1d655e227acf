"""Stage 2: the golden set -> data/goldenset.jsonl, from real labels or from the question cache."""
import hashlib
from pathlib import Path

import pandas as pd

from retrieval_bench.cache import read_cache
from retrieval_bench.goldenset import deduplicate, generated_row, handwritten_rows, label_rows, sample_rows
from retrieval_bench.io import InputError, read_jsonl, run_stage, write_json, write_jsonl
from retrieval_bench.load import chunk_documents
from retrieval_bench.params import load_params

DOCUMENTS = "data/documents.parquet"
LABELS = "data/labels.jsonl"
PROMPT = "data/question_prompt.txt"
CACHE = "data/question_cache.jsonl"
GOLDENSET = "data/goldenset.jsonl"
REPORT = "metrics/goldenset.json"


def synthetic_rows(params: dict, documents: pd.DataFrame, prompt_sha256: str) -> tuple[list[dict], dict]:
    """Hand-written questions plus cached generated ones over the reference passages."""
    size, overlap = params["passages"]["size"], params["passages"]["overlap"]
    passages = chunk_documents(documents, size, overlap)
    handwritten_path = Path(params["handwritten"])
    handwritten = read_jsonl(handwritten_path) if handwritten_path.exists() else []
    for number, record in enumerate(handwritten, 1):
        missing = {"question", "doc_id", "evidence"} - set(record)
        if missing:
            raise InputError(f"{handwritten_path}: record {number} lacks {', '.join(sorted(missing))}")
    rows, counts = handwritten_rows(handwritten, documents, passages)
    # Generated questions whose passage, model and prompt match this run.
    cached = {
        record["passage_sha256"]: record
        for record in read_cache(CACHE).values()
        if record.get("model") == params["model"] and record.get("prompt_sha256") == prompt_sha256
    }
    texts = dict(zip(documents["doc_id"], documents["text"]))
    covered = {row["chunk_sha256"] for row in rows}
    for _, passage in passages.iterrows():
        record = cached.get(passage["text_sha256"])
        if record is not None:
            rows.append(generated_row(record, passage, texts[passage["doc_id"]]))
            covered.add(passage["text_sha256"])
    counts["passages"] = len(passages)
    counts["passages_without_question"] = int((~passages["text_sha256"].isin(covered)).sum())
    return rows, counts


def main() -> None:
    params = load_params("generate")
    documents = pd.read_parquet(DOCUMENTS)
    labels = read_jsonl(LABELS)
    prompt_sha256 = hashlib.sha256(Path(PROMPT).read_bytes()).hexdigest()
    Path(CACHE).touch()  # the cache is a persistent stage output, so it must exist
    if labels:
        rows, counts = label_rows(labels), {}
        print(f"generate_goldenset: using {len(rows)} real labelled queries; no question is generated")
    else:
        rows, counts = synthetic_rows(params, documents, prompt_sha256)
        print(
            f"generate_goldenset: {len(rows)} questions ({counts['other_corpus']} hand-written ones are for documents "
            f"not in this corpus, {counts['not_located']} could not be located); "
            f"{counts['passages_without_question']} of {counts['passages']} passages have no question"
        )
        if counts["passages_without_question"] and params["provider"] == "none":
            print("generate_goldenset: to generate them, set generate.provider (e.g. anthropic) and rerun dvc repro")
    if not rows:
        raise InputError(
            f"no question for any passage of this corpus in {CACHE} or {params['handwritten']}; "
            "set generate.provider to generate them, or bring real queries (see README)"
        )
    rows, duplicates = deduplicate(rows)
    rows = sample_rows(rows, params["max_questions"], params["seed"])
    write_jsonl(GOLDENSET, rows)
    write_json(REPORT, {"n_questions": len(rows), "duplicate_questions_dropped": duplicates})
    print(f"generate_goldenset: wrote {len(rows)} questions to {GOLDENSET}")


if __name__ == "__main__":
    run_stage(main)
