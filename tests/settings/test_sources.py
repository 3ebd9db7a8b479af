"""Where each setting comes from (settings/sources.py): `--config FILE` and `--print-config`, each
command in its own process: one precedence (a flag over a variable over the file over the
default), an unknown key refused with the nearest known one, and every value shown with where it
came from. The file's reader limits: tests/test_reader.py."""

from __future__ import annotations

import json

import pytest

from evalgate.settings.values import Settings
from tests.conftest import (
    FAULT_RUN,
    NO_WAIT,
    PLANTED_KEY,
    THINKING_RUN,
    assert_nowhere,
    config_file,
    load_result,
    run_args,
    run_subprocess,
    with_password,
)
from tests.fakeengine import CHAT_PATH

pytestmark = pytest.mark.loopback


def _shown(done, flag: str) -> tuple[str, str]:
    """--print-config's line for `flag`: (its value, where it came from)."""
    line = next(line for line in done.stdout.splitlines() if line.split()[:1] == [flag])
    value, origin = line.split()[1], line.rsplit("(", 1)[1].rstrip(")")
    return value, origin


@pytest.mark.parametrize(
    ("flag", "environment", "expected", "origin"),
    [
        (None, None, "2048", "evalgate.yaml"),  # the file over the default
        (None, "4096", "4096", "ISL"),  # the variable over the file
        ("3072", "4096", "3072", "--isl"),  # the flag over the variable
    ],
    ids=["file", "variable over file", "flag over variable"],
)
def test_one_setting_given_by_file_variable_and_flag_takes_the_one_precedence(
    tmp_path, flag, environment, expected, origin
):
    config = config_file(tmp_path, "isl: 2048\n")
    argv = ["context", "--config", config, *NO_WAIT, *(["--isl", flag] if flag else [])]
    env = {"ISL": environment} if environment else {}

    shown = run_subprocess(*argv, "--print-config", env=env, cwd=tmp_path)
    derived = run_subprocess(*argv, "--format", "json", env=env, cwd=tmp_path)

    assert shown.returncode == 0, shown.stderr
    assert _shown(shown, "--isl") == (expected, config if origin == "evalgate.yaml" else origin)
    assert derived.returncode == 0, derived.stderr
    assert json.loads(derived.stdout)["eval_max_model_len"] == int(expected) + 1024 + 256


def test_without_a_file_variable_or_flag_the_default_holds_and_says_so(tmp_path):
    done = run_subprocess("context", *NO_WAIT, "--print-config")

    assert done.returncode == 0, done.stderr
    assert _shown(done, "--isl") == ("unset", "default")
    assert _shown(done, "--context-margin") == ("256", "default")
    assert _shown(done, "--osl") == ("1024", "--osl")


def test_the_config_variable_names_the_file_and_the_flag_beats_it(tmp_path):
    one = config_file(tmp_path, "isl: 2048\n")
    other = tmp_path / "other.yaml"
    other.write_text("isl: 3000\n", encoding="utf-8")

    by_variable = run_subprocess(
        "context", *NO_WAIT, "--print-config", env={"EVALGATE_CONFIG": one}
    )
    by_flag = run_subprocess(
        "context", *NO_WAIT, "--config", str(other), "--print-config", env={"EVALGATE_CONFIG": one}
    )

    assert _shown(by_variable, "--isl") == ("2048", one)
    assert _shown(by_flag, "--isl") == ("3000", str(other))


@pytest.mark.parametrize(
    ("key", "nearest"),
    [("isll", "isl"), ("num_concurent", "num-concurrent"), ("base-uri", "base-url")],
)
def test_an_unknown_key_is_refused_naming_the_nearest_known_one(tmp_path, key, nearest):
    config = config_file(tmp_path, f"osl: 1024\n{key}: 8192\n")

    done = run_subprocess("context", "--config", config, *NO_WAIT)

    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert (
        f"UsageError: The config file {config} has the key {key!r}, which is no setting: did "
        f"you mean {nearest!r}?" in done.stderr
    )


def test_keys_are_the_long_flags_names_with_dashes_or_underscores(tmp_path):
    config = config_file(
        tmp_path,
        "served_max_model_len: 8192\nmodel-config: /models/x\nworker-url: [http://w:1/v1]\n",
    )

    done = run_subprocess("context", "--config", config, "--print-config")

    assert done.returncode == 0, done.stderr
    assert _shown(done, "--served-max-model-len") == ("8192", config)
    assert _shown(done, "--model-config") == ("/models/x", config)
    assert _shown(done, "--worker-url") == ("http://w:1/v1", config)


