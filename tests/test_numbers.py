"""Every number has a range and one rule for its digits (evalgate.numbers), whether a flag, a
variable or a server argument gives it: each case runs the CLI in its own process."""

from __future__ import annotations

import typing

import pytest

from evalgate.cli.arguments import flag_name
from evalgate.environment import variables
from evalgate.settings.values import SETTINGS
from tests.conftest import FAULT_RUN, SETTING_RANGES, run_args, run_subprocess
from tests.fakeengine import EngineBehaviour, FakeEngine, refused_url

pytestmark = pytest.mark.loopback


CONTEXT = {"--isl": "4096", "--osl": "1024", "--served-max-model-len": "16384"}


"""`evalgate context` with nothing to wait for: every setting is read, none is used to connect."""


"""Every numeric setting's range (the kernel's limits for the keepalive: TCP_KEEPIDLE and
TCP_KEEPINTVL at most 32,767 s, TCP_KEEPCNT at most 127)."""


TOGETHER = {"retry_wait_min": {"EVALGATE_RETRY_WAIT_MAX": "604800"}}


"""What a largest value needs beside it (the longest wait is at least the shortest)."""


def _numeric(annotation: object) -> bool:
    kinds = [a for a in typing.get_args(annotation) or (annotation,) if a is not type(None)]
    return kinds in ([int], [float])


def _without(argv: list[str], flag: str) -> list[str]:
    """`argv` without `flag` and its value (so that a variable sets it: a flag would win)."""
    at = argv.index(flag) if flag in argv else len(argv)
    return argv[:at] + argv[at + 2 :]


def _context(without: str) -> list[str]:
    argv = ["context"]
    for flag, value in CONTEXT.items():
        if flag != without:
            argv += [flag, value]
    return argv


def test_every_numeric_setting_has_its_range_in_the_table_above():
    numeric = {name for name, s in SETTINGS.items() if _numeric(s.info.annotation)}
    assert numeric - {"port"} == set(SETTING_RANGES)  # port: 1 to 65,535, checked with the URL


@pytest.mark.parametrize("field", SETTING_RANGES)
def test_each_numeric_setting_takes_its_largest_value_and_refuses_the_next(field):
    variable = variables(field)[0]
    largest, past, span = SETTING_RANGES[field]
    argv = _context(flag_name(field))

    took = run_subprocess(*argv, env={variable: largest, **TOGETHER.get(field, {})})
    refused = run_subprocess(*argv, env={variable: past, **TOGETHER.get(field, {})})

    assert took.returncode == 0, took.stderr
    assert refused.returncode == 2, refused.stderr
    assert f"{flag_name(field)} = {past} (set by " in refused.stderr, refused.stderr
    assert variable in refused.stderr
    assert f"out of range: give {span}." in refused.stderr


HUGE = [
    # (case, argv, environment, what the refusal names): the review's numbers on 8c36240
    ("ISL 10^20", ["--isl", "1" + "0" * 20], {}, "--isl = 100000000000000000000"),
    ("OSL 10^20 in OSL", [], {"OSL": "1" + "0" * 20}, "--osl = 100000000000000000000"),
    ("--context-margin 10^23", ["--context-margin", "1" + "0" * 23], {}, "--context-margin"),
    ("--max-tokens 10^23", ["--max-tokens", "1" + "0" * 23], {}, "--max-tokens"),
    ("--served-max-model-len 10^23", ["--served-max-model-len", "1" + "0" * 23], {}, "--served"),
    ("--min-samples 10^23", ["--min-samples", "1" + "0" * 23], {}, "--min-samples"),
    ("--limit 10^23", ["--limit", "1" + "0" * 23], {}, "--limit"),
    ("--num-concurrent 10^20", ["--num-concurrent", "1" + "0" * 20], {}, "--num-concurrent"),
    ("--keepalive-idle 100000", ["--keepalive-idle", "100000"], {}, "give 1 to 32,767"),
    ("--keepalive-interval 32768", ["--keepalive-interval", "32768"], {}, "give 1 to 32,767"),
    ("--keepalive-probes 128", ["--keepalive-probes", "128"], {}, "give 1 to 127"),
    (
        "idle + interval x probes past TCP_USER_TIMEOUT",
        ["--keepalive-idle", "32767", "--keepalive-interval", "16652", "--keepalive-probes", "127"],
        {},
        "is 2,147,571,000 ms, past the kernel's TCP_USER_TIMEOUT range (0 to 2,147,483,647 ms)",
    ),
]


