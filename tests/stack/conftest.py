"""Fixtures that start the real local engine stack once per test session.

`engine_single`, `engine_pd`, `engine_sglang` and `engine_dynamo` install the stack if needed
(scripts/engine-setup), start their topology (scripts/engine-up) and stop it at the end of the
session (scripts/engine-down).
Set EVALGATE_SKIP_ENGINE=1 to skip these tests; without it, a stack that cannot be installed or
started is a test error, never a skip.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.conftest import run_args

from . import stack


@pytest.fixture(scope="session")
def engine_installed() -> None:
    reason = stack.skip_reason()
    if reason:
        pytest.skip(reason)
    stack.setup()


def serving(topology: str, own: Path | None = None, **given: object) -> Iterator[stack.EngineStack]:
    """TOPOLOGY up until the fixture ends; with `own`, a stack of its own: that run directory,
    and the settings EVALGATE_<TOPOLOGY>_<NAME> `given` (its own ports)."""
    env = None
    if own is not None:
        prefix = f"EVALGATE_{topology.upper()}_"
        env = {"EVALGATE_ENGINE_RUN": str(own)} | {prefix + k: str(v) for k, v in given.items()}
    running = stack.up(topology, env)
    try:
        yield running
    finally:
        stack.down(topology, env)


@pytest.fixture(scope="session")
def engine_single(engine_installed: None) -> Iterator[stack.EngineStack]:
    """One vLLM engine (max-model-len 2048) behind vllm-router in plain mode."""
    yield from serving("single")


@pytest.fixture(scope="session")
def engine_pd(engine_installed: None) -> Iterator[stack.EngineStack]:
    """A prefill engine (3072) and a decode engine (1536) behind vllm-router in PD mode.

    The router reports the prefill's limit; the decode, which generates, serves less, yet
    enough for a short GSM8K eval (SmolLM2's 5-shot chat prompts reach ~1200 tokens).
    """
    yield from serving("pd")


@pytest.fixture(scope="session")
def engine_sglang(engine_installed: None) -> Iterator[stack.EngineStack]:
    """One vLLM engine (max-model-len 2048) behind sglang-router, which lists the model as
    `unknown` with no max_model_len and has no /tokenize."""
    yield from serving("sglang")


@pytest.fixture(scope="session")
def engine_dynamo(engine_installed: None) -> Iterator[stack.EngineStack]:
    """One vLLM engine (max-model-len 2048) behind NVIDIA Dynamo's frontend, through a worker
    that registers no context length (so the frontend lists 8192) and passes vLLM's words on."""
    yield from serving("dynamo")


def engine_args(
    command: str,
    base_url: str,
    model: str,
    *extra: str,
    out: Path | None = None,
    raw: Sequence[str] = (),
) -> list[str]:
    """evalgate arguments against the real stack: `command` and each of `extra` split on spaces,
    `raw` kept whole; no ISL, OSL or concurrency but those given."""
    first, *words = [word for text in (command, *extra) for word in text.split()]
    return run_args(
        base_url, out, *words, *raw, command=first, model=model, isl=None, osl=None,
        num_concurrent=None,
    )  # fmt: skip
