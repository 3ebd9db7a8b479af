"""`evalgate --help` and every subcommand's `--help`: the first thing a newcomer types."""

from __future__ import annotations

import pytest

from evalgate.cli import SUBCOMMANDS
from tests.conftest import run_subprocess


@pytest.mark.parametrize("command", [[], *([name] for name in SUBCOMMANDS)], ids=" ".join)
def test_every_help_exits_0_and_names_the_command(command):
    done = run_subprocess(*command, "--help", timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith(f"usage: evalgate {' '.join(command)}".rstrip())
    assert "exit codes:" in done.stdout
    if not command:
        for name in SUBCOMMANDS:
            assert f"\n    {name}" in done.stdout


def test_the_help_text_keeps_a_literal_percent_sign():
    done = run_subprocess("--help", timeout=60)
    assert "95% Wilson interval" in done.stdout or "95% interval" in done.stdout


def test_no_command_prints_the_help_and_exits_2():
    done = run_subprocess(timeout=60)
    assert done.returncode == 2
    assert "usage: evalgate" in done.stderr