DIGITS = [
    # one rule: ASCII digits 0-9 only, wherever a number is read
    ("ISL=8k in Devanagari", [], {"ISL": "\u096ek"}, "--isl = '\u096ek'"),
    ("ISL=1024 in Arabic-Indic", [], {"ISL": "\u0661\u0660\u0662\u0664"}, "--isl = "),
    ("--num-concurrent 16 in Arabic-Indic", ["--num-concurrent", "\u0661\u0666"], {}, ""),
    ("--timeout 1.5 in Arabic-Indic", ["--timeout", "\u0661.\u0665"], {}, "--timeout"),
    ("EVAL_LIMIT with an underscore", [], {"EVAL_LIMIT": "1_000"}, "--limit = '1_000'"),
    ("--retry-wait-max nan", ["--retry-wait-max", "nan"], {}, "--retry-wait-max = 'nan'"),
    ("ISL=1024 and a no-break space", [], {"ISL": "1024\u00a0"}, "--isl = '1024\\xa0'"),
    ("--timeout after an em space", ["--timeout", "\u200330"], {}, "--timeout"),
]


REFUSED = [(*case, "UsageError: Invalid settings: ") for case in HUGE]


REFUSED += [(*case, "ASCII digits 0-9") for case in DIGITS]


"""A number past its range, and one not in ASCII digits (one rule), by flag or variable:
(case, flags, variables, what the error says, what every such error says)."""


@pytest.mark.parametrize("case", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_number_out_of_its_rule_is_refused_before_anything_is_sent_or_written(
    engine, tmp_path, case
):
    argv, environment, says, rule = case
    out = tmp_path / "run"

    given = run_args(engine.url, out, *argv)
    for variable in environment:  # a flag would win over the variable
        [field] = [field for field in SETTINGS if variable in variables(field)]
        given = _without(given, flag_name(field))

    done = run_subprocess(*given, env=environment)

    assert done.returncode == 2, done.stderr
    assert rule in done.stderr and says in done.stderr
    assert "please report" not in done.stderr
    assert engine.log == []  # nothing sent
    assert not out.exists()  # nothing written


def test_a_served_length_in_other_digits_is_refused(tmp_path):
    """--max-model-len ८k in a server-argument string, as ISL=८k is."""
    done = run_subprocess(
        "context", "--isl", "1024", "--osl", "512", "--server-config", "--max-model-len \u096ek"
    )

    assert done.returncode == 2, done.stderr
    assert "holds --max-model-len '\u096ek', not a number of tokens" in done.stderr
    assert "in ASCII digits" in done.stderr


@pytest.mark.parametrize(
    ("where", "flag"),
    [
        ("--server-config", "--max-model-len"),
        ("--server-config", "--context-length"),
        ("PREFILL_SERVER_CONFIG", "--max-model-len"),
    ],
)
def test_a_served_length_of_thousands_of_digits_is_refused_not_a_crash(where, flag):
    """A server argument of 5,000 digits is read by the one rule, as --isl of 5,000 digits is:
    before, int() refused it past 4,300 digits, exit 4 "please report"."""
    args = f"{flag} {'9' * 5000}"
    argv = ["context", "--isl", "1024", "--osl", "512"]
    if where == "--server-config":
        done = run_subprocess(*argv, where, args)
    else:
        done = run_subprocess(*argv, env={where: args})

    assert done.returncode == 2, done.stderr
    source = "--server-config #1" if where == "--server-config" else where
    assert done.stderr.startswith(f"ContextError: {source} holds {flag} '999")
    assert "… (5,002 characters), not a number of tokens from 1 to 2,147,483,647" in done.stderr
    assert "please report" not in done.stderr


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--min-samples", "2147483648"], "2,147,483,648 is out of range: give 0 to 2,147,483,647"),
        (["--min-samples", "\u0661\u0666"], "ASCII digits 0-9"),
        (["--max-drop", "nan"], "not a decimal number in ASCII digits 0-9"),
        (["--expect", "\u0661\u0666"], "--expect"),
        (["--expect", "10001"], "out of range: give 1 to 10,000"),
    ],
    ids=[
        "--min-samples past",
        "--min-samples in other digits",
        "--max-drop nan",
        "--expect 16 in other digits",
        "--expect 10001",
    ],
)
def test_verify_reads_its_numbers_by_the_same_rule(tmp_path, argv, says):
    done = run_subprocess("verify", str(tmp_path), *argv)

    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "evalgate verify:" not in done.stdout  # refused before any result is read


def test_verify_takes_the_largest_min_samples(tmp_path):
    """2,147,483,647 questions: a verdict (inconclusive for a short run), not a crash."""
    out = tmp_path / "run"
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        assert run_subprocess(*run_args(engine.url, out, limit=5)).returncode == 5

    done = run_subprocess("verify", str(out), "--min-samples", "2147483647")

    assert done.returncode == 5, done.stderr
    assert "evalgate verify: INCONCLUSIVE (exit 5)" in done.stdout


