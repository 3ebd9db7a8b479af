"""evalgate.cli: arguments in, exit code out; `-v` wherever users type it."""

from __future__ import annotations

import pytest

from evalgate.cli import build_parser, main


@pytest.mark.parametrize(
    ("argv", "verbose"),
    [
        (["verify", "x"], 0),
        (["-v", "verify", "x"], 1),
        (["verify", "x", "-v"], 1),
        (["verify", "-v", "-v", "x"], 2),
        (["run", "--isl", "1", "-v"], 1),
        (["compare", "a", "b", "--verbose"], 1),
    ],
)
def test_verbose_is_accepted_before_and_after_the_subcommand(argv, verbose):
    assert build_parser(argv).parse_args(argv).verbose == verbose


def test_run_dash_v_after_the_subcommand_shows_the_traceback(tmp_path, capsys):
    """`evalgate run ... -v` was refused as an unrecognized argument (exit 2, no run at all)."""
    code = main(
        [
            "run",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--isl",
            "1024",
            "--osl",
            "1024",
            "--ready-timeout",
            "0.5",
            "--output-dir",
            str(tmp_path / "run"),
            "-v",
        ]
    )
    err = capsys.readouterr().err
    assert "unrecognized arguments" not in err
    assert code == 3  # the endpoint is not there: a readiness error, with its evidence
    assert "NotReadyError: " in err
    assert "Traceback (most recent call last)" in err  # what -v is for
    assert (tmp_path / "run" / "result.json").is_file()
