"""evalgate.settings and evalgate.cli.arguments: flag beats environment beats default, errors name
the
flag and the value, and the API key never shows."""

from __future__ import annotations

import argparse
import os
import typing
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalgate.cli import arguments, build_parser
from evalgate.cli.arguments import settings_from_args
from evalgate.engine.urls import Endpoint, Network
from evalgate.errors import (
    UsageError,
)
from evalgate.evidence.harness import Job
from evalgate.settings.endpoint import EndpointSettings, NetworkSettings
from evalgate.settings.gate import LabelsSettings
from evalgate.settings.values import SETTINGS, value_of
from tests.conftest import QUICK

pytestmark = pytest.mark.unit


KEY = "sk-planted-7f3a9c1e-do-not-print"


def _settings_env_names() -> set[str]:
    """Every environment name Settings may read, upper-cased (matching is case-insensitive)."""
    names = {"EVALGATE_CONFIG"}
    for field, setting in SETTINGS.items():
        names |= {field.upper(), f"EVALGATE_{field.upper()}"}
        names |= {variable.upper() for variable in setting.variables}
    return names


ENV_NAMES = _settings_env_names()


@pytest.fixture(autouse=True)
def clean_settings_env(monkeypatch):
    """Only what a test sets reaches Settings, whatever the developer's shell holds."""
    for name in list(os.environ):
        if name.upper() in ENV_NAMES:
            monkeypatch.delenv(name)


PARSER = build_parser()


def read(found, field):
    """A setting by its own name, or the endpoint's served_model (--served-model-name or
    --model)."""
    return found.endpoint.served_model if field == "served_model" else value_of(found, field)


def settings(*argv):
    return arguments.settings_from_args(PARSER.parse_args(["run", *argv]))


ENV = [
    # (variable, value, field, parsed value)
    ("ISL", "8192", "isl", 8192),
    ("OSL", "1024", "osl", 1024),
    ("MODEL", "deepseek-ai/DeepSeek-R1-0528", "model", "deepseek-ai/DeepSeek-R1-0528"),
    ("MODEL_PATH", "/models/dsr1", "model_config_path", Path("/models/dsr1")),
    ("EVAL_MAX_MODEL_LEN", "9472", "eval_max_model_len", 9472),
    ("OPENAI_BASE_URL", "http://router:8000/v1", "base_url", "http://router:8000/v1"),
    ("MODEL_PREFIX", "dsr1", "model_prefix", "dsr1"),
    ("RUNNER_TYPE", "b200", "hardware", "b200"),
    ("FRAMEWORK", "sglang", "framework", "sglang"),
    ("PRECISION", "fp4", "precision", "fp4"),
    ("KV_CACHE_DTYPE", "fp8", "kv_cache_dtype", "fp8"),
    (
        "PREFILL_SERVER_CONFIG",
        "--max-model-len 9472",
        "prefill_server_config",
        "--max-model-len 9472",
    ),
    (
        "DECODE_SERVER_CONFIG",
        "--max-model-len 4096",
        "decode_server_config",
        "--max-model-len 4096",
    ),
    ("EVALGATE_ISL", "100", "isl", 100),
    (
        "EVALGATE_MODEL_CONFIG",
        "/models/x/config.json",
        "model_config_path",
        Path("/models/x/config.json"),
    ),
    ("EVALGATE_NUM_CONCURRENT", "8", "num_concurrent", 8),
    ("EVALGATE_BUDGET_POLICY", "harness", "budget_policy", "harness"),
    ("EVALGATE_API", "completions", "api", "completions"),
    ("EVALGATE_STRICT", "true", "strict", True),
    ("EVALGATE_DATASET_HUB", "1", "dataset_hub", True),
    ("EVALGATE_MAX_TRUNCATED_RATE", "0.05", "max_truncated_rate", 0.05),
    ("EVALGATE_OUTPUT_DIR", "/data/evalgate-out", "output_dir", Path("/data/evalgate-out")),
    (
        "EVALGATE_SERVER_CONFIG",
        "--max-model-len 9472 --tp 8",
        "server_config",
        ["--max-model-len 9472 --tp 8"],
    ),
    ("EVALGATE_SERVER_CONFIG", "  ", "server_config", []),
    ("EVALGATE_BASE_URL", "  ", "base_url", None),
    # the benchmark harness's job variables
    ("PORT", "8888", "base_url", "http://127.0.0.1:8888/v1"),
    ("MODEL_NAME", "dsr1-fp8", "served_model_name", "dsr1-fp8"),
    ("MODEL", "deepseek-ai/DeepSeek-R1", "served_model", "deepseek-ai/DeepSeek-R1"),
    ("MODEL_NAME", "dsr1-fp8", "served_model", "dsr1-fp8"),
    ("EVAL_LIMIT", "", "limit", None),
    ("IS_MULTINODE", "", "is_multinode", False),
    ("PORT", " ", "base_url", None),
    ("EVAL_CONC", "4 8", "concurrency", "4 8"),
    ("EVAL_CONCURRENT_REQUESTS", "16", "concurrency", "16"),
    ("EVAL_LIMIT", "200", "limit", 200),
    ("SPEC_DECODING", "mtp", "spec_decoding", "mtp"),
    ("RESULT_FILENAME", "dsr1_1k1k_fp8_vllm_tp8", "result_filename", "dsr1_1k1k_fp8_vllm_tp8"),
    ("IS_MULTINODE", "true", "is_multinode", True),
    ("EVAL_TASKS_DIR", "utils/evals/gsm8k.yaml", "eval_tasks_dir", Path("utils/evals/gsm8k.yaml")),
]


