"""Stage 4, once per panel system (`python -m stages.retrieve <system>`): params panel.<system> over
the retrieval section, on its chunking and embedder -> data/panel/<system>/run.parquet (qid,
chunk_id, rank, score; depth per question) and run_info.json (method rerank keeps its cross-encoder
scores apart, not a DVC output: rerank.score_cache); and its TREC run file when it sets trec_export."""

import sys

from tqdm import tqdm

from retrieval_bench.core import paths
from retrieval_bench.core.files import atomic_path, write_json
from retrieval_bench.core.params import load_all_params
from retrieval_bench.core.params_panel import panel_system, settings_key
from retrieval_bench.core.run_table import check_trec_ids, write_trec
from retrieval_bench.core.stage import run_stage, stage_parser
from retrieval_bench.retrieval.inputs import questions_and_corpus
from retrieval_bench.retrieval.methods import retrieve, run_info
from retrieval_bench.retrieval.rerank import score_cache
from retrieval_bench.retrieval.settings import RetrievalSettings


def main(argv: list[str]) -> None:
    parser = stage_parser("retrieve", __doc__)
    parser.add_argument("system", help="a system named under panel in params.yaml (the sample's first: default)")
    system = parser.parse_args(argv).system
    params = load_all_params()
    picked = panel_system(params["panel"], system)  # its chunking, embedder and retrieval keys
    where = settings_key(params, system)  # what the user wrote: retrieval.X, or panel.NAME.X
    settings = RetrievalSettings.from_params(picked, where, rerank_cache=score_cache(system))
    trec_export = settings.trec_export  # retrieval.trec_export is the default system's (params_panel)
    questions, corpus = questions_and_corpus(settings, picked["chunking"], picked["embedder"])
    with tqdm(total=len(questions.qids), desc=f"retrieve {system} ({settings.method})", unit="q") as progress:
        run = retrieve(settings, questions, corpus, progress)
    if trec_export:  # checked before anything is written: no run without its export
        check_trec_ids(run, f"{where}.trec_export {trec_export}")
    with atomic_path(paths.run_of(system)) as tmp:
        run.to_parquet(tmp, index=False)
    write_json(paths.run_info_of(system), run_info(settings, questions, corpus, run))
    if trec_export:
        write_trec(run, trec_export, settings.method)
    print(
        f"retrieve {system}: {len(run)} results for {run['qid'].nunique()} of {len(questions.qids)} questions "
        f"({settings.method}, depth {settings.depth})"
    )


if __name__ == "__main__":
    run_stage(lambda: main(sys.argv[1:]), own_arguments=True)
