"""A host that vanishes mid-eval is found in about a minute; a live one is waited for.

The fake engine runs in a network namespace of its own, reached from evalgate's through a
middle one (tests/netns.py); `cut()` sets its link down mid-eval, so its packets vanish without
an error, as when a node loses power. With default settings (--timeout 1800) evalgate must still
end within about two minutes of the loss, exit 4, complete evidence, the endpoint named; an
engine that answers after 100 s on a live link must still pass; and with --worker-url, a worker
that vanishes behind a router (whose own socket stays alive) ends the eval, named.

Root only (CI runs as root); skipped, saying why, where namespaces cannot be made. Each case
takes one to two minutes: the silence that declares a host dead is a minute by default.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import netns
from tests.conftest import EVALGATE, ROOT, finish, load_result, load_samples, run_args

REASON = netns.available()
pytestmark = [
    pytest.mark.loopback,
    pytest.mark.skipif(REASON is not None, reason=f"vanished-host tests: {REASON}"),
]
ENGINE = f"http://{netns.FAR_IP}:8000"
LOSS_BOUND_S = 150
"""The run ends within about two minutes of the loss: one minute of silence, a reconnection
that gets no answer within --connect-timeout (30 s), and room for a shared machine."""
CAP_S = 300
"""Killed past this, the test failing (26c619c waits out --timeout, 1800 s)."""
ENV = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
NETWORK = {"min_samples": 0, "ready_timeout": 60, "retry_wait_min": None, "retry_wait_max": None}
"""`evalgate run` with its default network settings (waits between attempts included)."""


@pytest.fixture
def namespaces() -> Iterator[netns.Namespaces]:
    made = netns.Namespaces()
    try:
        yield made
    finally:
        made.close()


def start_engine(ns: netns.Namespaces, latency_s: float) -> subprocess.Popen[str]:
    """The fake engine in far, on ENGINE; its first event streams at once (as vLLM's does), so
    the probe passes whatever the latency."""
    code = (
        "import sys, time\n"
        "from tests.fakeengine import EngineBehaviour, FakeEngine\n"
        f"behaviour = EngineBehaviour(max_model_len=4096, latency_s={latency_s},"
        " stream_starts_at_once=True)\n"
        "FakeEngine(behaviour, host='0.0.0.0', port=8000)\n"
        "print('serving', flush=True)\n"
        "time.sleep(3600)\n"
    )
    engine = ns.python_in(ns.far, code, env=ENV, cwd=ROOT)
    assert engine.stdout is not None and engine.stdout.readline().strip() == "serving"
    return engine


def start_router(ns: netns.Namespaces) -> tuple[subprocess.Popen[str], str]:
    """A router in near, in front of the engine in far (tests/front.py): it forwards and
    waits on the worker as long as it takes."""
    code = (
        "import time\n"
        "from tests.front import Front\n"
        f"front = Front({ENGINE!r})\n"
        "print(front.url, flush=True)\n"
        "time.sleep(3600)\n"
    )
    router = ns.python_in(ns.near, code, env=ENV, cwd=ROOT)
    assert router.stdout is not None
    return router, router.stdout.readline().strip()


def answered(out: Path) -> int:
    """Answers in the journal (its first line is the run's fingerprint, not an answer)."""
    journal = out / "journal.jsonl"
    return max(0, len(journal.read_text().splitlines()) - 1) if journal.exists() else 0


def cut_after_answers(ns: netns.Namespaces, run: subprocess.Popen[str], out: Path) -> float:
    """Wait until the eval has answers (requests in flight), then cut far: the moment."""
    deadline = time.monotonic() + 120
    while answered(out) < 2:
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "no answers within 120 s"
        time.sleep(0.2)
    ns.cut()
    return time.monotonic()


def stop(*processes: subprocess.Popen[str]) -> None:
    for process in processes:
        process.kill()
        process.communicate()


def run_and_cut(
    ns: netns.Namespaces, url: str, out: Path, *others: subprocess.Popen[str], **options: object
) -> tuple[int, str, float]:
    """`evalgate run` in near against `url`, far cut once its eval has answers: its exit code,
    stderr, and how long after the loss it ended; `others` are stopped with it."""
    argv = run_args(url, out, **options, **NETWORK)
    run = ns.popen_in(ns.near, [*EVALGATE, *argv], env=ENV, cwd=ROOT)
    try:
        lost = cut_after_answers(ns, run, out)
        code, _, stderr = finish(run, CAP_S)
        after = time.monotonic() - lost
    finally:
        stop(run, *others)
    return code, stderr, after


def assert_ended_naming(out: Path, ended: tuple[int, str, float], named: str) -> None:
    """Exit 4 within about two minutes of the loss, `named` in the error, the answers kept."""
    code, stderr, after = ended
    assert code == 4, stderr
    assert named in stderr
    assert "stopped answering" in stderr
    assert after < LOSS_BOUND_S, f"ended {after:.0f} s after the loss"
    document = load_result(out)
    assert (document["status"], document["stage"], document["exit_code"]) == ("error", "eval", 4)
    assert named in document["reason"]
    assert len(load_samples(out)) >= 2  # the answers that came before the loss are kept


def test_a_vanished_engine_ends_the_run_within_two_minutes_naming_it(namespaces, tmp_path):
    engine = start_engine(namespaces, latency_s=3)
    out = tmp_path / "run"
    ended = run_and_cut(namespaces, f"{ENGINE}/v1", out, engine, limit=60, num_concurrent=4)
    assert_ended_naming(out, ended, ENGINE)


def test_a_live_engine_answering_after_100_s_still_passes(namespaces, tmp_path):
    """Keepalive probes are answered by a live peer's kernel: a long generation is untouched."""
    engine = start_engine(namespaces, latency_s=100)
    out = tmp_path / "run"
    started = time.monotonic()
    argv = run_args(f"{ENGINE}/v1", out, limit=2, num_concurrent=2, **NETWORK)
    run = namespaces.popen_in(namespaces.near, [*EVALGATE, *argv], env=ENV, cwd=ROOT)
    try:
        _, _, stderr = finish(run, CAP_S)
    finally:
        stop(run, engine)

    assert run.returncode == 0, stderr
    assert time.monotonic() - started > 100
    document = load_result(out)
    assert document["status"] == "pass"
    requests = document["eval"]["requests"]
    assert (requests["completed"], requests["failed"], requests["retried"]) == (2, 0, 0)


def test_a_worker_vanishing_behind_the_router_ends_the_eval_naming_it(namespaces, tmp_path):
    engine = start_engine(namespaces, latency_s=3)
    router, router_url = start_router(namespaces)
    out = tmp_path / "run"
    worker = f"{ENGINE}/v1"
    options = {"limit": 60, "num_concurrent": 4, "worker_url": worker}
    ended = run_and_cut(namespaces, router_url, out, router, engine, **options)
    assert_ended_naming(out, ended, f"Worker {worker} stopped answering")
