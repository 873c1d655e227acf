"""Stage 0: validate the whole params.yaml (it depends on all of it), so a bad key fails the run
before anything else runs; write each panel system's resolved settings (data/panel_settings/, what
retrieve depends on) and stamp what DVC cannot list as deps: a system's run file, retriever module
or local cross-encoder, each embedder's local model folder (data/model_stamps/), load.source, the
stores, generate.style_examples and generate.imported (data/*stamp.json). `make repro` runs it
before `dvc repro` too: a stamp that moved (a file edited in place) re-runs what reads it."""

from pathlib import Path

from retrieval_bench.core import paths
from retrieval_bench.core.files import atomic_open, write_json
from retrieval_bench.core.params import load_all_params, require_dvc_keys
from retrieval_bench.core.params_panel import unused_embedders
from retrieval_bench.core.question_sets import check_handwritten
from retrieval_bench.core.stage import run_stage
from retrieval_bench.corpus import source_stamp as stamped
from retrieval_bench.corpus.html import parse_selectors
from retrieval_bench.llm.cost.settings import check_llm_sections


def main() -> None:
    params = load_all_params()
    check_llm_sections(params)
    if params["load"]["html_skip"].strip():  # else refused only once an HTML folder is read
        parse_selectors(params["load"]["html_skip"])
    check_handwritten(params["generate"]["handwritten"])  # before load_chunks and chunk run, not after
    if Path("dvc.yaml").is_file():  # under `dvc repro`: a key a stage lists must be written, not defaulted
        require_dvc_keys(resolved=params)
    # Every stamp is taken before any output is written: a failing check leaves the last good
    # outputs as they were (dvc.yaml keeps them with persist: true; DVC would delete them first).
    memo = Path(paths.SOURCE_DIGEST_MEMO)
    source, store, stored_vectors = stamped.stamps(params, memo)
    outputs = {
        paths.SOURCE_STAMP: source,
        paths.STORE_STAMP: store,
        paths.STORED_VECTORS_STAMP: stored_vectors,
        paths.STYLE_EXAMPLES_STAMP: stamped.style_examples_stamp(params["generate"]["style_examples"], memo),
        paths.IMPORTED_STAMP: stamped.imported_stamps(params["generate"]["imported"], memo),
        **stamped.panel_settings(params, memo),
        **stamped.model_stamps(params, memo),
    }
    for warning in unused_embedders(params):  # a model loaded and run for nothing
        print(warning)
    for folder in (paths.PANEL_SETTINGS, paths.MODEL_STAMPS):  # a system or embedder since removed
        for stale in set(map(str, Path(folder).glob("*.json"))) - set(outputs):
            Path(stale).unlink()
    for path, content in outputs.items():
        write_json(path, content)
    # Constant content: stages downstream depend on this file only to run after the check.
    with atomic_open(paths.PARAMS_CHECKED) as handle:
        handle.write("params.yaml passed validation\n")


if __name__ == "__main__":
    run_stage(main)
