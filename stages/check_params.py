"""Stage 0: validate the whole params.yaml (it depends on all of it), so a bad key fails the run
before anything else runs; write each panel system's resolved settings with the stamp of a run file
or retriever module it reads (data/panel_settings/<system>.json: retrieve's dependency); stamp what
DVC cannot list as deps (data/*stamp.json): load.source, the stores embed_corpus and retrieve read,
generate.style_examples (may be null), generate.imported (a mapping). `make repro` runs it before
`dvc repro` too: a stamp that moved (a file edited in place) re-runs what reads it."""

from pathlib import Path

from retrieval_bench.core import paths
from retrieval_bench.core.files import atomic_open, write_json
from retrieval_bench.core.params import load_all_params, require_dvc_keys
from retrieval_bench.core.params_panel import unused_embedders
from retrieval_bench.core.question_sets import check_handwritten
from retrieval_bench.core.stage import run_stage
from retrieval_bench.corpus.html import parse_selectors
from retrieval_bench.corpus.source_stamp import imported_stamps, panel_settings, source_stamp, stamps
from retrieval_bench.llm.cost.settings import check_llm_sections


def style_examples_stamp(file: str | None, memo: Path) -> dict:
    """What generate_goldenset depends on for generate.style_examples, which may be null (DVC cannot
    depend on a null path): the file's content digest, remembered while its size and time stay (as
    load.source's); a missing one is generate_goldenset's error."""
    return {"file": None, "md5": None} if file is None else source_stamp(file, memo)


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
    source, store, stored_vectors = stamps(params, memo)
    outputs = {
        paths.SOURCE_STAMP: source,
        paths.STORE_STAMP: store,
        paths.STORED_VECTORS_STAMP: stored_vectors,
        paths.STYLE_EXAMPLES_STAMP: style_examples_stamp(params["generate"]["style_examples"], memo),
        paths.IMPORTED_STAMP: imported_stamps(params["generate"]["imported"], memo),
        **panel_settings(params, memo),
    }
    for warning in unused_embedders(params):  # a model loaded and run for nothing
        print(warning)
    for stale in set(map(str, Path(paths.PANEL_SETTINGS).glob("*.json"))) - set(outputs):  # a system since removed
        Path(stale).unlink()
    for path, content in outputs.items():
        write_json(path, content)
    # Constant content: stages downstream depend on this file only to run after the check.
    with atomic_open(paths.PARAMS_CHECKED) as handle:
        handle.write("params.yaml passed validation\n")


if __name__ == "__main__":
    run_stage(main)
