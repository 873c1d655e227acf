"""`retrieval-bench review`: serve the review page, or print the reviewers' agreement, or export the
sample to Label Studio and import its annotations back; the reviewer's file is then tracked by DVC
(review.tracking)."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import read_jsonl
from retrieval_bench.core.stage import ctrl_c_stops
from retrieval_bench.goldenset.reviews import append_clicks, check_reviewer, golden_reviews, read_reviews, reviews_path
from retrieval_bench.review.agreement import agreement_lines
from retrieval_bench.review.items import check_shown, load_review
from retrieval_bench.review.label_studio import export_tasks, import_clicks
from retrieval_bench.review.server import HOST, make_server
from retrieval_bench.review.tracking import track

DEFAULT_PORT = 8765
EXPORT_FORMATS = ("label-studio",)


def port_number(text: str) -> int:
    """--port: a TCP port, 0 to 65535 (argparse's one-line error otherwise)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a port, 0 to 65535 (0: a free one)")
    return port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Review a seeded sample of the golden set (params review.sample, review.seed) in a local page on "
        "127.0.0.1: mark each question and grade the panel's pooled top chunks (review.depth per system) 0-3, "
        f"by keyboard; every click is appended at once to {paths.REVIEWS}/<reviewer>.jsonl. Ctrl-C stops it; "
        "in a DVC project `dvc add` then tracks the file (its own .dvc file: teammates `dvc pull` it)."
    )
    parser.add_argument("--reviewer", help="your name, a file-safe word (default: your login name)")
    parser.add_argument(
        "--port",
        type=port_number,
        default=DEFAULT_PORT,
        help=f"the port on {HOST} (default {DEFAULT_PORT}; 0: a free one)",
    )
    parser.add_argument("--sample", type=int, help="questions in the sample (default: params review.sample)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--agreement", action="store_true", help="print Cohen's kappa of every two reviewers on what both reviewed"
    )
    action.add_argument(
        "--export",
        nargs=2,
        metavar=("FORMAT", "FILE"),
        help="write the sample as Label Studio tasks (FORMAT label-studio) to FILE, its labeling config beside it (.xml)",
    )
    action.add_argument(
        "--import",
        dest="import_file",
        metavar="FILE",
        help=f"append a Label Studio JSON export's annotations to {paths.REVIEWS}/<reviewer>.jsonl",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    root, folder = Path("."), Path(paths.REVIEWS)
    if args.agreement:
        golden = root / paths.GOLDENSET  # as the server and the pipeline: stale clicks warned and left out
        if golden.is_file():
            reviews = golden_reviews(folder, {str(row.get("qid")) for row in read_jsonl(golden)})
        else:
            reviews = read_reviews(folder)
        lines = agreement_lines(reviews)
        print("\n".join(lines) if lines else f"no two reviewers in {paths.REVIEWS} reviewed the same question")
        return 0
    if args.export is not None:
        kind, target = args.export
        if kind not in EXPORT_FORMATS:
            raise InputError(f"--export {kind}: expected one of {', '.join(EXPORT_FORMATS)}")
        review = load_review(root, args.sample)
        config = export_tasks(review.items, Path(target))
        print(f"review: {len(review.items)} tasks written to {target}, the labeling config to {config}")
        return 0
    reviewer = check_reviewer(args.reviewer if args.reviewer is not None else getpass.getuser())
    review = load_review(root, args.sample)
    reviews = golden_reviews(folder, review.golden_qids)  # a regenerated set's stale clicks: warned, left out
    path = reviews_path(folder, reviewer)
    if args.import_file is not None:
        sample = set(review.qids)  # the estimates take what is reviewed as the random sample: only it
        clicks = import_clicks(Path(args.import_file), reviewer, sample)
        try:
            check_shown(clicks, review)
        except InputError as error:
            raise InputError(f"{args.import_file}: {error}") from None
        append_clicks(folder, clicks, sample, "review sample")  # all of the file, or none of it
        print(f"review: {len(clicks)} clicks from {args.import_file} appended to {path}")
        _say(track(path))
        return 0
    server = make_server(args.port, review, reviewer, folder)
    port = server.server_address[1]
    ctrl_c_stops()
    try:  # from the first line on: a Ctrl-C as soon as the address is out is a stop like any other
        print(f"review: {len(review.items)} questions for {reviewer} at http://{HOST}:{port}/ ; clicks go to {path}")
        for line in agreement_lines(reviews):
            print(f"review: {line}")
        sys.stdout.flush()
        server.serve_forever()
    except KeyboardInterrupt:  # the way to stop a server: its normal end, as stub-llm's
        print(f"review: stopped; every click is in {path}", flush=True)
    finally:
        server.server_close()
    _say(track(path))
    return 0


def _say(line: str | None) -> None:
    if line is not None:
        print(line, flush=True)
