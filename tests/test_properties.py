"""Properties of the parsers that meet untrusted input, checked with hypothesis.

Every parser either returns a well-formed value or raises its own EvalgateError (a usage error,
exit 2, with a message): never a stray TypeError, ValueError or UnicodeError, which the CLI
would show as a traceback and exit 1 ("below threshold"). The engine's answers are parsed so that
a 4xx is never retried and an answer can always be written to the journal.

The verdict's own properties (never PASS under the threshold or without a score; PASS when every
exact_match clears it) live in tests/gate/test_verdict.py.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from evalgate.cli.arguments import settings_from_args
from evalgate.context.budget import served_limits_from_args
from evalgate.context.limits import native_max_len
from evalgate.engine.answers import parse_answer
from evalgate.engine.urls import authorization, redact_url
from evalgate.engine.wire import MAX_MESSAGE_CHARS, parse_error
from evalgate.errors import (
    ArtifactError,
    ContextError,
    DatasetError,
    EvalgateError,
    MalformedAnswer,
    UsageError,
)
from evalgate.evidence import artifacts, journal
from evalgate.hook import parse_concurrencies
from evalgate.settings.values import SETTINGS, value_of
from evalgate.tasks.dataset import bundled_dir, load_dataset
from evalgate.thresholds import load_thresholds, parse_thresholds, resolve_floor
from tests.conftest import QUICK, json_scalars, json_values, temp_file

pytestmark = pytest.mark.unit

# -- the engine's error answers -------------------------------------------------------------------

statuses = st.integers(min_value=100, max_value=599)
error_objects = st.fixed_dictionaries(
    {},
    optional={
        "message": json_scalars,
        "type": json_scalars,
        "code": json_scalars,
        "param": json_scalars,
        "object": st.just("error"),
        "detail": json_values,
    },
)
error_bodies = st.one_of(
    st.text(max_size=300),
    error_objects.map(json.dumps),
    error_objects.map(lambda obj: json.dumps({"error": obj})),
    st.tuples(
        st.sampled_from(
            [
                "Request processing failed: Prefill server error 400 Bad Request: ",
                "Request processing failed: Prefill server error 503 Service Unavailable: ",
                "upstream error 429: ",
                "",
            ]
        ),
        error_objects.map(json.dumps),
    ).map("".join),
)


@QUICK
@given(statuses, error_bodies)
def test_an_error_answer_always_parses_to_a_readable_line(status, body):
    error = parse_error(status, body)

    assert error.status == status
    # verbatim, even when the engine said ""; past the cap, that much and the length
    assert len(error.message) <= MAX_MESSAGE_CHARS + len("… (1,000,000 characters)")
    assert error.describe().startswith(f"HTTP {status}")
    assert error.retryable == (
        error.effective_status in (408, 429) or 500 <= error.effective_status < 600
    )


@QUICK
@given(st.integers(min_value=500, max_value=599), error_objects.map(json.dumps))
def test_a_routers_500_around_a_workers_400_is_not_retried(status, inner):
    body = f"Request processing failed: Prefill server error 400 Bad Request: {inner}"

    error = parse_error(status, body)

    if error.wrapped_status is not None:  # recognised as wrapped: the worker's 400 decides
        assert error.wrapped_status == 400
        assert not error.retryable


@QUICK
@example(400, 'Prefill server error 503 Service Unavailable: {"message": "x"}')
@given(
    st.integers(min_value=400, max_value=499).filter(lambda s: s not in (408, 429)),
    error_bodies,
)
def test_a_4xx_answer_is_never_retried(status, body):
    assert not parse_error(status, body).retryable


# -- the engine's completions --------------------------------------------------------------------

contents = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3),
    json_values,
)
choices = st.fixed_dictionaries(
    {},
    optional={
        "message": st.fixed_dictionaries({}, optional={"content": contents}) | json_values,
        "text": contents,
        "finish_reason": json_scalars,
    },
)
completions = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"choices": st.lists(choices, max_size=2) | json_values},
        optional={"usage": st.fixed_dictionaries({}, optional={"completion_tokens": json_scalars})},
    ),
)


@QUICK
@given(completions, st.sampled_from(["chat", "completions"]))
def test_a_completion_is_text_or_malformed_never_a_crash(raw, api):
    try:
        answer = parse_answer(raw, api)
    except MalformedAnswer:
        return
    assert isinstance(answer.text, str)
    answer.text.encode("utf-8")  # the journal and samples.jsonl can always hold it
    assert answer.finish_reason is None or isinstance(answer.finish_reason, str)
    tokens = answer.completion_tokens
    assert tokens is None or (isinstance(tokens, int) and not isinstance(tokens, bool))
    assert answer.source in ("content", "reasoning_content", "reasoning", "text")


def test_a_lone_surrogate_is_replaced_and_a_pair_kept():
    raw = json.loads('{"choices": [{"message": {"content": "a \\ud83d b \\ud83d\\ude00"}}]}')

    assert parse_answer(raw, "chat").text == "a \ufffd b \U0001f600"


# -- URLs with credentials ----------------------------------------------------------------------

secrets = st.text(alphabet="abcXYZ019-_.~!$&'()*+,;=%", min_size=1, max_size=12).filter(
    lambda s: "%" not in s
)
hosts = st.sampled_from(["127.0.0.1", "node0", "router.example.com", "[::1]", "[fd00::2]"])
ports = st.none() | st.integers(min_value=1, max_value=65535)
paths = st.sampled_from(["/v1", "/v1/", "", "/serve/v1", "/v1/chat/completions"])


def _url(user: str | None, password: str | None, host: str, port: int | None, path: str) -> str:
    auth = "" if user is None else user + (f":{password}" if password is not None else "") + "@"
    return f"http://{auth}{host}{'' if port is None else f':{port}'}{path}"


@QUICK
@given(secrets, secrets, hosts, ports, paths)
def test_credentials_move_out_of_the_url_into_basic_auth(user, password, host, port, path):
    url = _url(user, password, host, port, path)

    bare, header = authorization(url, "a key the URL's credentials replace")

    assert bare == _url(None, None, host, port, path)
    assert header == _basic(user, password)


@QUICK
@given(hosts, ports, paths)
def test_a_plain_url_is_left_alone_and_the_key_sent_as_a_bearer(host, port, path):
    url = _url(None, None, host, port, path)

    assert authorization(url, None) == (url, "Bearer EMPTY")
    assert authorization(url, "k") == (url, "Bearer k")


def _basic(user: str, password: str) -> str:
    import base64

    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@QUICK
@example("u", "p", "[::1]", 8000, "/v1")
@given(secrets, secrets, hosts, ports, paths)
def test_redact_url_keeps_the_host_and_port(user, password, host, port, path):
    redacted = redact_url(_url(user, password, host, port, path))

    assert redacted == _url(None, None, host, port, path)
    assert urlsplit(redacted).port == port


# -- files a user gives ---------------------------------------------------------------------------

threshold_values = st.one_of(
    st.floats(min_value=-1, max_value=2),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.integers(-1, 2),
    st.text(max_size=3),
    st.none(),
)
task_floors = st.dictionaries(st.sampled_from(["gsm8k", "other"]), threshold_values, max_size=2)
threshold_files = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"default": task_floors},
        optional={
            "models": st.dictionaries(st.sampled_from(["dsr1", "glm5", "fake", ""]), task_floors),
            "overrides": st.lists(
                st.fixed_dictionaries(
                    {
                        "match": st.dictionaries(
                            st.sampled_from(["model_prefix", "hardware", "precision"]),
                            st.sampled_from(["dsr1", "b200", "fp8", ""]),
                            max_size=2,
                        ),
                        "thresholds": task_floors,
                    },
                    optional={"why": st.text(max_size=10)},
                ),
                max_size=3,
            ),
        },
    ),
)
labels = st.fixed_dictionaries(
    {},
    optional={
        "model_prefix": st.sampled_from(["dsr1", "glm5", "x"]),
        "hardware": st.sampled_from(["b200", "h100"]),
        "precision": st.sampled_from(["fp8", "bf16"]),
    },
)


@QUICK
@given(threshold_files, st.sampled_from(["fake-model", "dsr1-fp8", "glm5", None]), labels)
def test_a_thresholds_file_gives_a_floor_in_0_1_or_a_thresholds_error(data, model, found):
    try:
        floor = resolve_floor(parse_thresholds(data, "t.json"), model, found)
    except EvalgateError as exc:
        assert exc.exit_code == 2
        assert exc.message.startswith("t.json ")
        return
    assert 0 < floor.value <= 1
    assert floor.file == "t.json"
    assert "" not in data.get("models", {})


floor_pairs = st.lists(
    st.tuples(st.sampled_from(["gsm8k", "other"]), st.sampled_from(["0.5", "0.95", "NaN"])),
    min_size=1,
    max_size=4,
)


@QUICK
@given(floor_pairs)
def test_a_thresholds_text_with_a_repeated_or_nan_floor_is_always_refused(pairs):
    """Whatever order and values: a file that could be read two ways never gives a floor."""
    text = '{"default": {' + ", ".join(f'"{k}": {v}' for k, v in pairs) + "}}"
    path = temp_file(text.encode())
    keys = [key for key, _ in pairs]
    ambiguous = len(set(keys)) < len(keys) or any(v == "NaN" for _, v in pairs)
    try:
        thresholds = load_thresholds(path)
    except EvalgateError as exc:
        assert ambiguous
        assert exc.exit_code == 2
        return
    assert not ambiguous
    assert thresholds.file.default == {k: float(v) for k, v in pairs}


@QUICK
@given(st.lists(st.one_of(st.text(max_size=30), json_values.map(json.dumps)), max_size=6))
def test_a_dataset_split_is_rows_or_a_dataset_error(lines):
    folder = Path(tempfile.mkdtemp())
    path = folder / "test.jsonl"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    shutil.copyfile(bundled_dir() / "train.jsonl", folder / "train.jsonl")
    try:
        dataset = load_dataset(folder)  # only the published split's bytes are read as rows
    except DatasetError as exc:
        assert f"{path} has sha256 " in exc.message
        return
    finally:
        shutil.rmtree(folder)
    assert all(set(row) == {"question", "answer"} for row in dataset.test)


@QUICK
@given(st.one_of(st.text(max_size=200), json_values.map(json.dumps)))
def test_a_result_file_is_a_result_or_an_artifact_error(text):
    path = temp_file(text.encode("utf-8", "surrogatepass"))
    try:
        document = artifacts.read_result(path)
    except ArtifactError as exc:
        assert str(path) in exc.message
        return
    except UnicodeDecodeError:
        return  # tests/evidence/test_artifacts.py: test_a_binary_result_file_is_a_usage_error
    finally:
        path.unlink()
    assert isinstance(document, dict)


@QUICK
@given(st.lists(st.one_of(st.text(max_size=40), json_values.map(json.dumps)), max_size=5))
def test_a_journal_is_read_as_answers_or_ignored_never_a_crash(lines):
    fingerprint = {"model": "m"}
    header = json.dumps({"fingerprint": fingerprint})
    path = temp_file("\n".join([header, *lines]).encode())
    try:
        kept = journal.read_journal(path, fingerprint)
        other = journal.read_journal(path, {"model": "another"})
    finally:
        path.unlink()

    assert other == {}  # another engine's or protocol's answers are never reused
    assert all(isinstance(k, str) and v.prompt_sha256 == k for k, v in kept.items())


configs = st.fixed_dictionaries(
    {},
    optional={
        "max_position_embeddings": json_scalars | st.integers(1, 1 << 20),
        "model_max_length": json_scalars,
        "seq_length": st.integers(1, 1 << 20) | st.floats(),
        "rope_scaling": st.fixed_dictionaries(
            {},
            optional={
                "factor": json_scalars | st.floats(0.5, 8),
                "rope_type": st.sampled_from(["linear", "yarn", "dynamic", ""]),
            },
        )
        | json_scalars,
        "model_type": st.sampled_from(["llama", "gemma3"]),
    },
)


@QUICK
@example({"max_position_embeddings": 4096, "rope_scaling": {"factor": "x"}})
@given(configs | st.builds(lambda c: {"text_config": c}, configs))
def test_a_model_config_gives_a_positive_length_or_a_context_error(config):
    try:
        native = native_max_len(config, name="config.json")
    except ContextError:
        return
    assert native.value is None or native.value > 0


server_words = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["--max-model-len", "--max_model_len", "--context-length", "--port", "="]),
    st.from_regex(r"\A[0-9]{1,6}[kKmM]?\Z"),
)


@QUICK
@given(st.one_of(st.text(max_size=80), st.lists(server_words, max_size=6).map(" ".join)))
def test_server_arguments_give_positive_limits_or_name_the_unreadable_one(args):
    try:
        limits = served_limits_from_args(args, "--server-config #1")
    except ContextError as exc:
        assert exc.message.startswith("--server-config #1 holds --")
        assert exc.exit_code == 2
        return
    for limit in limits:
        assert limit.value > 0
        assert limit.source == "--server-config #1"


@QUICK
@given(st.text(max_size=30))
def test_a_concurrency_list_is_distinct_positive_integers_or_a_usage_error(text):
    try:
        values = parse_concurrencies(text)
    except UsageError as exc:
        assert "--concurrency" in exc.message
        return
    assert values and all(v >= 1 for v in values)
    assert len(set(values)) == len(values)


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
