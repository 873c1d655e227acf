"""What every stage shares as a program: `python -m stages.<name> --help`, one `error:` line and
exit status 1 for bad input, Ctrl-C in one line (exit status 130), progress bars."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tqdm import tqdm as Tqdm

from retrieval_bench.core.errors import (
    INTERRUPTED_EXIT,
    InputError,
    Interrupted,
    OneLineArguments,
    describe_os_error,
)
from retrieval_bench.core.params import load_all_params
from retrieval_bench.core.params_panel import panel_system


def stage_parser(name: str, doc: str | None) -> argparse.ArgumentParser:
    """The command line of `python -m stages.<name>`: --help prints the stage's whole docstring and
    exits 0 without running anything; a stage with options adds them."""
    return OneLineArguments(
        prog=f"python -m stages.{name}",
        description=(doc or "").strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=textwrap.fill(
            f"`dvc repro` runs it as stage {name} of dvc.yaml; its settings are in params.yaml. Bad "
            "input ends in one `error:` line and exit status 1, Ctrl-C in one line and exit status 130.",
            96,
        ),
    )


def panel_stage_arguments(name: str, doc: str | None, argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    """A panel stage's command line read (--help before anything is loaded), then params.yaml:
    (the checked params, the panel systems to run: those named, each checked, else all)."""
    parser = stage_parser(name, doc)
    parser.add_argument("systems", nargs="*", metavar="SYSTEM", help="panel systems to run (default: every one)")
    named = parser.parse_args(argv).systems
    params = load_all_params()
    for system in named:
        panel_system(params["panel"], system)  # one line for a name the panel does not have
    return params, named or list(params["panel"])


def run_stage(main: Callable[[], None], own_arguments: bool = False) -> None:
    """Run a stage's main(). Run as a script (`python -m stages.<name>`, main defined in __main__),
    its command line is read first: --help prints the stage's help and exits 0 (`own_arguments`:
    main reads its command line itself). An InputError or an OSError (a full disk, a permission)
    becomes one line on stderr and exit status 1; Ctrl-C one line and exit status 130, SIGTERM the
    same line and 143. (Under
    `dvc repro`, DVC reports any failing stage with its own message and exits 255; a stage whose
    DVC is killed stops as Ctrl-C stops it: stop_when_dvc_dies.)"""
    script = sys.modules.get("__main__")
    if not own_arguments and getattr(main, "__module__", None) == "__main__" and script is not None:
        spec = getattr(script, "__spec__", None)
        stage_parser((spec.name if spec else Path(sys.argv[0]).stem).rsplit(".", 1)[-1], script.__doc__).parse_args(
            sys.argv[1:]
        )
    stop_when_dvc_dies()
    terminated: list[int] = []  # SIGTERM (timeout, a CI job cancelled, docker stop) stops the stage as Ctrl-C does
    previous = terminate_as_ctrl_c(terminated)
    try:
        main()
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    except OSError as error:
        print(f"error: {describe_os_error(error)}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt as error:
        said = (
            str(error)
            if isinstance(error, Interrupted)
            else ("interrupted; no output was half-written (each is replaced whole or not at all): rerun to finish")
        )
        print(f"\n{said}", file=sys.stderr)
        sys.exit(TERMINATED_EXIT if terminated else INTERRUPTED_EXIT)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


TERMINATED_EXIT = 128 + signal.SIGTERM  # as a shell reports a process SIGTERM ended


def terminate_as_ctrl_c(terminated: list[int]) -> Any:
    """Make SIGTERM raise KeyboardInterrupt, so a stage it stops says what it kept (a paid
    generation: "interrupted; N replies are kept ...") and leaves no half-written output, as on
    Ctrl-C; it exited at once and silently. Returns the handler it replaced (None off the main
    thread, where no handler can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: Any) -> None:
        terminated.append(signum)
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, handler)


DVC_WATCH_SECONDS = 0.5  # how often a stage under DVC looks whether DVC is still there


