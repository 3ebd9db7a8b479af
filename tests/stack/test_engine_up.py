"""engine-up's refusals that come before it starts anything: no engine stack is needed."""

from __future__ import annotations

import os
import subprocess

import pytest

from .stack import SCRIPTS

pytestmark = pytest.mark.loopback


def engine_up(tmp_path, cpus: str) -> subprocess.CompletedProcess[str]:
    """engine-up single with EVALGATE_ENGINE_CPUS=cpus and an engine home that holds nothing."""
    env = {
        **os.environ,
        "EVALGATE_ENGINE_HOME": str(tmp_path / "home"),
        "EVALGATE_ENGINE_CPUS": cpus,
    }
    return subprocess.run(
        [str(SCRIPTS / "engine-up"), "single"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("cpus", ["4096", "0-", "first"])
def test_a_cpu_list_that_is_not_this_machines_stops_engine_up_naming_it(tmp_path, cpus):
    done = engine_up(tmp_path, cpus)

    assert done.returncode == 1, done.stderr
    assert (
        f"engine-up single: FAILED: EVALGATE_ENGINE_CPUS={cpus} is not a CPU list of this machine"
    ) in done.stderr.splitlines()
    assert done.stdout == ""  # nothing started, nothing to describe
    assert not (tmp_path / "home").exists()


def test_a_cpu_of_this_machine_is_taken_and_said(tmp_path):
    cpu = max(os.sched_getaffinity(0))
    done = engine_up(tmp_path, str(cpu))

    said = done.stderr.splitlines()
    assert f"engine-up single: every process of the stack runs on CPUs {cpu}" in said
    # then the next check, as without the setting: nothing is installed in this engine home
    assert done.returncode == 1
    assert said[-1].startswith("engine-up single: FAILED: the engine stack is not installed in")
