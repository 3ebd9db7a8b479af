"""How a stop signal ends evalgate, whatever instant it lands at: exit 6 (README, exit codes).

    before the command begins   the process ends at once, saying so: nothing is written yet
    while the command works     raised as Ctrl-C is (KeyboardInterrupt), so a run records the
                                stop in result.json and the command exits 6
    once the command returned   the process ends at once with the command's own exit code

The first handler is installed before the rest of evalgate is imported (evalgate.cli.console)
and calls only os.write and os._exit: it works whatever is half-imported when the signal lands.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from evalgate.errors import ExitCode

STOP_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
"""What a scheduler or a terminal sends to stop a job: SIGTERM (Slurm, Kubernetes), SIGHUP (an
ssh or tmux session dropped), SIGQUIT (Ctrl-\\), SIGUSR1/SIGUSR2 (a scheduler's warning before
its time limit). Each would kill the process before it writes its result."""
STOPS = (signal.SIGINT, *STOP_SIGNALS)

_ending: list[tuple[int, dict[int, bytes]]] = [(int(ExitCode.ABORTED), {})]
"""The exit code and the line (per signal) of a stop that ends the process at once; replaced
whole, so a handler never reads half of a change."""


def _ending_with(code: int, saying: str) -> None:
    names = {signum: signal.Signals(signum).name for signum in STOPS}
    _ending[0] = (int(code), {s: saying.format(name=n).encode() for s, n in names.items()})


def end_at_once() -> None:
    """From here until a command begins its work, a stop ends the process at once, exit 6,
    with one line on stderr naming the signal."""
    _ending_with(
        ExitCode.ABORTED,
        "AbortedError: stopped by {name} before the command began; nothing was written.\n",
    )
    for signum in STOPS:
        signal.signal(signum, _end)


def began() -> None:
    """The command begins: a stop that lands outside stop_signals_interrupt (as it is entered
    or left) is exit 6, said as the command would say it."""
    _ending_with(ExitCode.ABORTED, "AbortedError: interrupted by {name}\n")


def finished(code: int) -> None:
    """The command ended with `code`: a stop from here ends the process at once with that code
    and says nothing (the command's last line stands)."""
    _ending_with(code, "")


def _end(signum: int, frame: FrameType | None) -> None:
    code, said = _ending[0]
    if said.get(signum):
        with contextlib.suppress(OSError):  # stderr closed or full: the exit code still says it
            os.write(2, said[signum])
    os._exit(code)


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
    stop_all = getattr(sys.modules.get("evalgate.eval.dispatch"), "stop_all", None)
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
    """While a command works, every stop signal (Ctrl-C too) interrupts it; then as before.
    Only the main thread receives signals: elsewhere (Python use) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, terminate_as_interrupt) for signum in STOPS}
    previous_hook = sys.unraisablehook
    stops = {signal.Signals(signum).name: signum for signum in STOPS}
    sys.unraisablehook = functools.partial(resend_a_swallowed_stop, stops, previous_hook)
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        for signum, handler in previous.items():
            signal.signal(signum, handler)
