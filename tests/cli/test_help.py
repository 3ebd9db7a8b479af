"""`evalgate --help` and every subcommand's `--help`: the first thing a newcomer types."""

from __future__ import annotations

import importlib
import re
import shlex

import pytest

from evalgate.cli import SUBCOMMANDS, build_parser
from evalgate.errors import ExitCode
from tests.conftest import run_subprocess

pytestmark = pytest.mark.loopback


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


GATE_RUN = ["endpoint", "context and budget", "eval", "gate", "labels", "network and retries"]
HEADINGS = {
    # the groups each command's --help shows, in this order, the everyday ones first
    "run": [*GATE_RUN, "output"],
    "hook": [*GATE_RUN, "output"],
    "context": ["endpoint", "context and budget", "eval", "network and retries", "output"],
    "probe": ["endpoint", "context and budget", "eval", "network and retries", "output"],
    "verify": ["gate", "output", "history"],
    "compare": ["gate", "output"],
    "history": ["gate", "output", "history"],
}


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_commands_help_shows_its_flags_in_groups_then_examples(command):
    done = run_subprocess(command, "--help", timeout=60)
    lines = done.stdout.splitlines()

    headings = [line[:-1] for line in lines if line.endswith(":") and not line.startswith(" ")]
    groups = [h for h in headings if h not in ("options", "positional arguments")]
    assert groups == [*HEADINGS[command], "configuration", "examples", "exit codes"]
    examples = lines[lines.index("examples:") + 1 : lines.index("exit codes:")]
    said = [line for line in examples if line.startswith("  # ")]
    typed = [
        line.strip() for line in examples if f"evalgate {command} " in line and "#" not in line
    ]
    assert 2 <= len(typed) <= 3 and len(said) == len(typed)


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_example_in_a_help_is_a_command_evalgate_reads(command):
    """Each example parses as it is written (its flags are the command's own)."""
    module = importlib.import_module(f"evalgate.cli.{command}")
    for _, example in module.EXAMPLES:
        argv = shlex.split(re.sub(r'^eval "\$\((.*)\)"$', r"\1", example))  # a job script's
        assert argv[:2] == ["evalgate", command]
        parsed = build_parser(argv[1:]).parse_args(argv[1:])
        assert parsed._name == command


def test_the_exit_codes_in_every_help_are_exit_codes_own():
    done = run_subprocess("compare", "--help", timeout=60)
    told = done.stdout.split("exit codes:\n", 1)[1]

    for code in ExitCode:
        first = code.meaning.replace("`", "").split()[:4]
        assert f"  {int(code)}  {' '.join(first)}" in told
