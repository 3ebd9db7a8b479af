"""A stop signal at any instant is exit 6: while evalgate is imported, before the command begins
(nothing written), once it began, and while the run works (its result written). One that lands
where Python cannot raise (inside a weakref or garbage-collector callback, which the interpreter
runs between any two lines) still stops the run, quietly."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, deadline, load_result, run_args, run_subprocess, start_subprocess
from tests.fakeengine import NOT_PROBE, EngineBehaviour, FakeEngine, Fault
from tests.folders import SMALL_RUN

pytestmark = pytest.mark.loopback


# The signal arrives while a weakref callback runs, as when an import's module lock is freed:
# the KeyboardInterrupt raised there cannot propagate, so Python prints it as "Exception ignored".
LANDS_IN_A_CALLBACK = """
import os, signal, sys, weakref
from evalgate.cli.stop import stop_signals_interrupt

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
from evalgate.cli.stop import stop_signals_interrupt

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


# A seam loaded through PYTHONPATH: a meta-path finder that holds the first import of the module
# named in HOLD_IMPORT halfway (the module already in sys.modules, none of its names defined yet),
# says so in the file named in HELD, and only then runs the module's code.
HOLD_IMPORT = """
import importlib.abc, importlib.machinery, os, pathlib, sys, time

class HeldLoader(importlib.abc.Loader):
    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        pathlib.Path(os.environ["HELD"]).write_text(module.__name__)
        time.sleep(600)  # the stop signal lands here
        self.real.exec_module(module)

class Hold(importlib.abc.MetaPathFinder):
    held = False

    def find_spec(self, name, path, target=None):
        if name != os.environ["HOLD_IMPORT"] or Hold.held:
            return None
        Hold.held = True
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = HeldLoader(spec.loader)
        return spec

sys.meta_path.insert(0, Hold())
"""


def stopped_while_importing(
    tmp_path: Path, module: str, argv: list[str], signum: signal.Signals
) -> tuple[int, str, str]:
    """`evalgate ARGV` as its own process, sent `signum` while it imports `module`: the exit
    code, stdout and stderr. Waits on the seam's file, however slow the machine."""
    seam = tmp_path / "seam"
    seam.mkdir()
    (seam / "sitecustomize.py").write_text(HOLD_IMPORT)
    held = tmp_path / "held"
    env = {"PYTHONPATH": f"{seam}:{ROOT}", "HOLD_IMPORT": module, "HELD": str(held)}
    process = start_subprocess(*argv, env=env)
    try:
        deadline = time.monotonic() + 300
        while not held.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert held.exists(), f"{module} was never imported: {process.communicate()}"
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, stdout, stderr


BEFORE_THE_COMMAND = [
    pytest.param("evalgate.scrub", signal.SIGTERM, id="while evalgate is imported"),
    pytest.param("evalgate.scrub", signal.SIGINT, id="while evalgate is imported, Ctrl-C"),
    pytest.param("evalgate.cli.arguments", signal.SIGTERM, id="before the settings are read"),
    pytest.param(
        "evalgate.cli.arguments", signal.SIGHUP, id="before the settings are read, SIGHUP"
    ),
]


@pytest.mark.parametrize(("module", "signum"), BEFORE_THE_COMMAND)
def test_a_stop_before_the_command_begins_is_exit_6_and_nothing_written(
    tmp_path: Path, module: str, signum: signal.Signals
) -> None:
    """8c36240: the process was ended by the signal itself (SIGINT: a KeyboardInterrupt
    traceback), before `run` installed its handlers."""
    out = tmp_path / "run"
    argv = run_args("http://127.0.0.1:9/v1", out)
    code, stdout, stderr = stopped_while_importing(tmp_path, module, argv, signum)

    assert code == 6, stderr
    assert stderr == (
        f"AbortedError: stopped by {signum.name} before the command began; nothing was written.\n"
    )
    assert stdout == ""
    assert not out.exists()


def test_a_stop_once_the_command_began_before_the_run_took_its_folder_is_exit_6(
    tmp_path: Path,
) -> None:
    """The run's own module is still being imported: nothing of the run is written yet.
    8c36240: ended by SIGTERM itself."""
    out = tmp_path / "run"
    argv = run_args("http://127.0.0.1:9/v1", out)
    code, stdout, stderr = stopped_while_importing(tmp_path, "evalgate.run", argv, signal.SIGTERM)

    assert code == 6, stderr
    assert stderr == "AbortedError: interrupted by SIGTERM\n"
    assert stdout == ""
    assert not out.exists()


@pytest.mark.parametrize(
    "module",
    [
        pytest.param("evalgate.eval.dispatch", id="the dispatch half-imported"),
        pytest.param("lm_eval.filters", id="mid-eval, lm-eval half-imported"),
    ],
)
def test_a_stop_while_the_run_works_is_exit_6_with_its_result(tmp_path: Path, module: str) -> None:
    """The handler looks a module's functions up (it may be half-built), never assumes them:
    on 8c36240 it called the half-imported dispatch module's stop_all, and the run ended in
    exit 4, "AttributeError ... please report it"."""
    out = tmp_path / "run"
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        argv = run_args(engine.url, out)
        code, stdout, stderr = stopped_while_importing(tmp_path, module, argv, signal.SIGTERM)

    assert code == 6, stderr
    assert "AttributeError" not in stderr and "please report" not in stderr
    assert "Traceback" not in stderr
    assert "AbortedError: interrupted by a signal" in stderr
    result = load_result(out)
    assert (result["status"], result["stage"], result["exit_code"]) == ("aborted", "eval", 6)
    assert stdout == ""  # no verdict: the error is said once, on stderr


