"""A run read back from its folder (compare/runs.py): a baseline that is not a run is refused
before anything is sent."""

from __future__ import annotations

import pytest

from tests.conftest import run_args
from tests.fakeengine import EngineBehaviour, FakeEngine

pytestmark = pytest.mark.loopback


def test_a_missing_baseline_fails_before_anything_is_sent(cli, tmp_path):
    with FakeEngine(EngineBehaviour()) as engine:
        ran = cli(
            *run_args(
                engine.url, tmp_path / "run", baseline=tmp_path / "nowhere", num_concurrent=16
            )
        )
        sent = len(engine.requests)

    assert ran.code == 2
    assert "is neither a run folder holding result.json nor a result file" in ran.err
    assert sent == 0
