"""The example task (examples/addition) is what it says: its data are make_data.py's, its task
file stays within what `--task FILE` runs, its floor resolves, and a run of it goes through."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from evalgate.tasks.spec import build_prompts, load_file_data, load_task
from evalgate.thresholds import load_thresholds, resolve_floor
from tests.conftest import ROOT, load_result, load_samples, run_args

EXAMPLE = ROOT / "examples" / "addition"


TASK = EXAMPLE / "addition_chat.yaml"


# What a task file may hold (lm-eval's keys evalgate runs; its own GSM8K file has the same shape).
KNOWN_KEYS = {
    "task", "dataset_path", "dataset_kwargs", "test_split", "training_split", "fewshot_split",
    "output_type", "doc_to_text", "doc_to_target", "description", "target_delimiter",
    "fewshot_delimiter", "num_fewshot", "fewshot_config", "generation_kwargs", "filter_list",
    "metric_list", "repeats", "metadata",
}  # fmt: skip


def make_data() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_data", EXAMPLE / "make_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(name: str) -> list[dict[str, str]]:
    lines = (EXAMPLE / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.unit
def test_the_data_are_what_make_data_writes_and_every_answer_is_the_sum():
    module = make_data()
    drawn = module.pairs(module.SHOTS + module.QUESTIONS)
    shipped = rows("train.jsonl") + rows("test.jsonl")
    assert [json.loads(module.row(*pair)) for pair in drawn] == shipped
    assert len(rows("test.jsonl")) == 400 and len(rows("train.jsonl")) == 1
    assert len(set(drawn)) == len(drawn)
    for row in shipped:
        a, b = map(int, re.fullmatch(r"What is (\d\d) \+ (\d\d)\?", row["question"]).groups())  # type: ignore[union-attr]
        assert row["answer"] == f"{a} + {b} = {a + b}\n#### {a + b}"


@pytest.mark.unit
def test_the_task_file_is_one_evalgate_runs_with_the_same_start_for_every_prompt():
    raw = yaml.safe_load(TASK.read_text())
    assert set(raw) <= KNOWN_KEYS
    spec = load_task("chat", str(TASK))
    assert spec.name == "addition_chat" and spec.path == TASK.resolve()
    data = load_file_data(spec.config, spec.path, spec.num_fewshot)
    assert len(data.test) == 400
    prompts = build_prompts(spec, data.test, data.train)
    # the one shot: every prompt starts with the same turns, which the engine's prefix cache serves
    shot = [
        {"role": "user", "content": data.train[0]["question"]},
        {"role": "assistant", "content": data.train[0]["answer"]},
    ]
    assert all(p.messages is not None and list(p.messages[:2]) == shot for p in prompts)
    questions = [p.messages[-1]["content"] for p in prompts if p.messages is not None]
    assert questions == [row["question"] for row in data.test]


@pytest.mark.unit
def test_the_floor_is_the_examples_own():
    floor = resolve_floor(
        load_thresholds(EXAMPLE / "thresholds.json"), "smollm2-135m", task="addition_chat"
    )
    assert (floor.value, floor.matched) == (0.25, "default")


@pytest.mark.loopback
def test_a_run_of_the_example_task_goes_through(engine, cli, tmp_path: Path):
    """The fake engine does not know the sums (it answers `#### 0`): a real FAIL on every
    answer, from a run that read the example's own files."""
    out = tmp_path / "run"
    args = run_args(engine.url, out, "--task", str(TASK), "--limit", "20")
    result = cli(*args, "--thresholds", str(EXAMPLE / "thresholds.json"))
    assert result.code == 1, result.err
    document = load_result(out)
    assert document["eval"]["task"] == "addition_chat"
    assert document["eval"]["questions"] == 20
    digests = document["eval"]["dataset"]["sha256"]
    for split in ("train", "test"):
        assert (
            digests[split] == hashlib.sha256((EXAMPLE / f"{split}.jsonl").read_bytes()).hexdigest()
        )
    assert document["threshold"]["value"] == 0.25
    assert [s["question"] for s in load_samples(out)] == [
        r["question"] for r in rows("test.jsonl")[:20]
    ]
    assert all(s["filters"]["strict-match"]["extracted"] == "0" for s in load_samples(out))
