"""Shared fixtures: a clean environment, a fake engine, and running the CLI as a user would."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import evalgate.cli
from evalgate.cli import main
from evalgate.environment import JOB_VARIABLES
from evalgate.run import RunOutcome, run_gate
from evalgate.schemas import validation_errors
from tests import fakeengine
from tests.browser import find_chromium
from tests.fakeengine import EngineBehaviour, FakeEngine, load_gsm8k
from tests.verify.sweeps import CONCS, answers, baseline_answers, evalgate_sweep

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "build" / "test-artifacts" / "browser"
"""Where the browser tier keeps its screenshots (emptied when a session takes its first)."""
_STARTED = pytest.StashKey[float]()

# -- the tiers ---------------------------------------------------------------------------------
# Every test is in exactly one tier (pyproject.toml's markers): `pytest -m unit` is the quick check
# of a change, and a unit test that reaches for a socket or a process fails, saying so.

# tests/project/test_tiers.py runs planted tests in a pytest of their own
pytest_plugins = ("pytester",)
TIERS = ("unit", "loopback", "browser", "postgres", "engine")
UNIT_ONLY = "unit tests open no socket and start no process: mark it loopback"
# Tiers whose tests share one server or browser per session: under pytest-xdist (`-n`, as
# pyproject's addopts ask) each runs on one worker, so the server starts once and its tests
# never race one another; unit and loopback tests spread over every worker.
SERIAL = ("browser", "postgres", "engine")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker per CPU for the unit tier alone (all CPU, no waiting), one more for
    a run with the other tiers: some of their tests wait on clocks for minutes (the lost hosts)
    and each engine stack runs on one CPU, and the extra worker keeps every CPU at work
    meanwhile (pyproject's --maxprocesses still caps the count)."""
    cpus = len(os.sched_getaffinity(0))
    return cpus if config.option.markexpr.strip() == "unit" else cpus + 1