def test_one_setting_spelt_twice_in_a_file_is_refused(tmp_path):
    config = config_file(tmp_path, "base-url: http://a:1/v1\nbase_url: http://b:2/v1\n")

    done = run_subprocess("context", "--config", config, *NO_WAIT)

    assert done.returncode == 2
    assert "gives --base-url twice" in done.stderr


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("osl: 1_000\n", "--osl = '1_000'"),  # YAML reads 1000; a flag's rule does not
        ("timeout: .inf\n", "--timeout = '.inf'"),
        ("osl: \u0661\u0660\n", "ASCII digits 0-9"),
        ("- isl\n- 1024\n", "holds a list, not a mapping of settings"),
        ("osl: 512\nosl: 1024\n", "repeats the key 'osl'"),
        # YAML's booleans, which pydantic took as 1 (OSL 1, a 1 s timeout), exit 0
        ("osl: true\n", "--osl = True (set by --osl or EVALGATE_OSL or OSL or "),
        ("osl: yes\n", "true is no number; write a number"),
        ("timeout: on\n", "--timeout = True"),
    ],
    ids=["underscore", "inf", "other digits", "a list", "a repeated key", "true", "yes", "on"],
)
def test_a_files_values_are_read_as_a_flags_are(tmp_path, text, says):
    config = config_file(tmp_path, text)

    done = run_subprocess("context", "--config", config, "--isl", "1024", *NO_WAIT[2:])

    assert done.returncode == 2, done.stderr
    assert says in done.stderr


def test_a_files_number_with_vllms_suffix_is_read_as_a_flags(tmp_path):
    config = config_file(tmp_path, "isl: 8k\nosl: 1K\n")

    done = run_subprocess("context", "--config", config, "--served-max-model-len", "32K")

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"EVAL_MAX_MODEL_LEN={8000 + 1024 + 256}\n")


def test_print_config_shows_no_secret_and_sends_nothing(tmp_path):
    key = "sk-planted-config-key-9c1e"
    config = config_file(
        tmp_path, f"api-key: {key}\nbase-url: http://gate:pw-planted-77@127.0.0.1:9/v1\n"
    )

    done = run_subprocess("probe", "--config", config, "--print-config")

    assert done.returncode == 0, done.stderr
    assert key not in done.stdout + done.stderr and "pw-planted-77" not in done.stdout
    assert _shown(done, "--api-key") == ("<hidden>", config)
    assert _shown(done, "--base-url") == ("http://127.0.0.1:9/v1", config)


@pytest.mark.parametrize(
    ("command", "variable", "value", "flag"),
    [
        (["verify", "results"], "EVALGATE_QUIET", "true", "--quiet"),
        (["verify", "results"], "EVALGATE_JUNIT", "junit.xml", "--junit"),
        (["verify", "results"], "EVALGATE_JSON_FILE", "verdict.json", "--json"),
        (["verify", "results"], "EVALGATE_EXPECT", "12", "--expect"),
        (["verify", "results"], "EVALGATE_HISTORY", "history.db", "--record"),
        (["compare", "a", "b"], "EVALGATE_FLIPS", "3", "--flips"),
        (["compare", "a", "b"], "EVALGATE_MAX_DROP", "0.01", "--max-drop"),
        (["compare", "a", "b"], "EVALGATE_MARKDOWN", "1", "--markdown"),
        (["history", "h.db"], "EVALGATE_LAST", "3", "--last"),
        (["history", "h.db"], "EVALGATE_WHERE", "task=gsm8k", "--where"),
    ],
)
def test_verify_compare_and_history_flags_have_variables(command, variable, value, flag):
    done = run_subprocess(*command, "--print-config", env={variable: value})

    assert done.returncode == 0, done.stderr
    assert _shown(done, flag)[1] == variable


def test_settings_that_go_apart_are_refused_wherever_each_was_given(tmp_path):
    done = run_subprocess(
        "compare", "a", "b", "--markdown", env={"EVALGATE_JSON_FILE": "-"}, cwd=tmp_path
    )

    assert done.returncode == 2
    assert (
        "UsageError: --json - (set by EVALGATE_JSON_FILE) and --markdown (set by --markdown) "
        "both print on stdout: give one of them, or write the document to a file with --json "
        "FILE." in done.stderr
    )


MARGIN = "is not a fraction in [0, 1): 0.02 means two points of accuracy."


@pytest.mark.parametrize(
    ("argv", "environment", "says"),
    [
        (["verify", "results", "--max-drop", "2"], {}, f"UsageError: --max-drop 2.0 {MARGIN}\n"),
        (
            ["compare", "a", "b"],
            {"EVALGATE_MAX_DROP": "-0.5"},
            f"UsageError: --max-drop -0.5 {MARGIN} It was set by EVALGATE_MAX_DROP.\n",
        ),
        (
            ["run", "--max-drop", "2"],
            {},
            "UsageError: Invalid settings: --max-drop = 2.0 (set by --max-drop or "
            "EVALGATE_MAX_DROP): out of range: give 0 to less than 1.\n",
        ),
    ],
    ids=["verify's flag", "compare's variable", "run's flag"],
)
def test_a_margin_out_of_range_is_said_as_each_command_said_it(tmp_path, argv, environment, says):
    """compare and verify in the margin's words, the other commands with the setting's range,
    as before the one model; where it was set is added when not by its flag."""
    done = run_subprocess(*argv, env=environment, cwd=tmp_path)

    assert done.returncode == 2
    assert done.stderr.endswith(says), done.stderr