def test_model_name_is_served_and_model_names_the_config(monkeypatch):
    """Both set: requests use MODEL_NAME, thresholds and the config MODEL."""
    monkeypatch.setenv("MODEL", "deepseek-ai/DeepSeek-R1")
    monkeypatch.setenv("MODEL_NAME", "dsr1-fp8")
    found = settings()

    assert (found.endpoint.model, found.endpoint.served_model) == (
        "deepseek-ai/DeepSeek-R1",
        "dsr1-fp8",
    )


def test_a_base_url_beats_port(monkeypatch):
    monkeypatch.setenv("PORT", "8888")
    monkeypatch.setenv("ROUTER_URL", "http://router:30000/v1")

    assert settings().endpoint.base_url == "http://router:30000/v1"
    assert settings("--base-url", "http://node0:1/v1").endpoint.base_url == "http://node0:1/v1"


def test_eval_conc_beats_conc(monkeypatch):
    monkeypatch.setenv("CONC", "64")
    monkeypatch.setenv("EVAL_CONC", "4 8")

    assert settings().eval.concurrency == "4 8"


@pytest.mark.parametrize(("variable", "value", "field", "expected"), ENV)
def test_environment_names(monkeypatch, variable, value, field, expected):
    monkeypatch.setenv(variable, value)

    assert read(settings(), field) == expected


def test_openai_api_key_is_read_and_kept_secret(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)

    found = settings()

    assert found.endpoint.api_key is not None
    assert found.endpoint.api_key.get_secret_value() == KEY


def test_defaults_with_an_empty_environment():
    found = settings()

    assert (found.context.isl, found.context.osl, found.endpoint.model, found.endpoint.api_key) == (
        None,
        None,
        None,
        None,
    )
    assert found.endpoint.api == "chat"
    assert found.context.context_margin == 256
    assert found.context.budget_policy == "fit"
    assert found.context.max_tokens_cap == 16384
    assert found.eval.num_concurrent == 64
    assert found.endpoint.network.max_attempts == 5
    assert found.endpoint.worker_urls == []
    assert found.output.output_dir == Path("evalgate-results")


