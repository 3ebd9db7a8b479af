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


# A seam loaded through PYTHONPATH: a meta-path finder that holds the import of the eval's
# dispatch module halfway (the module already in sys.modules, none of its names defined yet),
# says so in a file, and only then runs the module's code.
DELAYED_IMPORT = """
import importlib.abc, importlib.machinery, os, pathlib, sys, time

class HeldLoader(importlib.abc.Loader):
    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        pathlib.Path(os.environ["DISPATCH_IMPORTING"]).write_text(module.__name__)
        time.sleep(60)  # the stop signal lands here
        self.real.exec_module(module)

class Hold(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "evalgate.gate.dispatch":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = HeldLoader(spec.loader)
        return spec

sys.meta_path.insert(0, Hold())
"""


def test_a_stop_signal_while_the_dispatch_module_is_half_imported_is_exit_6_with_evidence(
    tmp_path,
) -> None:
    """The handler looks a module's functions up (it may be half-built), never assumes them:
    on 8c36240 it called the half-imported module's stop_all, and the run ended in exit 4,
    "AttributeError ... please report it"."""
    import os
    import signal
    import time
    from pathlib import Path

    from tests.conftest import load_result, run_args
    from tests.fakeengine import EngineBehaviour, FakeEngine

    seam = tmp_path / "seam"
    seam.mkdir()
    (seam / "sitecustomize.py").write_text(DELAYED_IMPORT)
    marker, out = tmp_path / "importing", tmp_path / "run"
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALGATE_")}
    env |= {"PYTHONPATH": f"{seam}:{root}", "DISPATCH_IMPORTING": str(marker)}
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        process = subprocess.Popen(
            [sys.executable, "-m", "evalgate.cli", *run_args(engine.url, out)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert marker.read_text() == "evalgate.gate.dispatch"
            process.send_signal(signal.SIGTERM)
            stdout, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()

    assert process.returncode == 6, stderr
    assert "AttributeError" not in stderr and "please report" not in stderr
    assert "AbortedError: interrupted by a signal" in stderr
    result = load_result(out)
    assert (result["status"], result["exit_code"]) == ("aborted", 6)
    assert stdout == ""  # no verdict: the error is said once, on stderr
