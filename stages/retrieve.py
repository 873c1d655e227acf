"""Stage 4: run retrieval.method for every question -> data/run.parquet (qid, chunk_id, rank,
score; retrieval.depth per question), and a TREC run file when retrieval.trec_export is set."""
import json

import numpy as np
import pandas as pd
from tqdm import tqdm

from retrieval_bench import paths
from retrieval_bench.io import InputError, atomic_path, read_jsonl, run_stage, touch_jsonl, write_json
from retrieval_bench.params import load_params
from retrieval_bench.retrieval.methods import needs_vectors, retrieve, run_info
from retrieval_bench.retrieval.run import Corpus, Questions, write_trec


def load_vectors(vectors: str, ids: str, expected_ids: list[str]) -> np.ndarray:
    """The embed stage's vectors for `expected_ids`, in their order: a 2-D float array, one finite
    row per id, else one line saying to rerun the embed stages."""
    rerun = "rerun the embed stages (dvc repro -f embed_corpus embed_questions)"
    try:
        with open(ids, encoding="utf-8") as handle:
            same = json.load(handle) == expected_ids
    except ValueError as error:  # not JSON, not UTF-8
        raise InputError(f"{ids}: unreadable ({error}); {rerun}") from None
    if not same:
        raise InputError(f"{vectors}: embeddings of other ids than the current data; {rerun}")
    try:
        matrix = np.load(vectors, mmap_mode="r")  # read as searched: the store method uses the corpus only for run_info
    except (ValueError, EOFError) as error:  # truncated, or not an .npy array
        raise InputError(f"{vectors}: unreadable ({error}); {rerun}") from None
    if matrix.ndim != 2 or matrix.shape[0] != len(expected_ids) or matrix.shape[1] == 0 or matrix.dtype.kind != "f":
        raise InputError(f"{vectors}: a {matrix.dtype} array of shape {matrix.shape}, expected float vectors of shape "
                         f"({len(expected_ids)}, dimension) for {ids}; {rerun}")
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        raise InputError(f"{vectors}: the vector of {expected_ids[int(np.flatnonzero(~finite)[0])]!r} (row "
                         f"{int(np.flatnonzero(~finite)[0])}) is not finite; {rerun}")
    return matrix


def main() -> None:
    settings = load_params("retrieval")
    chunks = pd.read_parquet(paths.CHUNKS, columns=["chunk_id", "text"])
    golden = read_jsonl(paths.GOLDENSET)
    questions = Questions([row["qid"] for row in golden], [row["question"] for row in golden])
    corpus = Corpus(chunks["chunk_id"].tolist(), chunks["text"].tolist())
    if needs_vectors(settings):
        questions = Questions(questions.qids, questions.texts, load_vectors(paths.QUESTION_VECTORS, paths.QUESTION_IDS, questions.qids))
        corpus = Corpus(corpus.chunk_ids, corpus.texts, load_vectors(paths.CORPUS_VECTORS, paths.CORPUS_IDS, corpus.chunk_ids))
    with tqdm(total=len(golden), desc=f"retrieve ({settings['method']})", unit="q") as progress:
        run = retrieve(settings, questions, corpus, progress)
    with atomic_path(paths.RUN) as tmp:
        run.to_parquet(tmp, index=False)
    write_json(paths.RUN_INFO, run_info(settings, questions, corpus, run))
    touch_jsonl(paths.RERANK_CACHE)  # a persistent output of this stage, whatever the method
    if settings["trec_export"]:
        write_trec(run, settings["trec_export"], settings["method"])
    print(f"retrieve: {len(run)} results for {run['qid'].nunique()} of {len(golden)} questions ({settings['method']}, depth {settings['depth']})")


if __name__ == "__main__":
    run_stage(main)
