"""Stage 4 (`python -m stages.retrieve [SYSTEM ...]`): every panel system (or those named), each
params panel.<system> over the retrieval section on its chunking and embedder -> data/panel/<system>/
run.parquet (qid, chunk_id, rank, score; depth per question) and run_info.json, and its TREC run
file when it sets trec_export. One stage for the whole panel: a system whose inputs did not change
gets its last outputs back (core.item_memo); method rerank keeps its cross-encoder scores apart."""

import sys
from collections.abc import Callable

from retrieval_bench.core import paths
from retrieval_bench.core.files import atomic_path, write_json
from retrieval_bench.core.item_memo import ItemMemo
from retrieval_bench.core.params_panel import panel_system, settings_key
from retrieval_bench.core.run_table import check_trec_ids, write_trec
from retrieval_bench.core.stage import panel_stage_arguments, run_stage
from retrieval_bench.core.stage import progress as progress_of
from retrieval_bench.retrieval.inputs import LastInputs, questions_and_corpus, reading_order, retrieve_inputs
from retrieval_bench.retrieval.methods import depth_text, retrieve, run_info
from retrieval_bench.retrieval.rerank import score_cache
from retrieval_bench.retrieval.settings import RetrievalSettings


def retrieve_system(params: dict, system: str, load: Callable = questions_and_corpus) -> None:
    picked = panel_system(params["panel"], system)  # its chunking, embedder and retrieval keys
    where = settings_key(params, system)  # what the user wrote: retrieval.X, or panel.NAME.X
    settings = RetrievalSettings.from_params(picked, where, rerank_cache=score_cache(system))
    trec_export = settings.trec_export  # retrieval.trec_export is the default system's (params_panel)
    questions, corpus = load(settings, picked["chunking"], picked["embedder"])
    with progress_of(len(questions.qids), f"retrieve {system} ({settings.method})", "q") as progress:
        run = retrieve(settings, questions, corpus, progress)
    if trec_export:  # checked before anything is written: no run without its export
        check_trec_ids(run, f"{where}.trec_export {trec_export}")
    with atomic_path(paths.run_of(system)) as tmp:
        run.to_parquet(tmp, index=False)
    write_json(paths.run_info_of(system), run_info(settings, questions, corpus, run))
    if trec_export:
        write_trec(run, trec_export, settings.method)
    held = depth_text(settings, run, len(questions.qids), max(params["score"]["k"]), len(corpus.chunk_ids))
    print(
        f"retrieve {system}: {len(run)} results for {run['qid'].nunique()} of {len(questions.qids)} questions ({held})"
    )


def main(argv: list[str]) -> None:
    params, named = panel_stage_arguments("retrieve", __doc__, argv)
    panel, load = params["panel"], LastInputs()
    ItemMemo("retrieve").run(
        reading_order(panel, named),
        lambda system: retrieve_inputs(panel[system], system, settings_key(params, system)),
        lambda system: paths.run_outputs_of(system, panel[system]["trec_export"]),
        lambda system: retrieve_system(params, system, load),
        paths.run_key_of,
        known=panel,
    )


if __name__ == "__main__":
    run_stage(lambda: main(sys.argv[1:]), own_arguments=True)
