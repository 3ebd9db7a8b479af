"""Shared fixtures: a clean environment, a fake engine, and running the CLI as a user would."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from evalgate.schemas import validation_errors
from tests.fakeengine import EngineBehaviour, FakeEngine

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
)
# The engine stack's own variables (scripts/engine-*) are the test environment's, not evalgate's.
_STACK_VARS = (
    "EVALGATE_ENGINE",
    "EVALGATE_SKIP_ENGINE",
    "EVALGATE_SINGLE_",
    "EVALGATE_PD_",
    "EVALGATE_ROUTER_",
)
FAST = ["--retry-wait-min", "0", "--retry-wait-max", "0", "--ready-timeout", "5"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No evalgate variable from the developer's shell; evalgate's logger as it was (cli.main
    configures it)."""
    logger = logging.getLogger("evalgate")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    for name in list(os.environ):
        if name.startswith(_STACK_VARS):
            continue
        if name.startswith("EVALGATE_") or name in _READ_VARS:
            monkeypatch.delenv(name, raising=False)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


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
def engine() -> Iterator[FakeEngine]:
    """A fake vLLM 0.32 serving `fake-model` at 4096 tokens, answering every question right."""
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as fake:
        yield fake


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Any:
    """Run `evalgate ARGS...` in-process; return exit code and captured output."""

    def run(*args: str) -> CliResult:
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def run_subprocess(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python -m evalgate.cli ARGS` as its own process: start-up included."""
    full_env = {
        k: v for k, v in os.environ.items() if not (k.startswith("EVALGATE_") or k in _READ_VARS)
    }
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "evalgate.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        check=False,
    )


def load_result(folder: Path) -> dict[str, Any]:
    """result.json of a run folder, checked against the schema."""
    document = json.loads((folder / "result.json").read_text())
    assert validation_errors("result", document) == []
    return dict(document)


def load_samples(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "samples.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:
        assert validation_errors("sample", record) == []
    return records
