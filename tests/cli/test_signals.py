"""A stop signal that lands where Python cannot raise (inside a weakref or garbage-collector
callback, which the interpreter runs between any two lines) still stops the run, quietly."""

from __future__ import annotations

import subprocess
import sys

import pytest

# The signal arrives while a weakref callback runs, as when an import's module lock is freed:
# the KeyboardInterrupt raised there cannot propagate, so Python prints it as "Exception ignored".
LANDS_IN_A_CALLBACK = """
import os, signal, sys, weakref
from evalgate.cli.run import stop_signals_interrupt

class Lock:
    pass

def freed(_ref):
    signal.raise_signal(signal.{name})
    sum(range(1000))  # the handler runs here, inside the callback

try:
    with stop_signals_interrupt():
        lock = Lock()
        ref = weakref.ref(lock, freed)
        del lock
        for _ in range(1_000_000):
            pass
    print("went on")
except KeyboardInterrupt as stop:
    print("stopped by", stop)
print("hook restored:", sys.unraisablehook is sys.__unraisablehook__)
"""


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_swallowed_by_a_callback_still_stops_the_run_without_a_traceback(
    name: str,
) -> None:
    code = LANDS_IN_A_CALLBACK.replace("{name}", name)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )

    assert done.stdout == f"stopped by {name}\nhook restored: True\n", done.stderr
    assert done.stderr == ""


def test_other_unraisable_exceptions_are_still_printed() -> None:
    code = """
import weakref
from evalgate.cli.run import stop_signals_interrupt

class Thing:
    pass

def broken(_ref):
    raise ValueError("a real bug in a callback")

with stop_signals_interrupt():
    thing = Thing()
    ref = weakref.ref(thing, broken)
    del thing
print("went on")
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )

    assert done.stdout == "went on\n"
    assert "ValueError: a real bug in a callback" in done.stderr