PRECEDENCE = [
    # (case, argv, environment, field, expected)
    ("flag beats env", ["--isl", "5"], {"ISL": "7"}, "isl", 5),
    ("env beats default", [], {"ISL": "7"}, "isl", 7),
    ("default", [], {}, "isl", None),
    (
        "flag beats EVALGATE_ env",
        ["--num-concurrent", "8"],
        {"EVALGATE_NUM_CONCURRENT": "16"},
        "num_concurrent",
        8,
    ),
    ("EVALGATE_ env beats default", [], {"EVALGATE_NUM_CONCURRENT": "16"}, "num_concurrent", 16),
    (
        "--model-config beats MODEL_PATH",
        ["--model-config", "/a"],
        {"MODEL_PATH": "/b"},
        "model_config_path",
        Path("/a"),
    ),
    (
        "--no-strict beats EVALGATE_STRICT",
        ["--no-strict"],
        {"EVALGATE_STRICT": "true"},
        "strict",
        False,
    ),
    ("--strict", ["--strict"], {}, "strict", True),
    ("--api beats EVALGATE_API", ["--api", "chat"], {"EVALGATE_API": "completions"}, "api", "chat"),
    (
        "--eval-max-model-len beats EVAL_MAX_MODEL_LEN",
        ["--eval-max-model-len", "4096"],
        {"EVAL_MAX_MODEL_LEN": "9472"},
        "eval_max_model_len",
        4096,
    ),
    (
        "--worker-url replaces the env list",
        ["--worker-url", "http://w:1/v1"],
        {"WORKER_URLS": "http://a:1/v1,http://b:2/v1"},
        "worker_urls",
        ["http://w:1/v1"],
    ),
]


@pytest.mark.parametrize(
    ("argv", "environment", "field", "expected"),
    [case[1:] for case in PRECEDENCE],
    ids=[case[0] for case in PRECEDENCE],
)
def test_precedence(monkeypatch, argv, environment, field, expected):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)

    assert read(settings(*argv), field) == expected


def test_context_subcommand_reads_flags_and_env(monkeypatch):
    monkeypatch.setenv("OSL", "1024")

    found = arguments.settings_from_args(PARSER.parse_args(["context", "--isl", "5"]))

    assert (found.context.isl, found.context.osl) == (5, 1024)


@pytest.mark.parametrize(
    ("ours", "theirs", "field", "expected"),
    [("EVALGATE_ISL", "ISL", "isl", 100), ("EVALGATE_MODEL", "MODEL", "model", "100")],
)
def test_evalgate_variable_beats_the_harness_name(monkeypatch, ours, theirs, field, expected):
    monkeypatch.setenv(ours, "100")
    monkeypatch.setenv(theirs, "200")

    assert read(settings(), field) == expected


def test_evalgate_model_config_beats_model_path(monkeypatch):
    monkeypatch.setenv("EVALGATE_MODEL_CONFIG", "/ours")
    monkeypatch.setenv("MODEL_PATH", "/theirs")

    assert settings().context.model_config_path == Path("/ours")


WORKERS = [
    ("WORKER_URLS", "http://prefill:8100/v1,http://decode:8200/v1"),
    ("WORKER_URLS", " http://prefill:8100/v1 , http://decode:8200/v1 ,"),
    ("EVALGATE_WORKER_URLS", "http://prefill:8100/v1,http://decode:8200/v1"),
]


@pytest.mark.parametrize(("variable", "value"), WORKERS)
def test_worker_urls_comma_separated_in_env(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)

    assert settings().endpoint.worker_urls == ["http://prefill:8100/v1", "http://decode:8200/v1"]


def test_worker_url_flag_is_repeatable():
    found = settings("--worker-url", "http://p:1/v1", "--worker-url", "http://d:2/v1")

    assert found.endpoint.worker_urls == ["http://p:1/v1", "http://d:2/v1"]


def test_server_config_flag_is_repeatable():
    found = settings(
        "--server-config", "--max-model-len 9472", "--server-config=--context-length 4096"
    )

    assert found.context.server_config == ["--max-model-len 9472", "--context-length 4096"]


