"""`evalgate run`: the whole gate against a live endpoint."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

HELP = (
    "Derive the eval context, probe the real output budget, run GSM8K with lm-eval and gate "
    "the scores on thresholds.json; result.json is written on every path."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted run in --output-dir from its journal "
        "(only answers from the same engine and protocol are reused)",
    )
    parser.add_argument("--json", action="store_true", help="print result.json to stdout")


STOP_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
"""What a scheduler or a terminal sends to stop a job: SIGTERM (Slurm, Kubernetes), SIGHUP (an
ssh or tmux session dropped), SIGQUIT (Ctrl-\\), SIGUSR1/SIGUSR2 (a scheduler's warning before
its time limit). Each would kill the process before it writes its result."""


def _interrupt(name: str) -> None:
    raise KeyboardInterrupt(name)


def terminate_as_interrupt(signum: int, frame: FrameType | None) -> None:
    """A stop signal: stop like Ctrl-C, so the result is still written. The eval's requests stop
    at once (its dispatch thread is cancelled, and re-raises the interrupt when waited for, even
    if the KeyboardInterrupt raised here is swallowed by whatever the main thread was running).
    Inside an event loop the interrupt is raised between callbacks, not inside whichever task
    was running (that task would keep it, and print a traceback when collected)."""
    name = signal.Signals(signum).name
    # A module in sys.modules may be half-built (the signal landed while it was imported): its
    # functions are looked up, never assumed; one not yet defined has nothing to stop.
    stop_all = getattr(sys.modules.get("evalgate.gate.dispatch"), "stop_all", None)
    if stop_all is not None:  # loaded: an eval may be sending
        stop_all(name)
    running = getattr(sys.modules.get("asyncio"), "get_running_loop", None)
    try:  # asyncio not imported: no event loop can be running
        loop = running() if running is not None else None
    except RuntimeError:
        loop = None
    if loop is None:
        raise KeyboardInterrupt(name)
    loop.call_soon_threadsafe(_interrupt, name)


def resend_a_swallowed_stop(
    stops: dict[str, int], otherwise: Callable[[Any], object], unraisable: Any
) -> None:
    """The stop landed inside a weakref or collector callback, where Python can only print it
    ("Exception ignored in ..."): send the signal again once the callback has returned (from a
    timer thread: sent from here, it would land in this hook), so the run still stops. Anything
    else unraisable is printed as before."""
    stop = unraisable.exc_value
    name = str(stop.args[0]) if isinstance(stop, KeyboardInterrupt) and stop.args else ""
    if name in stops:
        again = threading.Timer(0.01, os.kill, (os.getpid(), stops[name]))
        again.daemon = True
        again.start()
    else:
        otherwise(unraisable)


@contextlib.contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """While a run is under way, every stop signal (Ctrl-C too) aborts it; then as before."""
    signals = (signal.SIGINT, *STOP_SIGNALS)
    previous = {signum: signal.signal(signum, terminate_as_interrupt) for signum in signals}
    previous_hook = sys.unraisablehook
    stops = {signal.Signals(signum).name: signum for signum in signals}
    sys.unraisablehook = functools.partial(resend_a_swallowed_stop, stops, previous_hook)
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def progress_printer() -> Callable[[int, int], None]:
    """A bar on a terminal; a line per tenth otherwise (CI logs)."""
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=0, unit="q", desc="gsm8k", file=sys.stderr)

        def update(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()
            if done == total:
                bar.close()

        return update
    step = {"next": 0}

    def log_line(done: int, total: int) -> None:
        # done <= 1: a new eval (the hook runs several)
        if done <= 1 or done >= step["next"] or done == total:
            print(f"gsm8k: {done}/{total} answered", file=sys.stderr, flush=True)
            step["next"] = done + max(total // 10, 1)

    return log_line


def command(args: argparse.Namespace) -> int:
    from evalgate.gate.run import require_eval_extra, run_gate

    require_eval_extra("evalgate run")  # before the output folder is touched
    from evalgate import outside
    from evalgate.cli import flags
    from evalgate.evidence.model import to_document

    settings = flags.settings_from_args(args)
    with stop_signals_interrupt():
        outcome = run_gate(settings, progress=progress_printer(), resume=args.resume)
    if args.json:
        print(outside.terminal_json(to_document(outcome.result)))
    if outcome.error is not None:
        if getattr(args, "verbose", 0):
            shown = "".join(traceback.format_exception(outcome.error))
            print(outside.terminal_block(shown), file=sys.stderr)
        error = outside.terminal(outcome.error.message)
        print(f"{type(outcome.error).__name__}: {error}", file=sys.stderr)
        print(f"stage: {outcome.result.stage}", file=sys.stderr)
    for warning in outcome.result.warnings:
        print(f"warning: {outside.terminal(warning)}", file=sys.stderr)
    if not args.json and outcome.error is None:  # a verdict; an error was said once, above
        print(f"{outcome.status.upper()}: {outside.terminal(outcome.reason)}")
        if outcome.comparison:
            print(outcome.comparison)  # compare's report: its outside text made safe there
    if outcome.result_path is not None:
        print(f"result: {outside.terminal(outcome.result_path)}", file=sys.stderr)
    return outcome.exit_code