@pytest.hookimpl(tryfirst=True)  # before -m deselects: every collected test is checked
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse the collection when a test is in no tier or in more than one, naming each."""
    wrong = []
    for item in items:
        tiers = sorted({mark.name for mark in item.iter_markers() if mark.name in TIERS})
        if len(tiers) != 1:
            wrong.append(f"{item.nodeid}: {' and '.join(tiers) or 'no tier'}")
        elif tiers[0] in SERIAL:
            item.add_marker(pytest.mark.xdist_group(tiers[0]))
    if not wrong:
        return
    said = (
        f"{len(wrong)} test(s) not in exactly one tier; mark each with one of "
        f"{', '.join(TIERS)} (pytestmark = pytest.mark.TIER):\n  " + "\n  ".join(wrong)
    )
    if hasattr(config, "workerinput"):
        # a pytest-xdist worker, where a UsageError is lost in the worker's crash: the refusal is
        # a collection error the controller prints, and no test runs
        config.hook.pytest_collectreport(report=pytest.CollectReport("tiers", "failed", said, []))
        items.clear()
        return
    raise pytest.UsageError(said)


@pytest.fixture(autouse=True)
def unit_tier_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """In the unit tier, creating a socket or starting a process raises AssertionError."""
    if request.node.get_closest_marker("unit") is None:
        return
    import asyncio
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(UNIT_ONLY)

    create = socket.socket.__init__

    def wrap_only(self: socket.socket, family=-1, type=-1, proto=-1, fileno=None) -> None:
        # asyncio's event loop needs socket.socketpair(), which wraps fds already made: allowed
        if fileno is None:
            refuse()
        create(self, family, type, proto, fileno)

    monkeypatch.setattr(socket.socket, "__init__", wrap_only)
    for owner, name in (
        (socket, "create_connection"),
        (subprocess.Popen, "__init__"),
        (os, "fork"),
        (os, "posix_spawn"),
        (os, "posix_spawnp"),
        (asyncio, "create_subprocess_exec"),
        (asyncio, "create_subprocess_shell"),
    ):
        monkeypatch.setattr(owner, name, refuse)


# Variables evalgate reads: a developer's shell must not leak into the tests.
_READ_VARS = (
    "ISL",
    "OSL",
    "MODEL",
    "MODEL_PATH",
    "MODEL_PREFIX",
    "EVAL_MAX_MODEL_LEN",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ROUTER_URL",
    "WORKER_URLS",
    "CONC",
    "PREFILL_SERVER_CONFIG",
    "DECODE_SERVER_CONFIG",
    "RUNNER_TYPE",
    "FRAMEWORK",
    "PRECISION",
    "KV_CACHE_DTYPE",
    "MODEL_NAME",
    "PORT",
    "EVAL_CONC",
    "EVAL_CONCURRENT_REQUESTS",
    "EVAL_LIMIT",
    "EVAL_TASKS_DIR",
    "SPEC_DECODING",
    "RESULT_FILENAME",
    "IS_MULTINODE",
    "GITHUB_ACTIONS",
    "GITHUB_STEP_SUMMARY",
    "SGLANG_SIMULATE_ACC_LEN",
    "GITHUB_RUN_ID",
    "GITHUB_SHA",
    "GITHUB_ACTOR",
    "IMAGE",
)
# The engine stack's own variables (scripts/engine-*) are the test environment's, not evalgate's.
_STACK_VARS = (
    "EVALGATE_ENGINE",
    "EVALGATE_SKIP_ENGINE",
    "EVALGATE_SINGLE_",
    "EVALGATE_PD_",
    "EVALGATE_SGLANG_",
    "EVALGATE_DYNAMO_",
    "EVALGATE_ROUTER_",
)
FAST = ["--retry-wait-min", "0", "--retry-wait-max", "0", "--ready-timeout", "5"]


def run_args(
    url: str | None, out: Path | None = None, *extra: str, command: str = "run", **options: object
) -> list[str]:
    """`evalgate COMMAND` as the loopback tests call it: fake-model at `url` (None: no --base-url),
    ISL 1024, OSL 512, into `out` (None: no --output-dir), 8 in flight (run), retries without
    waiting; each of `options` by name replaces or adds one (num_concurrent=2: --num-concurrent
    2; True: the flag alone; None or False leaves it out); then `extra` as given."""
    words: list[str] = []
    for flag, value in _options(url, out, command, options).items():
        if value is True:
            words.append(flag)
        elif value is not None and value is not False:
            words += [flag, str(value)]
    return [command, *words, *extra]


@contextlib.contextmanager
def isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No evalgate variable from the developer's shell; evalgate's logger as it was (cli.main
    configures it) once the block ends."""
    logger = logging.getLogger("evalgate")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    for name in list(os.environ):
        if name.startswith(_STACK_VARS):
            continue
        if name.startswith("EVALGATE_") or name in _READ_VARS or JOB_VARIABLES.match(name):
            monkeypatch.delenv(name, raising=False)
    try:
        yield
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test runs `isolated` (fixtures of a wider scope use it themselves), with no secrets
    to scrub configured before or after it (the CLI configures its own)."""
    from evalgate import scrub

    scrub.configure([])
    with isolated(monkeypatch):
        yield
    scrub.configure([])


@contextlib.contextmanager
def deadline(seconds: float, engine: FakeEngine | None = None) -> Iterator[None]:
    """Fail a test that takes longer than `seconds`; stop the engine then, so that whatever is
    waiting on it (a hung or delayed request) returns and the test ends."""
    fired = threading.Event()

    def fire() -> None:
        fired.set()
        if engine is not None:
            engine.stop()

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
    assert not fired.is_set(), f"did not finish within {seconds} s"


@pytest.fixture
def behaviour() -> EngineBehaviour:
    """What `engine` serves: a module or a test that needs another engine overrides this fixture
    (or parametrizes it)."""
    return EngineBehaviour()


@pytest.fixture
def engine(behaviour: EngineBehaviour) -> Iterator[FakeEngine]:
    """A fake vLLM 0.32 serving `fake-model` at 4096 tokens, answering every question right
    unless `behaviour` says otherwise."""
    with FakeEngine(behaviour) as fake:
        yield fake


class CliResult(NamedTuple):
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Any:
    """Run `evalgate ARGS...` in-process; return exit code and captured output. With `within`,
    the run must end within that many seconds (`engine` is stopped if it does not)."""

    def run(
        *args: str | Path, within: float | None = None, engine: FakeEngine | None = None
    ) -> CliResult:
        limit = deadline(within, engine) if within is not None else contextlib.nullcontext()
        with limit:
            code = main([str(arg) for arg in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def run_subprocess(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m evalgate.cli ARGS` as its own process: start-up included."""
    return subprocess.run(
        [*EVALGATE, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(**(env or {})),
        check=False,
        cwd=cwd,
    )


def load_result(folder: Path) -> dict[str, Any]:
    """result.json of a run folder, checked against the schema."""
    document = json.loads((folder / "result.json").read_text(encoding="utf-8"))
    assert validation_errors("result", document) == []
    return dict(document)


def load_samples(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "samples.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:
        assert validation_errors("sample", record) == []
    return records


# -- the browser tier ----------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-screenshots",
        action="store_true",
        help="copy the browser tier's example screenshots into docs/ (the README shows them)",
    )
    parser.addoption(
        "--against",
        metavar="CHECKOUT",
        help=(
            "another checkout of evalgate whose reports"
            " tests/project/test_reports_against.py compares (give it as --against=CHECKOUT)"
        ),
    )


@pytest.fixture(scope="session")
def chromium() -> str:
    """Headless Chromium's executable; the browser tier is skipped, saying so, without it."""
    found = find_chromium()
    if found is None:
        pytest.skip(
            "browser tier skipped: Chromium is not installed and could not be (scripts/test "
            "installs Debian's chromium package when it runs as root with apt-get; or run "
            "`apt-get install chromium`)"
        )
    return found


@pytest.fixture(scope="session")
def screenshot() -> Any:
    """screenshot(name) -> the path to save it at, under SCREENSHOTS."""
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)

    def path(name: str) -> Path:
        return SCREENSHOTS / f"{name}.png"

    return path


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_STARTED] = time.time()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    # the screenshots this session took, read from the folder: under pytest-xdist a worker took
    # them, and the summary is printed by the process that started the workers
    started = terminalreporter.config.stash.get(_STARTED, time.time())
    kept = [p for p in SCREENSHOTS.glob("*.png") if p.stat().st_mtime >= started]
    if kept:
        terminalreporter.write_line(
            f"browser tier: {len(kept)} screenshot(s) kept in {SCREENSHOTS}"
        )


