"""Fixtures that start the real local engine stack once per test session.

`engine_single`, `engine_pd`, `engine_sglang` and `engine_dynamo` install the stack if needed
(scripts/engine-setup), start their topology (scripts/engine-up) and stop it at the end of the
session (scripts/engine-down).
Set EVALGATE_SKIP_ENGINE=1 to skip these tests; without it, a stack that cannot be installed or
started is a test error, never a skip.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import stack


@pytest.fixture(scope="session")
def engine_installed() -> None:
    reason = stack.skip_reason()
    if reason:
        pytest.skip(reason)
    stack.setup()


def _running(topology: str) -> Iterator[stack.EngineStack]:
    running = stack.up(topology)
    try:
        yield running
    finally:
        stack.down(topology)


@pytest.fixture(scope="session")
def engine_single(engine_installed: None) -> Iterator[stack.EngineStack]:
    """One vLLM engine (max-model-len 2048) behind vllm-router in plain mode."""
    yield from _running("single")


@pytest.fixture(scope="session")
def engine_pd(engine_installed: None) -> Iterator[stack.EngineStack]:
    """A prefill engine (3072) and a decode engine (1536) behind vllm-router in PD mode.

    The router reports the prefill's limit; the decode, which generates, serves less, yet
    enough for a short GSM8K eval (SmolLM2's 5-shot chat prompts reach ~1200 tokens).
    """
    yield from _running("pd")


@pytest.fixture(scope="session")
def engine_sglang(engine_installed: None) -> Iterator[stack.EngineStack]:
    """One vLLM engine (max-model-len 2048) behind sglang-router, which lists the model as
    `unknown` with no max_model_len and has no /tokenize."""
    yield from _running("sglang")


@pytest.fixture(scope="session")
def engine_dynamo(engine_installed: None) -> Iterator[stack.EngineStack]:
    """One vLLM engine (max-model-len 2048) behind NVIDIA Dynamo's frontend, through a worker
    that registers no context length (so the frontend lists 8192) and passes vLLM's words on."""
    yield from _running("dynamo")
