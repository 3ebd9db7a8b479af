"""Hostile inputs chosen by an attacker, or met by an unlucky CI: each is a clear error with its
exit code (2 for an input), in bounded time and memory, with nothing run and nothing lost.

Thresholds files, model configs, result trees, task files and their data (more task files in
tests/tasks/test_taskfile.py). Black-box: the CLI (in-process, or in its own process where a
FIFO could block it) against files and the loopback fake engine. RELIABILITY.md lists each case
with its test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_args, run_subprocess
from tests.tasks.task_files import GOOD, cli_run_task, edited, write_task

DOCUMENTS = Path(__file__).parent / "data" / "documents"
BIG = "1" + "0" * 400
"""An integer of 401 digits: fine for Python, past any float and any count evalgate writes."""


def good_run(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "result.json").write_text((DOCUMENTS / "result.json").read_text())
    return folder


# -- thresholds files ----------------------------------------------------------------------------

THRESHOLDS = [
    ("a 5,000-digit integer", "t.json", '{"default": {"gsm8k": 1' + "0" * 5000 + "}}",
     "holds an integer of 5,001 digits, past what a float holds"),
    ("the same integer in YAML", "t.yaml", "default: {gsm8k: 1" + "0" * 5000 + "}\n",
     "holds an integer of 5,001 digits (line 1), past what a float holds"),
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


@pytest.mark.unit
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


@pytest.mark.loopback
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


@pytest.mark.unit
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
     "config.json holds an integer of 401 digits, past what a float holds: it is malformed"),
    ("a 401-digit rope factor",
     '{"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": ' + BIG + "}}",
     "config.json holds an integer of 401 digits"),
    ("a rope factor scaling past any float",
     '{"max_position_embeddings": 1e308, "rope_scaling": {"type": "linear", "factor": 1e308}}',
     "config.json: max_position_embeddings scaled by rope_scaling.factor 1e+308 is past any "
     "length"),
]  # fmt: skip


@pytest.mark.unit
@pytest.mark.parametrize(("text", "says"), [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS])
def test_a_model_config_with_numbers_past_a_float_is_exit_2(cli, tmp_path, text, says):
    config = tmp_path / "config.json"
    config.write_text(text)

    done = cli("context", "--model-config", str(config), "--isl", "1024", "--osl", "512")

    assert done.code == 2, done.err
    assert "ContextError: " in done.err and says in done.err
    assert "InternalError" not in done.err


# -- result trees and compare inputs -------------------------------------------------------------


@pytest.mark.unit
def test_verify_reports_a_result_holding_an_integer_past_64_bits_malformed(cli, tmp_path):
    """And the rest of the tree as usual (before: InternalError, nothing reported)."""
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
    assert f"$.eval.early_stop.filters[0].n: Expected `int` <= {2**63 - 1}" in done.out


# -- task files ----------------------------------------------------------------------------------

PATTERN = 'regex_pattern: "#### (\\\\-?[0-9]+)"'
TAKE_FIRST = "      - function: take_first\n"
EM = "    higher_is_better: true\n"


TASKS = [
    ("a Jinja global as a field", edited('"Answer each question."', '"{{ cycler }}"'),
     "test.jsonl line 1 has no field 'cycler', which description names"),
    ("a field no row has", edited("Question: {{question}}", "Q: {{nosuch}}"),
     "test.jsonl line 1 has no field 'nosuch', which doc_to_text names"),
    ("a bare name no row has", edited('"Question: {{question}}\\nAnswer:"', "Hello"),
     "has no field 'Hello', which doc_to_text names"),
    ("three braces", edited('"Answer each question."', '"{{{question}}}"'), "uses Jinja beyond"),
    ("a keyword as a field", edited('"Answer each question."', '"{{ not }}"'), "uses Jinja beyond"),
    ("a number as a field", edited('"Answer each question."', '"{{ 1 }}"'), "uses Jinja beyond"),
    ("a filter option lm-eval does not take",
     edited(TAKE_FIRST, TAKE_FIRST + "        bogus: 1\n"), "bogus is not a key evalgate knows"),
    ("a filter named by a list", edited("function: take_first\n", "function: [take_first]\n"),
     "filter_list[0].filter[1] must name one of lm-eval's text filters"),
    ("take_first_k without k", edited("function: take_first\n", "function: take_first_k\n"),
     "filter_list[0].filter[1] has no k, which take_first_k needs"),
    ("map without a default",
     edited(TAKE_FIRST, "      - function: map\n        mapping_dict: {a: b}\n" + TAKE_FIRST),
     "has no default_value, which map needs"),
    ("a regex that does not compile", edited(PATTERN, 'regex_pattern: "(("'),
     "regex_pattern is not a regular expression (missing )"),
    ("a nested repeat", edited(PATTERN, 'regex_pattern: "^(\\\\s*\\\\S+\\\\s*)*!$"'),
     "regex_pattern repeats a part that itself repeats or branches"),
    ("overlapping alternatives repeated", edited(EM, EM + "    regexes_to_ignore: ['(a|aa)+b']\n"),
     "regexes_to_ignore[0] repeats a part that itself repeats or branches"),
    ("a match index past the first and the last",
     edited(PATTERN, PATTERN + "\n        group_select: 1"), "group_select must be 0 or -1"),
    ("more shots than examples", edited("num_fewshot: 1", "num_fewshot: 50"),
     "num_fewshot is 50, but"),
    ("repeats 0", GOOD + "repeats: 0\n", "repeats must be 1"),
    ("repeats 2", GOOD + "repeats: 2\n", "repeats must be 1"),
    ("an infinite temperature", edited("temperature: 0", "temperature: .inf"),
     "generation_kwargs.temperature must be a finite number (it is inf)"),
    ("a NaN top_p", edited("temperature: 0", "temperature: 0\n  top_p: .nan"),
     "generation_kwargs.top_p must be a finite number (it is nan)"),
    ("a !function as a key", GOOD + "metadata: {? !function evil.x : 1}\n",
     "runs Python code (metadata.evil.x)"),
    ("a !!set in metadata", GOOD + "metadata: !!set {a, b}\n",
     "uses the tag tag:yaml.org,2002:set"),
    ("60,000 values in metadata", GOOD + "metadata: {x: [" + "[]," * 60_000 + "]}\n",
     "holds more than 50,000 values"),
    ("an integer key", GOOD + "1: x\n", "has the key '1' (line 28), which YAML reads as int"),
    ("a file over 4 MiB", GOOD + "metadata: {x: '" + "a" * 4_200_000 + "'}\n",
     "bytes, over the 4,194,304"),
    ("multi_choice_regex on rows without choices",
     edited("function: regex\n", "function: multi_choice_regex\n"),
     "test.jsonl line 1 has no field 'choices', which the multi_choice_regex filter names"),
]  # fmt: skip

DATA = [
    ("not UTF-8", b'{"question": "caf\xe9", "answer": "#### 1"}\n', "line 1 is not UTF-8 text"),
    ("a row that is a list", b"[1, 2]\n", "line 1 is a JSON list, not an object of fields"),
    ("a row nested 100,000 deep", b"[" * 100_000 + b"]" * 100_000 + b"\n",
     "line 1 nests arrays and objects more than 100 levels deep"),
    ("no rows", b"\n\n", "holds no questions"),
    ("a field twice in a row", b'{"question": "a", "answer": "#### 1", "question": "b"}\n',
     "line 1 repeats the key 'question' in one object ($)"),
    ("a FIFO", None, "test.jsonl is not a regular file (a FIFO, a device or a socket)"),
]  # fmt: skip


@pytest.mark.loopback
@pytest.mark.parametrize(("text", "says"), [t[1:] for t in TASKS], ids=[t[0] for t in TASKS])
def test_a_task_file_lm_eval_would_fail_on_is_refused_before_anything_is_sent(
    cli, engine, tmp_path, text, says
):
    done = cli_run_task(cli, engine, tmp_path, text)

    assert done.code == 2, done.err
    assert says in done.err
    assert "InternalError" not in done.err and "please report" not in done.err
    assert engine.requests == []


@pytest.mark.loopback
@pytest.mark.parametrize(("data", "says"), [d[1:] for d in DATA], ids=[d[0] for d in DATA])
def test_a_data_file_lm_eval_would_fail_on_is_refused_before_anything_is_sent(
    cli, engine, tmp_path, data, says
):
    bad = tmp_path / "bad" / "test.jsonl"
    bad.parent.mkdir()
    if data is None:
        os.mkfifo(bad)
    else:
        bad.write_bytes(data)

    done = cli_run_task(cli, engine, tmp_path, edited("test: test.jsonl", f"test: {bad}"))

    assert done.code == 2, done.err
    assert f"DatasetError: {bad}" in done.err and says in done.err
    assert engine.requests == []


@pytest.mark.loopback
@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_a_data_row_holding_nan_is_refused_before_anything_is_sent(engine, tmp_path, number):
    """Python's json reads NaN and Infinity, the datasets library does not: before, the run
    sent its probe and requests, then lm-eval failed (exit 4, DatasetGenerationError)."""
    bad = tmp_path / "bad" / "test.jsonl"
    bad.parent.mkdir()
    bad.write_text(f'{{"question": "a", "answer": "#### 1", "n": {number}}}\n' * 3)
    task, floor = (
        write_task(tmp_path, edited("test: test.jsonl", f"test: {bad}")),
        tmp_path / "f.json",
    )
    floor.write_text('{"default": {"arithmetic": 0.01}}')
    argv = run_args(engine.url, tmp_path / "out", "--task", str(task), "--min-samples", "0")

    done = run_subprocess(*argv, "--thresholds", str(floor), "--limit", "3")

    assert done.returncode == 2, done.stderr
    assert f"DatasetError: {bad} line 1 holds NaN or Infinity, which is not JSON" in done.stderr
    assert engine.requests == []


@pytest.mark.loopback
@pytest.mark.parametrize("extra", ["/etc/passwd", "nothere.jsonl", "fifo"])
def test_every_data_file_is_read_not_only_the_splits_evalgate_asks(cli, engine, tmp_path, extra):
    if extra == "fifo":
        os.mkfifo(tmp_path / "fifo")
    text = edited("train: train.jsonl", f"train: train.jsonl\n    validation: {extra}")

    done = cli_run_task(cli, engine, tmp_path, text)

    assert done.code == 2, done.err
    assert "DatasetError: " in done.err and "lm-eval failed" not in done.err
    assert engine.requests == []


@pytest.mark.loopback
def test_shots_drawn_from_the_split_asked_are_the_prompts_lm_eval_sends(cli, engine, tmp_path):
    done = cli_run_task(
        cli, engine, tmp_path, edited("fewshot_split: train", "fewshot_split: test")
    )

    assert done.code in (0, 1), done.err
    assert "prompts differ" not in done.err and "please report" not in done.err


@pytest.mark.unit
def test_verify_reports_lm_eval_results_with_a_count_past_a_float_malformed(cli, tmp_path):
    """The harness's own lm-eval output: a plain document, its integers bounded by a float."""
    from tests.verify.test_verify import lm_eval_doc, write_harness

    good = good_run(tmp_path / "tree" / "good")
    doc = lm_eval_doc()
    doc["n-samples"]["gsm8k"]["effective"] = int(BIG)
    name = "results_2026-05-01T10-00-00.000001.json"
    bad = write_harness(tmp_path / "tree" / "harness", results={name: doc}) / name
    verdict = tmp_path / "verdict.json"

    done = cli("verify", str(tmp_path / "tree"), "--json", str(verdict))

    assert done.code == 1, done.err
    outcomes = {e["path"]: e["outcome"] for e in json.loads(verdict.read_text())["entries"]}
    assert (outcomes[str(good / "result.json")], outcomes[str(bad)]) == ("pass", "malformed")
    assert "holds an integer of 401 digits, past what a float holds" in done.out


@pytest.mark.loopback
def test_a_shot_needs_the_fields_of_its_question_and_answer_only(cli, engine, tmp_path):
    """The description is rendered for the question asked, never for a shot."""
    text = edited('"Answer each question."', '"Subject: {{subject}}"')
    rows = [{"question": f"What is {i} + 1?", "answer": f"#### {i + 1}"} for i in range(6)]
    test = "".join(json.dumps(row | {"subject": "sums"}) + "\n" for row in rows)

    done = cli_run_task(cli, engine, tmp_path, text, {"test.jsonl": test})
    assert done.code in (0, 1), done.err

    shots = '{"answer": "#### 1"}\n' * 6
    done = cli_run_task(cli, engine, tmp_path, text, {"test.jsonl": test, "train.jsonl": shots})
    assert done.code == 2
    assert "train.jsonl line 1 has no field 'question', which doc_to_text names" in done.err