def test_a_stop_while_verify_works_is_exit_6(tmp_path: Path) -> None:
    """Every command, not only run and hook: 8c36240's verify was ended by SIGTERM itself."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    argv = ["verify", str(sweep)]
    code, stdout, stderr = stopped_while_importing(
        tmp_path, "evalgate.verify.sweep", argv, signal.SIGTERM
    )

    assert code == 6, stderr
    assert stderr == "AbortedError: interrupted by SIGTERM\n"
    assert stdout == ""


# The console script, with an exit handler that stops the process once the command has returned.
STOPPED_AS_IT_EXITS = """
import atexit, os, signal, sys, time
from evalgate.cli import console
def stop_now():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(600)  # the stop lands here
atexit.register(stop_now)
sys.argv = ["evalgate", *sys.argv[1:]]
console()
"""


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["context", "--isl", "1024", "--osl", "1024", "--served-max-model-len", "4096"], 0),
        (["verify", "nowhere"], 2),
    ],
)
def test_a_stop_once_the_command_returned_keeps_its_exit_code(
    tmp_path: Path, argv: list[str], code: int
) -> None:
    """The verdict is printed and recorded: a stop while the process exits says nothing and
    changes no exit code."""
    done = subprocess.run(
        [sys.executable, "-c", STOPPED_AS_IT_EXITS, *argv],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False,
    )  # fmt: skip

    assert done.returncode == code, done.stderr
    assert "AbortedError" not in done.stderr
    assert "Traceback" not in done.stderr


# A seam loaded through PYTHONPATH: the process sends itself SIGNAL at the fsync of each
# result.json write whose number is in AT (1: the "running" record, 2: the next).
STOP_AT_A_WRITE = """
import os, signal

_writes = [0]
_at = {int(n) for n in os.environ["AT"].split(",")}
_fsync = os.fsync

def fsync(fd):
    if ".result.json." in os.readlink(f"/proc/self/fd/{fd}"):
        _writes[0] += 1
        if _writes[0] in _at:
            os.kill(os.getpid(), getattr(signal, os.environ["SIGNAL"]))
            sum(range(100_000))  # the handler runs here, mid-write
    return _fsync(fd)

os.fsync = fsync
"""


@pytest.mark.parametrize("at", ["1,2", "2,3", "1,2,3"])
@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_a_second_stop_while_the_first_is_recorded_still_leaves_it_recorded(
    tmp_path: Path, at: str, name: str
) -> None:
    """A scheduler that sends its stop twice: the second lands while result.json says how the
    first ended. Before, that write was cut: result.json stayed "running" (exit code 4) or was
    never written, while the process exited 6."""
    seam = tmp_path / "seam"
    seam.mkdir()
    (seam / "sitecustomize.py").write_text(STOP_AT_A_WRITE)
    out = tmp_path / "run"
    env = {"PYTHONPATH": f"{seam}:{ROOT}", "AT": at, "SIGNAL": name}
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        done = run_subprocess(*run_args(engine.url, out, limit=20), env=env, timeout=300)

    assert done.returncode == 6, done.stderr
    assert "Traceback" not in done.stderr
    result = load_result(out)
    assert (result["status"], result["exit_code"]) == ("aborted", 6)
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []


# Hostile environments, end to end: signals, closed and full streams, full and read-only disks.


SIGNALS = [
    (signal.SIGTERM, "a scheduler's stop (Slurm, Kubernetes)"),
    (signal.SIGHUP, "an ssh or tmux session dropped"),
    (signal.SIGQUIT, "Ctrl-\\ on a terminal"),
    (signal.SIGUSR1, "a scheduler's warning before the time limit"),
    (signal.SIGINT, "Ctrl-C"),
]


@pytest.mark.parametrize("signum", [s for s, _ in SIGNALS], ids=[s.name for s, _ in SIGNALS])
def test_a_signal_mid_eval_writes_an_aborted_result_with_the_answers(engine, tmp_path, signum):
    engine.inject(Fault("hang", nth=NOT_PROBE - {2, 3}))  # two answers, then silence
    out = tmp_path / "run"
    with deadline(90, engine):
        child = start_subprocess(*run_args(engine.url, out, **SMALL_RUN))
        try:
            assert engine.wait_until(lambda e: e.hanging >= 2, timeout=60)
            child.send_signal(signum)
            stdout, stderr = child.communicate(timeout=30)
        finally:
            child.kill()

    assert child.returncode == 6, stderr
    assert "AbortedError: interrupted by a signal" in stderr
    assert "Traceback" not in stderr
    assert stdout == ""  # no verdict: the error is said once, on stderr
    doc = load_result(out)
    assert (doc["status"], doc["stage"], doc["exit_code"]) == ("aborted", "eval", 6)
    journal = (out / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(journal) == 1 + 2
    samples = (out / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(samples) == 2
