"""Hostile inputs chosen by an attacker, or met by an unlucky CI: each is a clear error with its
exit code (2 for an input), in bounded time and memory, with nothing run and nothing lost.

Thresholds files, model configs, result trees and compare inputs here; task files in
tests/tasks/test_task_file.py. Black-box: the CLI (in-process, or in its own process where a
FIFO could block it) against files. RELIABILITY.md lists each case with its test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_subprocess

DOCUMENTS = Path(__file__).parent / "evidence" / "data" / "documents"
BIG = "1" + "0" * 400
"""An integer of 401 digits: fine for Python, past any float and any count evalgate writes."""


def good_run(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "result.json").write_text((DOCUMENTS / "result.json").read_text())
    return folder


# -- thresholds files ----------------------------------------------------------------------------

THRESHOLDS = [
    ("a 5,000-digit integer", "t.json", '{"default": {"gsm8k": 1' + "0" * 5000 + "}}",
     "is not JSON evalgate can read"),
    ("a YAML 1.1 boolean key", "t.yaml", "default: {gsm8k: 0.5}\nmodels: {no: {gsm8k: 0.5}}\n",
     "has the key 'no' (line 2), which YAML reads as bool, not text: quote it"),
    ("an integer key", "t.yaml", "default: {gsm8k: 0.5}\nmodels: {123: {gsm8k: 0.5}}\n",
     "has the key '123' (line 2), which YAML reads as int"),
    ("a null key", "t.yaml", "default: {gsm8k: 0.5}\nmodels: {~: {gsm8k: 0.5}}\n",
     "which YAML reads as NoneType"),
    ("a !!set", "t.yaml", "default: !!set {gsm8k}\n", "uses the tag tag:yaml.org,2002:set"),
    ("60,000 small values", "t.yaml", "default: {gsm8k: 0.5}\nx: [" + "[]," * 60_000 + "]\n",
     "holds more than 50,000 values"),
    ("a JSON file over 4 MiB", "t.json",
     '{"default": {"gsm8k": 0.5}, "models": {' + ",".join(
         f'"m{i}": {{"gsm8k": 0.5}}' for i in range(200_000)) + "}}",
     "bytes, over the 4,194,304"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "text", "says"), [t[1:] for t in THRESHOLDS], ids=[t[0] for t in THRESHOLDS]
)
def test_a_hostile_thresholds_file_is_exit_2_naming_it(cli, tmp_path, name, text, says):
    good_run(tmp_path / "run")
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")

    done = cli("verify", str(tmp_path / "run"), "--thresholds", str(path))

    assert done.code == 2, done.err
    assert f"ThresholdsError: {path} " in done.err
    assert says in done.err


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_thresholds_file_that_is_not_a_regular_file_is_refused_unread(tmp_path, kind):
    good_run(tmp_path / "run")
    path = tmp_path / "fifo.json"
    if kind == "fifo":
        os.mkfifo(path)  # a read would wait for a writer forever
    else:
        path = Path(os.devnull)

    done = run_subprocess("verify", str(tmp_path / "run"), "--thresholds", str(path), timeout=60)

    assert done.returncode == 2, done.stderr
    assert f"ThresholdsError: {path} is not a regular file" in done.stderr


def test_a_thresholds_error_quoting_a_huge_value_stays_short(cli, tmp_path):
    good_run(tmp_path / "run")
    path = tmp_path / "t.json"
    path.write_text('{"default": {"gsm8k": 0.5}, "models": {"x": [' + "[]," * 300_000 + "[]]}}")

    done = cli("verify", str(tmp_path / "run"), "--thresholds", str(path))

    assert done.code == 2
    assert "$.models.x: [[], [], " in done.err
    assert len(done.err) < 5_000


# -- model configs -------------------------------------------------------------------------------

CONFIGS = [
    ("a 401-digit length", '{"max_position_embeddings": ' + BIG + "}",
     "max_position_embeddings is 1000000000000000000000000000000000000..., not a positive number"),
    ("a 401-digit rope factor",
     '{"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": ' + BIG + "}}",
     "rope_scaling.factor is 1000"),
    ("a rope factor scaling past any float",
     '{"max_position_embeddings": 1e308, "rope_scaling": {"type": "linear", "factor": 1e308}}',
     "max_position_embeddings scaled by rope_scaling.factor 1e+308 is past any length"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "says"), [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS])
def test_a_model_config_with_numbers_past_a_float_is_exit_2(cli, tmp_path, text, says):
    config = tmp_path / "config.json"
    config.write_text(text)

    done = cli("context", "--model-config", str(config), "--isl", "1024", "--osl", "512")

    assert done.code == 2, done.err
    assert "ContextError: config.json: " + says in done.err
    assert "InternalError" not in done.err


# -- result trees and compare inputs -------------------------------------------------------------


def test_verify_reports_a_result_holding_an_integer_past_64_bits_malformed(cli, tmp_path):
    good = good_run(tmp_path / "tree" / "good")
    bad = good_run(tmp_path / "tree" / "bad")
    text = (bad / "result.json").read_text()
    (bad / "result.json").write_text(text.replace('"n": 1319', f'"n": {BIG}', 1))
    verdict = tmp_path / "verdict.json"

    done = cli("verify", str(tmp_path / "tree"), "--json", str(verdict))

    assert done.code == 1, done.err
    outcomes = {e["path"]: e["outcome"] for e in json.loads(verdict.read_text())["entries"]}
    assert outcomes == {
        str(good / "result.json"): "pass",
        str(bad / "result.json"): "malformed",
    }
    assert "holds an integer of 401 digits" in done.out