@dataclass
class Sweep:
    """A sweep of real `evalgate run`s against the loopback engine, as CI would download it."""

    root: Path
    """The artifacts folder: one subfolder per config."""
    manifest: Path
    """The --expect manifest: every config, one of which never ran."""
    thresholds: Path
    runs: dict[str, Path]
    """Run folders by outcome: pass, pass_h100, inconclusive, fail, error, malformed."""


# (name, hardware, concurrency, engine accuracy, engine rejects every generation request)
SWEEP_RUNS = (
    ("pass", "b200", 4, 1.0, False),
    ("pass_conc8", "b200", 8, 1.0, False),
    ("inconclusive", "b200", 16, 0.96, False),
    ("fail", "b200", 32, 0.7, False),
    ("error", "b200", 64, 1.0, True),
    ("pass_h100", "h100", 4, 1.0, False),
    ("pass_h100_conc8", "h100", 8, 1.0, False),
)
SWEEP_QUESTIONS = 50


@pytest.fixture(scope="session")
def loopback_sweep(tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    """Seven `evalgate run`s of 50 questions against FakeEngine (passing, inconclusive,
    failing, errored at the probe), a malformed result.json, and a manifest naming a concurrency
    that never ran; built once per test run and only read (a test that changes it copies it)."""
    return sweep_in(built_once(tmp_path_factory, "sweep", write_loopback_sweep))


def sweep_in(base: Path) -> Sweep:
    root = base / "eval-artifacts"
    runs = {name: root / f"eval_fake_{hw}_conc{conc}" for name, hw, conc, _, _ in SWEEP_RUNS}
    runs["malformed"] = root / "eval_fake_h100_conc16"
    return Sweep(root, base / "expected-evals.json", base / "thresholds.json", runs)


def write_loopback_sweep(base: Path) -> None:
    from tests.fakeengine import Fault

    sweep = sweep_in(base)
    with pytest.MonkeyPatch.context() as patch, isolated(patch):
        for name, hardware, conc, accuracy, rejects in SWEEP_RUNS:
            behaviour = EngineBehaviour(max_model_len=4096, accuracy=accuracy)
            with FakeEngine(behaviour) as engine:
                if rejects:
                    engine.inject(
                        Fault("error", status=400, message="max_tokens is too large for this model")
                    )
                options = {"model_prefix": "fake", "hardware": hardware, "framework": "vllm"}
                options |= {"precision": "fp8", "limit": SWEEP_QUESTIONS, "num_concurrent": conc}
                code = main(run_args(engine.url, sweep.runs[name], **options))
            assert code == {"error": 3, "fail": 1, "inconclusive": 5}.get(name, 0), (name, code)
    broken = sweep.runs["malformed"]
    broken.mkdir(parents=True)
    whole = (sweep.runs["pass_h100"] / "result.json").read_text()
    (broken / "result.json").write_text(whole[: len(whole) // 2])
    expected = [
        {"model_prefix": "fake", "hardware": "b200", "framework": "vllm", "precision": "fp8",
         "isl": 1024, "osl": 512, "concurrency": [4, 8, 16, 32, 64, 128]},
        {"model_prefix": "fake", "hardware": "h100", "framework": "vllm", "precision": "fp8",
         "isl": 1024, "osl": 512, "concurrency": [4, 8, 16]},
    ]  # fmt: skip
    sweep.manifest.write_text(json.dumps(expected))
    sweep.thresholds.write_text(json.dumps({"default": {"gsm8k": 0.9}}))


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """The folder `build` fills, built once per test run and then only read: under pytest-xdist
    each worker has a session of its own, so the first to ask builds it in the run's temporary
    folder (above each worker's own) while the rest wait on a lock, then read it."""
    shared = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    folder, built = shared / name, shared / f"{name}.built"
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.exists():  # not yet, or a worker's build failed midway: build it afresh
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            built.touch()
    return folder


# -- the package as a user installs it -------------------------------------------------------------


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel and the sdist, built from this checkout as a release builds them (the build
    backend from the test environment: python -m build --no-isolation); once per test run."""
    return built_once(tmp_path_factory, "dist", build_dist)


def build_dist(out: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@dataclass
class Venv:
    """A fresh virtualenv; `env` runs commands in it as an activated shell does, with pip
    finding evalgate-bench in the built `dist` (it is not on the registry)."""

    root: Path
    env: dict[str, str]

    def run(self, command: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
        """`command` as a user types it, by bash."""
        return subprocess.run(
            [shutil.which("bash") or "/bin/bash", "-c", command],
            env=self.env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def fresh_venv(path: Path, dist: Path) -> Venv:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    return venv_at(path, dist)


def venv_at(path: Path, dist: Path) -> Venv:
    """The virtualenv at `path`, made by fresh_venv (in this process or another)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith(("EVALGATE_", "PYTHON")) or k in _READ_VARS or k == "VIRTUAL_ENV")
    }
    env |= {
        "VIRTUAL_ENV": str(path),
        "PATH": f"{path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PIP_FIND_LINKS": " ".join(filter(None, [str(dist), os.environ.get("PIP_FIND_LINKS")])),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    return Venv(path, env)


# -- evalgate in a process of its own --------------------------------------------------------------

EVALGATE = [sys.executable, "-m", "evalgate.cli"]
"""The console script `evalgate` is `evalgate.cli:main`."""


def child_env(**extra: str) -> dict[str, str]:
    """The test's environment (no evalgate variable of the developer's shell), this checkout's
    evalgate first on the path, and `extra`."""
    env = {
        k: v for k, v in os.environ.items() if not (k.startswith("EVALGATE_") or k in _READ_VARS)
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env | extra


def start_subprocess(
    *args: str, env: dict[str, str] | None = None, **popen: Any
) -> subprocess.Popen[str]:
    """`evalgate ARGS` started in its own process and left running, where run_subprocess would
    wait: for a test that signals it, races it against another or hands it its own streams
    (`popen`; stdout and stderr are pipes unless it says otherwise)."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    popen.setdefault("cwd", ROOT)
    return subprocess.Popen([*EVALGATE, *args], text=True, env=child_env(**(env or {})), **popen)


def finish(child: subprocess.Popen[str], timeout: float = 60) -> CliResult:
    """Exit code, stdout and stderr of `child` once it ends; killed, failing the test, if it is
    still running `timeout` seconds later."""
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail(f"evalgate was still running {timeout} s later")
    return CliResult(child.returncode, out, err)


def _options(
    url: str | None, out: Path | None, command: str, options: dict[str, object]
) -> dict[str, object]:
    """run_args' options by flag, None where one is left out."""
    named: dict[str, object] = {"--base-url": url, "--model": MODEL, "--isl": 1024}
    named |= {"--osl": 512, "--output-dir": out}
    named["--num-concurrent"] = 8 if command == "run" else None
    named |= dict(zip(FAST[::2], FAST[1::2], strict=True))
    return named | {"--" + name.replace("_", "-"): value for name, value in options.items()}


def run_settings(url: str, out: Path, **fields: object) -> Any:
    """The Settings of `evalgate run` with run_args(url, out, **fields), for the tests that call
    the library (run_gate) where a user runs the command."""
    from evalgate.settings.values import Settings

    named = _options(url, out, "run", fields)
    return Settings(**{f[2:].replace("-", "_"): v for f, v in named.items() if v is not None})


def modules_loaded_by(statement: str) -> set[str]:
    """The modules a fresh interpreter holds once it has run `statement` (an import): what a
    command's start-up costs."""
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; {statement}; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return set(done.stdout.split())


def eval_client(url: str, **given: Any) -> Any:
    """evalgate's client for the eval's requests to `url`: chat, no key, a 30 s timeout, two
    attempts without waiting, one connection; `given` replaces any of these."""
    from evalgate.engine.client import EvalClient
    from evalgate.settings.endpoint import NetworkSettings

    options = {"api_key": None, "api": "chat", "timeout": 30, "attempts": 2, "wait_min": 0}
    options |= {"wait_max": 0, "max_connections": 1, "network": NetworkSettings()}
    return EvalClient(base_url=url, **(options | given))


@pytest.fixture
def shown(chromium: str, screenshot: Any, request: pytest.FixtureRequest) -> Any:
    """shown(page, name, probes, readme=None): what headless Chromium did and showed on `page`
    (tests.browser.look), which drew without an error or a request of its own into a real
    screenshot `name`; with --update-screenshots, the page as the README shows it is copied to
    `readme`, a (path, height in pixels) pair."""
    from tests.browser import look

    def show(page: Path, name: str, probes: dict[str, str], readme: Any = None) -> Any:
        shot = screenshot(name)
        seen = look(chromium, page, probes, screenshot=shot)
        print(f"screenshot: {shot}")
        assert seen.errors == []
        assert seen.requests == []
        assert shot.stat().st_size > 20_000  # a real picture, not a blank page
        if readme is not None and request.config.getoption("--update-screenshots"):
            target, height = readme
            kept = screenshot(f"{name}-readme")
            look(chromium, page, {}, screenshot=kept, max_height=height)
            shutil.copyfile(kept, target)
        return seen

    return show


# -- --config files ----------------------------------------------------------------------------

NO_WAIT = ["--osl", "1024", "--served-max-model-len", "16384"]
"""`evalgate context` with nothing to wait for: EVAL_MAX_MODEL_LEN = ISL + 1024 + 256."""


def config_file(tmp_path: Path, text: str) -> str:
    """`text` written as evalgate.yaml in `tmp_path`: its path, for --config."""
    path = tmp_path / "evalgate.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


# -- sweeps for verify -------------------------------------------------------------------------


@pytest.fixture
def dropped_sweeps(tmp_path: Path) -> tuple[Path, Path]:
    """A baseline of three configs, and a sweep where conc=8 and conc=16 lost 80 answers."""
    concs = CONCS[:3]
    base = evalgate_sweep(tmp_path / "base", "base", {c: baseline_answers() for c in concs})
    lost = {c: answers(seed=i, lost=80 if c in (8, 16) else 0) for i, c in enumerate(concs)}
    return base, evalgate_sweep(tmp_path / "dropped", "dropped", lost)


# -- reasoning models ---------------------------------------------------------------------------

THINKING_QUESTIONS = 100
THINKING_FIELDS = pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
"""The two fields vLLM's reasoning parsers put the thinking in (older releases, 0.32)."""


THINKING_RUN = {"limit": THINKING_QUESTIONS, "min_samples": 0}
"""Every run asks the 100 questions and is decided on its point estimate."""


# -- what a command says ------------------------------------------------------------------------


def error_lines(stderr: str, kind: str) -> list[str]:
    """The lines of `stderr` that start with `kind: ` (error, warning)."""
    return [line for line in stderr.splitlines() if line.startswith(f"{kind}: ")]


def thresholds_json(tmp_path: Path, data: dict[str, object]) -> Path:
    """`data` written as thresholds.json in `tmp_path`: its path."""
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps(data))
    return path


# -- a run with one fault injected ---------------------------------------------------------------

MODEL = "fake-model"
"""The model run_args names, and the fake engine serves unless told otherwise."""
FAULT_LIMIT = 20
FAULT_ACCURACY = 0.95  # 19 of the first 20 questions right: above the shipped 0.90, and not 1.0
FAULT_RUN = {
    "osl": 1024, "limit": FAULT_LIMIT, "num_concurrent": 4, "ready_timeout": 2, "timeout": 2,
    "max_attempts": 3,
}  # fmt: skip
"""Tiny timings (sub-second waits, no backoff): a fault ends or is outlasted quickly."""
DOCS = sorted(load_gsm8k().values(), key=lambda d: d.index)
"""The GSM8K test questions in order: the n-th is the n-th a run asks."""


@dataclass(frozen=True)
class Gate:
    """One finished run: what run_gate returned, result.json as written, and how long it took."""

    outcome: RunOutcome
    doc: dict[str, Any]
    elapsed: float
    out: Path

    @property
    def requests(self) -> dict[str, int]:
        return dict(self.doc["eval"]["requests"])

    @property
    def scores(self) -> list[tuple[str, float, int]]:
        return [(s["filter"], s["value"], s["n"]) for s in self.doc["scores"]]

    def samples(self) -> list[dict[str, Any]]:
        return load_samples(self.out)


def gate(target: FakeEngine | str, out: Path, *, within: float = 30.0, **overrides: Any) -> Gate:
    """run_gate under a deadline; result.json must exist, validate, and agree with the outcome."""
    engine = target if isinstance(target, FakeEngine) else None
    started = time.monotonic()
    with deadline(within, engine):
        url = target if isinstance(target, str) else target.url
        outcome = run_gate(run_settings(url, out, **(FAULT_RUN | {"min_samples": 0} | overrides)))
    elapsed = time.monotonic() - started
    doc = load_result(out)
    assert outcome.result_path == out / "result.json"
    assert (doc["status"], doc["exit_code"], doc["run_id"]) == (
        outcome.status,
        outcome.exit_code,
        outcome.result.run_id,
    )
    return Gate(outcome, doc, elapsed, out)


def eval_attempts(engine: FakeEngine) -> Counter[str]:
    """How often each question was asked by the eval (the probe, the first request, left out)."""
    return Counter(q for record in engine.requests[1:] for q in record.questions)


def assert_error(run: Gate, *, code: int, stage: str, says: str) -> None:
    """`run` ended in an error at `stage` with exit `code`, its message saying `says`."""
    assert (run.outcome.exit_code, run.doc["status"], run.doc["stage"]) == (code, "error", stage)
    assert says in run.outcome.reason
    assert run.doc["error"]["message"] == run.outcome.reason
    assert run.doc["scores"] == [] and run.doc["checks"] == []


@pytest.fixture
def nineteen_of_twenty(engine: FakeEngine) -> None:
    """`engine` answers at FAULT_ACCURACY: the accuracy of `clean_run`, whose scores a run with
    a fault must match."""
    engine.behaviour.accuracy = FAULT_ACCURACY


@pytest.fixture(scope="session")  # read-only: one run for every file that compares with it
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> Gate:
    """The reference: the same run with no fault."""
    with FakeEngine(EngineBehaviour(accuracy=FAULT_ACCURACY)) as running:
        run = gate(running, tmp_path_factory.mktemp("clean") / "run")
    assert run.outcome.exit_code == 0
    assert run.scores == [
        ("strict-match", 0.95, FAULT_LIMIT),
        ("flexible-extract", 0.95, FAULT_LIMIT),
    ]
    return run


@pytest.fixture
def verify_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """`evalgate` in-process builds only the verify subcommand, so a verify test depends on no
    other subcommand's module."""
    monkeypatch.setattr(evalgate.cli, "SUBCOMMANDS", ("verify",))


# -- secrets planted in a run --------------------------------------------------------------------

PLANTED_KEY = "sk-evalgate-PLANTED-123"
PLANTED_USER = "gate"
PLANTED_PASSWORD = "pw-PLANTED-456"  # noqa: S105  (planted, to be searched for)
PLANTED_BASIC = "Basic " + base64.b64encode(f"{PLANTED_USER}:{PLANTED_PASSWORD}".encode()).decode()
SECRETS = (PLANTED_KEY, PLANTED_PASSWORD, PLANTED_BASIC.split()[1])
"""What must appear nowhere: the key, the password, and the password as sent (base64)."""
PLANTED_RUN = {
    "osl": 1024, "limit": 10, "ready_timeout": 1, "timeout": 2, "max_attempts": 2,
    "num_concurrent": None,
}  # fmt: skip
"""Ten questions, short timeouts, one request in flight: where a secret could leak, quickly."""


@pytest.fixture
def auth_headers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str | None]]:
    """(path, Authorization header) of every request any fake engine receives."""
    seen: list[tuple[str, str | None]] = []
    lock = threading.Lock()
    serve = fakeengine._Handler._serve

    def spy(handler: Any, method: str) -> None:
        with lock:
            seen.append((handler.path, handler.headers.get("Authorization")))
        serve(handler, method)

    monkeypatch.setattr(fakeengine._Handler, "_serve", spy)
    return seen