INVALID = [
    # (case, argv, environment, what the message must say)
    (
        "ISL not a number",
        [],
        {"ISL": "abc"},
        ["--isl = 'abc'", "not a whole number of tokens in ASCII digits"],
    ),
    ("OSL negative", [], {"OSL": "-3"}, ["--osl = -3", "out of range: give 1 to 2,147,483,647"]),
    (
        "--num-concurrent 0",
        ["--num-concurrent", "0"],
        {},
        ["--num-concurrent = 0", "out of range: give 1 to 65,535"],
    ),
    ("--isl -5", ["--isl", "-5"], {}, ["--isl = -5", "out of range: give 1 to 2,147,483,647"]),
    (
        "--max-truncated-rate 1.5",
        ["--max-truncated-rate", "1.5"],
        {},
        ["--max-truncated-rate = 1.5", "out of range: give 0 to 1"],
    ),
    (
        "--timeout 0",
        ["--timeout", "0"],
        {},
        ["--timeout = 0.0", "out of range: give more than 0 to 604,800"],
    ),
    (
        "budget policy in env",
        [],
        {"EVALGATE_BUDGET_POLICY": "greedy"},
        ["--budget-policy = 'greedy'", "'fit' or 'harness'"],
    ),
    ("EVAL_MAX_MODEL_LEN text", [], {"EVAL_MAX_MODEL_LEN": "9x"}, ["--eval-max-model-len = '9x'"]),
    ("ISL 8x", [], {"ISL": "8x"}, ["--isl = '8x'", "not a whole number of tokens"]),
    ("ISL 1.5k", [], {"ISL": "1.5k"}, ["--isl = '1.5k'"]),
    ("--osl -1", ["--osl=-1"], {}, ["--osl = -1", "out of range: give 1 to"]),
    (
        "--retry-wait-min 5 --retry-wait-max 1",
        ["--retry-wait-min", "5", "--retry-wait-max", "1"],
        {},
        ["--retry-wait-max = '1'", "is below --retry-wait-min 5"],
    ),
    (
        "retry waits crossed in the environment",
        [],
        {"EVALGATE_RETRY_WAIT_MIN": "3", "EVALGATE_RETRY_WAIT_MAX": "2"},
        ["--retry-wait-max = '2'", "is below --retry-wait-min 3"],
    ),
    ("two problems, both listed", ["--osl=-2"], {"ISL": "x"}, ["--isl = 'x'", "--osl = -2"]),
]


@pytest.mark.parametrize(
    ("argv", "environment"),
    [
        ([], {"ISL": "0", "OSL": "0", "EVAL_MAX_MODEL_LEN": "0"}),  # the harness's agentic rows
        ([], {"ISL": "", "OSL": " ", "EVAL_MAX_MODEL_LEN": ""}),
        (["--isl", "0", "--osl", "0k", "--eval-max-model-len", "0"], {}),
        (["--isl", "0"], {"ISL": "8192", "OSL": "00"}),  # the flag's 0 beats the variable
    ],
)
def test_zero_or_empty_lengths_mean_not_given(monkeypatch, argv, environment):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    given = settings(*argv)
    assert (given.context.isl, given.context.osl, given.context.eval_max_model_len) == (
        None,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("argv", "environment", "says"),
    [case[1:] for case in INVALID],
    ids=[case[0] for case in INVALID],
)
def test_invalid_value_names_flag_and_value(monkeypatch, argv, environment, says):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)

    with pytest.raises(UsageError) as caught:
        settings(*argv)

    message = caught.value.message
    assert message.startswith("Invalid settings: ")
    for part in says:
        assert part in message
    assert caught.value.exit_code == 2


HUMAN_READABLE = [
    # (flags, environment, field, value): vLLM's human_readable_int, as in server arguments
    (["--isl", "8k"], {}, "isl", 8000),
    (["--isl", "8K"], {}, "isl", 8192),
    (["--osl", "1k"], {}, "osl", 1000),
    ([], {"ISL": "8K"}, "isl", 8192),
    ([], {"EVAL_MAX_MODEL_LEN": "9k"}, "eval_max_model_len", 9000),
    (["--served-max-model-len", "32K"], {}, "served_max_model_len", 32768),
    (["--max-tokens", "2k"], {}, "max_tokens", 2000),
    (["--isl", " 1024 "], {}, "isl", 1024),
]


