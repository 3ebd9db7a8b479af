"""Task files (`--task FILE`) as the tests write them: a plain one, its rows, and a run of it;
and GPQA-diamond's data as the bundled task reads it from --dataset-dir."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.conftest import run_args, run_subprocess
from tests.fakeengine import FakeEngine

PAYLOAD = "{{ cycler.__init__.__globals__.os.popen('id > PWNED').read() }}"


ROWS = [{"question": f"What is {i} + 1?", "answer": f"#### {i + 1}"} for i in range(6)]


GOOD = """\
task: arithmetic
dataset_path: json
dataset_kwargs:
  data_files:
    test: test.jsonl
    train: train.jsonl
output_type: generate_until
test_split: test
fewshot_split: train
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_target: "{{answer}}"
description: "Answer each question."
num_fewshot: 1
generation_kwargs:
  until: ["</s>"]
  do_sample: false
  temperature: 0
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "#### (\\\\-?[0-9]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""


def write_task(folder: Path, text: str) -> Path:
    """`text` as task.yaml in `folder`, beside its test and train rows: its path."""
    for split in ("test", "train"):
        lines = "".join(json.dumps(row) + "\n" for row in ROWS)
        (folder / f"{split}.jsonl").write_text(lines, encoding="utf-8")
    path = folder / "task.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def run_task(engine: FakeEngine, tmp_path: Path, task: Path, *extra: str) -> tuple[int, str]:
    """`evalgate run --task` in its own process: its exit code and output."""
    args = run_args(engine.url, tmp_path / "out", "--task", str(task), "--min-samples", "0")
    args += ["--thresholds", floor_file(tmp_path)]
    done = run_subprocess(*args, *extra, timeout=300, cwd=tmp_path)
    return done.returncode, done.stdout + done.stderr


def floor_file(folder: Path) -> str:
    path = folder / "floor.json"
    path.write_text('{"default": {"arithmetic": 0.01}}', encoding="utf-8")
    return str(path)


def edited(old: str, new: str) -> str:
    """GOOD with `old` (which it holds) replaced by `new`."""
    assert old in GOOD, old
    return GOOD.replace(old, new)


def cli_run_task(cli, engine, folder: Path, text: str, data: dict[str, str] | None = None):
    """`evalgate run --task` of `text` (beside GOOD's data, or `data` by file name) on 3
    questions, floor 0.01."""
    task, floor = write_task(folder, text), folder / "floor.json"
    for name, rows in (data or {}).items():
        (folder / name).write_text(rows)
    floor.write_text('{"default": {"arithmetic": 0.01}}')
    args = run_args(engine.url, folder / "out", "--task", str(task), "--min-samples", "0")
    return cli(*args, "--thresholds", str(floor), "--limit", "3", "--overwrite")


GPQA_TASK = "gpqa_diamond_cot_n_shot"
"""The bundled GPQA-diamond task's name."""


def write_csv(folder: Path, rows: list[dict[str, str]]) -> Path:
    """`rows` as `folder`/gpqa_diamond.csv, the file GPQA-diamond's --dataset-dir holds."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gpqa_diamond.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path