def with_password(url: str) -> str:
    """`url` with PLANTED_USER:PLANTED_PASSWORD in it."""
    return url.replace("http://", f"http://{PLANTED_USER}:{PLANTED_PASSWORD}@", 1)


def assert_nowhere(*texts: str) -> None:
    """No secret planted is in any of `texts`."""
    for secret in SECRETS:
        for text in texts:
            assert secret not in text


# -- properties (hypothesis) ---------------------------------------------------------------------

QUICK = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""The property tests' hypothesis settings: 150 examples each, no deadline."""

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
"""Any JSON value, nested a few levels."""


def temp_file(data: bytes) -> Path:
    """`data` in a new temporary .json file (left for the system to clean): its path."""
    handle = tempfile.NamedTemporaryFile(delete=False, suffix=".json")  # noqa: SIM115
    with handle:
        handle.write(data)
    return Path(handle.name)


_TOKENS = ("2147483647", "2147483648", "1 to 2,147,483,647")


_COUNT = ("2147483647", "2147483648", "0 to 2,147,483,647")


_SECONDS = ("604800.0", "604800.0000000001", "0 to 604,800")


_DEADLINE = ("604800.0", "604800.0000000001", "more than 0 to 604,800")


_KEEPALIVE = ("32767.0", "32767.000000000004", "1 to 32,767")