@pytest.mark.parametrize(("argv", "environment", "field", "value"), HUMAN_READABLE)
def test_token_lengths_read_like_server_arguments(monkeypatch, argv, environment, field, value):
    for name, text in environment.items():
        monkeypatch.setenv(name, text)

    assert read(settings(*argv), field) == value


def test_a_bad_flag_choice_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as caught:
        PARSER.parse_args(["run", "--budget-policy", "greedy"])

    assert caught.value.code == 2
    assert "invalid choice: 'greedy'" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["env", "flag"])
def test_api_key_not_in_repr_or_str(monkeypatch, how):
    if how == "env":
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        found = settings()
    else:
        found = settings("--api-key", KEY)

    assert found.endpoint.api_key.get_secret_value() == KEY
    assert KEY not in repr(found)
    assert KEY not in str(found)
    assert KEY not in found.model_dump_json()


@pytest.mark.parametrize("how", ["env", "flag"])
def test_api_key_not_in_a_usage_error(monkeypatch, how):
    monkeypatch.setenv("ISL", "abc")
    argv = ["--num-concurrent", "0"]
    if how == "env":
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
    else:
        argv += ["--api-key", KEY]

    with pytest.raises(UsageError) as caught:
        settings(*argv)

    assert "--num-concurrent = 0" in caught.value.message
    assert KEY not in caught.value.message
    assert KEY not in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


def test_help_never_shows_the_key_from_the_environment(monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)

    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])

    shown = capsys.readouterr().out
    assert "--api-key" in shown
    assert KEY not in shown


def test_an_unrelated_api_key_variable_is_not_sent(monkeypatch):
    monkeypatch.setenv("API_KEY", KEY)

    assert settings().endpoint.api_key is None


VIEWS = [(Endpoint, EndpointSettings), (Network, NetworkSettings), (Job, LabelsSettings)]


"""A lower layer's name for a settings group it reads (the engine cannot import the settings):
each member it reads must be the group's, of the same type (or the view of its group)."""


@pytest.mark.parametrize(("view", "group"), VIEWS, ids=lambda kind: kind.__name__)
def test_each_view_of_a_group_names_the_groups_own_settings(view, group):
    """A setting renamed on either side fails here (and in mypy, where the group is passed)."""
    members = {name: item for name, item in vars(view).items() if isinstance(item, property)}
    assert members
    for name, member in members.items():
        kind = typing.get_type_hints(member.fget)["return"]
        field = group.model_fields.get(name)
        if field is not None:
            assert field.annotation == kind or (kind, field.annotation) in VIEWS, (group, name)
        else:  # a value the group derives (silence_limit, served_model)
            derived = getattr(group, name, None)
            assert isinstance(derived, property), f"{group.__name__} has no {name}"
            assert typing.get_type_hints(derived.fget)["return"] == kind, (group.__name__, name)


# Any settings are valid or a usage error naming the flag.


ZERO_IS_UNSET = {"isl", "osl", "eval_max_model_len"}


numeric_fields = [
    name
    for name, setting in SETTINGS.items()
    if setting.info.annotation in (int, float, int | None, float | None)
]


@QUICK
@given(
    st.dictionaries(
        st.sampled_from(numeric_fields),
        st.one_of(st.integers(-5, 5), st.floats(allow_nan=True), st.text(max_size=4)),
        max_size=4,
    )
)
def test_settings_are_valid_or_a_usage_error_naming_the_flag(values):
    try:
        found = settings_from_args(argparse.Namespace(**values))
    except UsageError as exc:
        assert exc.message.startswith("Invalid settings: --")
        return
    for name, value in values.items():
        if not isinstance(value, str):  # "3" is read as 3, as from the environment
            unset = name in ZERO_IS_UNSET and value == 0  # as the harness reads them
            assert value_of(found, name) == (None if unset else value)