def stop_when_dvc_dies() -> None:
    """Under `dvc repro` (DVC_STAGE set, DVC the stage's parent): when DVC is killed (kill -9, a
    closed terminal) the stage gets the SIGINT Ctrl-C would send, and stops as Ctrl-C stops it,
    what it paid for kept and nothing more asked, rather than going on unseen and paying for every
    request left (a review's kill -9 of DVC let generation pay for 108 more). A daemon thread
    watches the parent process id; no signal is asked of the kernel for it, as PR_SET_PDEATHSIG
    would fire when the thread that started the stage ends, not the process."""
    if "DVC_STAGE" not in os.environ:
        return
    ctrl_c_stops()  # started from a script's background `dvc repro &`, SIGINT would be ignored
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(DVC_WATCH_SECONDS)
        os.kill(os.getpid(), signal.SIGINT)  # a real signal: it also wakes a wait in select or sleep

    threading.Thread(target=watch, name="stop-when-dvc-dies", daemon=True).start()


def ctrl_c_stops() -> None:
    """Make Ctrl-C (SIGINT) raise KeyboardInterrupt in this process even where it started with
    SIGINT ignored, as a background job of a non-interactive shell does (Python then leaves it
    ignored): a local server's documented way to stop must always work."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


# How often a bar whose count has not moved is drawn again (its elapsed time moving): on a
# terminal every second; in a log a line every half minute, so a slow step (a local LLM taking a
# minute a reply) still shows it is alive.
HEARTBEAT_SECONDS = {"terminal": 1.0, "log": 30.0}


def _heartbeat(bar: Any, stop: threading.Event, period: float) -> None:
    """Redraw `bar` (a weak reference: an unclosed bar is still freed) every `period` until it closes."""
    while not stop.wait(period):
        shown = bar()
        if shown is None or shown.disable:
            return
        shown.beat()
        del shown


def progress(total: int, desc: str, unit: str = "q", show: bool = True, delay: float = 0.0) -> Tqdm[Any]:
    """A progress bar on stderr (tqdm) that counts what is done, with its rate and time left. Used
    as a context manager it ends at total/total when the block succeeds (the work is done even if
    a step reported nothing); in a log (stderr not a terminal: a file, CI, `| tee`) it prints a
    line at most every 5 s, each ended (a bar redrawn with carriage returns never ends a line
    there, so a log showed nothing for minutes), and a count again only as a heartbeat
    (HEARTBEAT_SECONDS) while it stands still, never at the close; `show` false: none. `delay`: a
    step that ends (or fails, its error then the one line) within that many seconds shows no bar."""
    import weakref

    from tqdm import tqdm

    class Bar(tqdm):  # type: ignore[type-arg]  # generic in types-tqdm only: not subscriptable at run time
        def __init__(self, **options: Any) -> None:
            self._log = not sys.stderr.isatty()
            self._shown: float | None = None
            self._beating = False
            self._stop = threading.Event()
            super().__init__(**options)
            if not self.disable:
                period = HEARTBEAT_SECONDS["log" if self._log else "terminal"]
                beat = threading.Thread(target=_heartbeat, args=(weakref.ref(self), self._stop, period), daemon=True)
                beat.start()

        def beat(self) -> None:
            now = time.time()  # the clock tqdm keeps start_t by
            if now < self.start_t + (self.delay or 0.0):
                return  # not shown before its delay
            self._beating = True
            try:
                self.refresh()
                self.last_print_t = now  # shown: its close ends the line
            finally:
                self._beating = False

        def close(self) -> None:
            self._stop.set()
            super().close()

        def clear(self, nolock: bool = False) -> None:
            # In a log every draw is a whole line: nothing to wipe before a message (tqdm.write),
            # where tqdm's wipe wrote carriage returns into the log ahead of each message.
            if not self._log:
                super().clear(nolock)

        # tqdm.display returns True once shown (types-tqdm says None); this keeps what it returns.
        def display(self, msg: str | None = None, pos: int | None = None) -> bool | None:  # type: ignore[override]
            if self._log and msg is None and self._shown == self.n and not self._beating:
                return None  # in a log this count is already printed: the final close would repeat it
            self._shown = self.n
            if self._log and msg is None:  # any position: in a log, lines come one after another
                self.fp.write(f"{self}\n")  # a whole line: a log reader sees it now
                self.fp.flush()
                return True
            return super().display(msg, pos)

        def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
            if kind is None and self.total and self.n < self.total:
                self.update(self.total - self.n)
            super().__exit__(kind, value, traceback)

    return Bar(
        total=total,
        desc=desc,
        unit=unit,
        disable=not show,
        file=sys.stderr,
        dynamic_ncols=True,
        mininterval=0.5 if sys.stderr.isatty() else 5.0,  # a log (make repro pipes DVC): a line every few seconds
        delay=delay,
    )