_FRACTION = ("0.9999999999999999", "1.0")


SETTING_RANGES = {
    # field: (the largest value taken, the smallest refused past it, the range stated)
    "isl": _TOKENS,
    "osl": _TOKENS,
    "context_margin": (*_TOKENS[:2], "0 to 2,147,483,647"),
    "served_max_model_len": _TOKENS,
    "eval_max_model_len": _TOKENS,
    "max_tokens": _TOKENS,
    "max_tokens_cap": _TOKENS,
    "ready_timeout": _SECONDS,
    "discovery_timeout": _DEADLINE,
    "connect_timeout": _DEADLINE,
    "keepalive_idle": _KEEPALIVE,
    "keepalive_interval": _KEEPALIVE,
    "keepalive_probes": ("127", "128", "1 to 127"),
    "max_response_bytes": ("1073741824", "1073741825", "1,024 to 1,073,741,824"),
    "retry_wait_min": _SECONDS,
    "retry_wait_max": _SECONDS,
    "num_concurrent": ("65535", "65536", "1 to 65,535"),
    "limit": (*_TOKENS[:2], "1 to 2,147,483,647"),
    "timeout": _DEADLINE,
    "max_attempts": ("1000", "1001", "1 to 1,000"),
    "max_failed_requests": _COUNT,
    "max_truncated_rate": ("1.0", "1.0000000000000002", "0 to 1"),
    "alpha": (*_FRACTION, "more than 0 to less than 1"),
    "max_drop": (*_FRACTION, "0 to less than 1"),
    "min_samples": _COUNT,
    "flips": _COUNT,
    "last": _COUNT,
}
