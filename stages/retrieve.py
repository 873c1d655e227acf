"""Stage 4: run retrieval.method for every question -> data/run.parquet (qid, chunk_id, rank,
score; retrieval.depth per question), and a TREC run file when retrieval.trec_export is set."""

from tqdm import tqdm

from retrieval_bench import paths
from retrieval_bench.io import atomic_path, run_stage, touch_jsonl, write_json
from retrieval_bench.params import load_params
from retrieval_bench.retrieval.inputs import questions_and_corpus
from retrieval_bench.retrieval.methods import retrieve, run_info, search_timing
from retrieval_bench.run_contract import check_trec_ids, write_trec


def main() -> None:
    settings = load_params("retrieval")
    questions, corpus = questions_and_corpus(settings)
    with tqdm(total=len(questions.qids), desc=f"retrieve ({settings['method']})", unit="q") as progress:
        run = retrieve(settings, questions, corpus, progress)
    if settings["trec_export"]:  # checked before anything is written: no run without its export
        check_trec_ids(run, f"retrieval.trec_export {settings['trec_export']}")
    with atomic_path(paths.RUN) as tmp:
        run.to_parquet(tmp, index=False)
    write_json(paths.RUN_INFO, run_info(settings, questions, corpus, run))
    write_json(paths.search_timing(None), search_timing(settings, questions, corpus))
    touch_jsonl(paths.RERANK_CACHE)  # a persistent output of this stage, whatever the method
    if settings["trec_export"]:
        write_trec(run, settings["trec_export"], settings["method"])
    print(
        f"retrieve: {len(run)} results for {run['qid'].nunique()} of {len(questions.qids)} questions ({settings['method']}, depth {settings['depth']})"
    )


if __name__ == "__main__":
    run_stage(main)