# --chat-template-kwargs, the request options that steer a reasoning model's thinking: a JSON
# object the record can hold, or refused before anything is sent.


def test_chat_template_kwargs_must_be_a_json_object(engine, cli, tmp_path):
    result = cli(
        *run_args(
            engine.url, tmp_path, chat_template_kwargs="enable_thinking=false", **THINKING_RUN
        )
    )
    assert result.code == 2
    assert "--chat-template-kwargs = 'enable_thinking=false'" in result.err
    assert "not valid JSON (line 1 column 1: Expecting value); give one such as" in result.err
    assert engine.requests == []


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ('{"a": 1' + "0" * 400 + "}", "holds an integer of 401 digits, past what a float holds"),
        ('{"enable_thinking": true, "enable_thinking": false}', "repeats the key 'enable_think"),
        ('{"a": {"b": NaN}}', "holds NaN or Infinity, which are not JSON"),
        ('{"a": -Infinity}', "holds NaN or Infinity, which are not JSON"),
    ],
    ids=["an integer past a float", "a repeated key", "NaN", "Infinity"],
)
def test_chat_template_kwargs_the_record_cannot_hold_are_refused_before_anything_is_sent(
    engine, tmp_path, value, said
):
    """Read by the one JSON reader, as plain values: an integer of 10^23 was sent to every
    request and then crashed the record (exit 4, result.json left "running"; the record now
    holds it, below); a repeated key was read as its last value; NaN was sent and recorded as
    no JSON reader outside Python reads it."""
    done = run_subprocess(
        *run_args(engine.url, tmp_path, chat_template_kwargs=value, **THINKING_RUN)
    )
    assert done.returncode == 2, done.stderr
    assert f"--chat-template-kwargs = {value!r}"[:100] in done.stderr  # a long one is cut
    assert said in done.stderr
    assert engine.requests == []
    assert not (tmp_path / "result.json").exists()


def test_chat_template_kwargs_of_a_plain_integer_past_64_bits_are_sent_and_recorded(
    engine, cli, tmp_path
):
    """A plain value, bounded as the reader bounds plain values (below what a float holds):
    the record holds what the flag took, and reads back (verify passes the run)."""
    big = 10**23
    result = cli(
        *run_args(engine.url, tmp_path, chat_template_kwargs=f'{{"budget": {big}}}', **THINKING_RUN)
    )
    assert result.code == 0, result.text
    bodies = [r.body for r in engine.requests if r.path == CHAT_PATH]
    assert all(b["chat_template_kwargs"] == {"budget": big} for b in bodies)
    assert load_result(tmp_path)["eval"]["chat_template_kwargs"] == {"budget": big}
    assert cli("verify", str(tmp_path)).code == 0


# Endpoint settings missing or malformed: a usage error naming the flag.


def test_missing_endpoint_settings_are_named(tmp_path, cli):
    out = tmp_path / "run"

    code, _, err = cli("run", "--isl", "1024", "--osl", "1024", "--output-dir", str(out), within=30)

    assert code == 2
    assert "UsageError: Missing --base-url, --model: set the flag(s)" in err
    assert load_result(out)["stage"] == "settings"


BAD_URLS = [
    ("notaurl", "no scheme"),
    ("ftp://127.0.0.1:8000/v1", "not http(s)"),
    ("http://", "no host"),
    ("127.0.0.1:8000/v1", "host without scheme"),
    ("http://127.0.0.1:99999/v1", "port out of range"),
    ("http://127.0.0.1:8000/v1?x=1", "a query"),
    ("http://127.0.0.1:8000/v1#models", "a fragment"),
]


@pytest.mark.parametrize("url", [u for u, _ in BAD_URLS], ids=[why for _, why in BAD_URLS])
def test_a_malformed_base_url_is_a_usage_error(tmp_path, cli, url):
    out = tmp_path / "run"

    code, _, err = cli(*run_args(url, out, **FAULT_RUN), "--ready-timeout", "0.2", within=10)

    assert code == 2
    assert "--base-url" in err


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_malformed_worker_url_is_a_usage_error(engine, tmp_path, cli):
    code, _, err = cli(
        *run_args(engine.url, tmp_path / "run", **FAULT_RUN),
        "--worker-url",
        "decode:8000/v1",
        within=30,
    )

    assert code == 2
    assert "--worker-url" in err


def test_a_url_with_a_query_names_what_to_drop(tmp_path, cli):
    code, _, err = cli(
        *run_args("http://127.0.0.1:8000/v1?x=1", tmp_path / "run", **FAULT_RUN), within=30
    )

    assert code == 2
    assert "'http://127.0.0.1:8000/v1?x=1' has a query or fragment (?x=1)" in err


# The settings' repr and str hide the key and a URL's password.


def test_the_settings_repr_hides_url_credentials():
    settings = Settings(base_url=with_password("http://127.0.0.1:8000/v1"), api_key=PLANTED_KEY)

    assert_nowhere(repr(settings), str(settings))
