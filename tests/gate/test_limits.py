"""Gathering the limits: a length evalgate cannot read is never dropped in silence.

A limit the engine reports in a form evalgate cannot use is a warning (the other sources still
decide); one the user gave that cannot be read is an error naming it (exit 2), since the
user named it because it matters.
"""

from __future__ import annotations

import json

import pytest

from tests.fakeengine import EngineBehaviour, FakeEngine

CONTEXT = ["context", "--isl", "1024", "--osl", "1024", "--format", "json"]


@pytest.mark.parametrize("listed", ["9472", -1, 0, 9472.5, True, None], ids=repr)
def test_an_unreadable_max_model_len_on_v1_models_is_warned_not_dropped(cli, listed):
    behaviour = EngineBehaviour(max_model_len=4096, listed_max_model_len=listed)
    if listed is None:
        behaviour.list_max_model_len = False  # no field at all: TensorRT-LLM, not a problem
    with FakeEngine(behaviour) as engine:
        done = cli(*CONTEXT, "--base-url", engine.url, "--model", "fake-model")

    assert done.code == 0, done.err
    document = json.loads(done.out)
    sources = [limit["source"] for limit in document["served"]]
    assert "/v1/models of the endpoint" not in sources
    warned = [w for w in document["warnings"] if "max_model_len" in w and "ignored" in w]
    if listed is None:
        assert warned == []
    else:
        assert warned == [
            f"/v1/models of the endpoint reports max_model_len {listed!r} for fake-model, "
            "not a positive whole number: ignored"
        ]
        assert f"warning: {warned[0]}" in done.err


@pytest.mark.parametrize(
    "args",
    [
        "--max-model-len abc",
        "--max-model-len=abc",
        "--max-model-len 8k9 --port 1",
        "--max-model-len",
    ],
)
def test_a_server_argument_length_that_cannot_be_read_is_an_error(cli, args):
    done = cli(*CONTEXT, "--served-max-model-len", "4096", f"--decode-server-config={args}")

    assert done.code == 2
    assert "ContextError: DECODE_SERVER_CONFIG holds --max-model-len" in done.err
    assert "not a number of tokens" in done.err


def test_a_model_config_without_a_usable_length_key_is_an_error(cli, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096}))

    done = cli(*CONTEXT, "--served-max-model-len", "4096", "--model-config", str(config))

    assert done.code == 2
    assert f"ContextError: The model config {config} has none of the length keys" in done.err
    assert "--eval-max-model-len" in done.err
    assert done.out == ""