def test_compare_reads_flips_by_the_same_rule(tmp_path):
    done = run_subprocess("compare", str(tmp_path), str(tmp_path), "--flips", "\u0663")

    assert done.returncode == 2
    assert (
        "argument --flips: '\u0663': a whole number is written with the ASCII digits" in done.stderr
    )


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--port", "9" * 5000], {}),
        ([], {"EVALGATE_LIMIT": "9" * 5000}),
    ],
    ids=["flag", "variable"],
)
def test_a_setting_of_thousands_of_digits_is_refused_saying_why_on_one_short_line(argv, env):
    """The value is shown cut, so the reason stays on the line: before, 5,000 digits filled the
    line's 2,000 characters and the reason was cut off."""
    done = run_subprocess("context", "--isl", "1024", "--osl", "512", *argv, env=env)

    assert done.returncode == 2, done.stderr
    usage, line = done.stderr.splitlines()
    assert usage == "usage: evalgate context [options]"
    assert "… (5,002 characters) (set by --" in line
    assert line.endswith("a number of 5,000 characters is not a whole number; write e.g. 16.")
    assert len(line) < 500


# A number out of its range or rule, by flag or variable: a usage error naming it and its range.


@pytest.mark.parametrize(
    "case",
    [
        ("--limit", "0", "0", "out of range: give 1 to 2,147,483,647"),
        ("--timeout", "0", "0.0", "out of range: give more than 0 to 604,800"),
        ("--num-concurrent", "0", "0", "out of range: give 1 to 65,535"),
        ("--max-attempts", "0", "0", "out of range: give 1 to 1,000"),
        ("--max-truncated-rate", "1.5", "1.5", "out of range: give 0 to 1"),
        ("--max-failed-requests", "-1", "-1", "out of range: give 0 to 2,147,483,647"),
        ("--retry-wait-min", "-1", "-1.0", "out of range: give 0 to 604,800"),
        ("--ready-timeout", "-1", "-1.0", "out of range: give 0 to 604,800"),
        ("--isl", "-5", "-5", "out of range: give 1 to 2,147,483,647"),
    ],
    ids=lambda case: case[0],
)
def test_a_bad_setting_is_a_usage_error(tmp_path, cli, case):
    flag, value, shown, says = case
    out = tmp_path / "run"

    code, _, err = cli(*run_args(refused_url(), out, **FAULT_RUN), flag, value, within=30)

    assert code == 2
    assert f"UsageError: Invalid settings: {flag} = {shown} (set by {flag} or " in err
    assert f"): {says}." in err
    assert not out.exists()  # settings come before the output folder: nothing to write into


@pytest.mark.parametrize(
    "case",
    [
        ("EVALGATE_LIMIT", "abc", "--limit", "not a whole number in ASCII digits 0-9"),
        ("EVALGATE_TIMEOUT", "soon", "--timeout", "not a decimal number in ASCII digits 0-9"),
        ("EVALGATE_API", "grpc", "--api", "Input should be 'chat' or 'completions'"),
    ],
    ids=lambda case: case[0],
)
def test_a_bad_environment_variable_is_a_usage_error(tmp_path, cli, monkeypatch, case):
    variable, value, flag, says = case
    monkeypatch.setenv(variable, value)

    code, _, err = cli("run", "--output-dir", str(tmp_path / "run"), within=30)

    assert code == 2
    assert f"UsageError: Invalid settings: {flag} = {value!r} (set by {flag} or " in err
    assert variable in err
    assert says in err


def test_a_flag_of_the_wrong_type_is_a_usage_error(tmp_path, cli):
    code, _, err = cli(
        *run_args(refused_url(), tmp_path / "run", **FAULT_RUN), "--limit", "ten", within=30
    )

    assert code == 2  # read by the same rule as its variable (evalgate.numbers)
    assert "--limit = 'ten' (set by --limit or EVALGATE_LIMIT or EVAL_LIMIT): not a whole" in err


def test_a_length_flag_that_is_not_a_token_count_names_the_forms_it_takes(tmp_path, cli):
    code, _, err = cli(
        *run_args(refused_url(), tmp_path / "run", **FAULT_RUN), "--isl", "8x", within=30
    )

    assert code == 2
    assert "--isl = '8x' (set by --isl or EVALGATE_ISL or ISL): not a whole number of tokens" in err
    assert "write e.g. 8192, 8k (8000) or 8K (8192)" in err
