"""Stage 4 for one panel system (`python -m stages.retrieve_panel <system>`): params panel.<system>
over the retrieval section, on its chunking and embedder -> data/panel/<system>/run.parquet and
run_info.json (and, for method rerank, the system's own cross-encoder score cache
rerank_cache.jsonl)."""

import sys

from tqdm import tqdm

from retrieval_bench import paths
from retrieval_bench.io import atomic_path, run_stage, stage_parser, touch_jsonl, write_json
from retrieval_bench.params import load_params
from retrieval_bench.params_panel import panel_system
from retrieval_bench.retrieval.inputs import questions_and_corpus
from retrieval_bench.retrieval.methods import retrieve, run_info, search_timing


def main(argv: list[str]) -> None:
    parser = stage_parser("retrieve_panel", __doc__)
    parser.add_argument("system", help="a system named under panel in params.yaml")
    system = parser.parse_args(argv).system
    settings = panel_system(load_params("panel"), system)
    questions, corpus = questions_and_corpus(settings, settings["chunking"], settings["embedder"])
    rerank_cache = paths.panel_file(paths.PANEL_RUNS, system, "rerank_cache.jsonl")
    with tqdm(total=len(questions.qids), desc=f"retrieve {system} ({settings['method']})", unit="q") as progress:
        run = retrieve(settings, questions, corpus, progress, rerank_cache=rerank_cache, where=f"panel.{system}")
    with atomic_path(paths.panel_file(paths.PANEL_RUNS, system, "run.parquet")) as tmp:
        run.to_parquet(tmp, index=False)
    write_json(
        paths.panel_file(paths.PANEL_RUNS, system, "run_info.json"),
        run_info(settings, questions, corpus, run),
    )
    write_json(paths.search_timing(system), search_timing(settings, questions, corpus, f"panel.{system}"))
    touch_jsonl(rerank_cache)  # a persistent output of this stage, whatever the method
    print(
        f"retrieve {system}: {len(run)} results for {run['qid'].nunique()} of {len(questions.qids)} questions ({settings['method']})"
    )


if __name__ == "__main__":
    run_stage(lambda: main(sys.argv[1:]), own_arguments=True)
