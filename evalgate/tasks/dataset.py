"""The data a task asks: GSM8K, from where it comes (shipped, a folder or the hub) with proof
that it is the published data set; GPQA-diamond as the benchmark harness asks it, from the data
the user supplies (gated: it cannot ship), shuffled and repeated; and the files a user's task
file names (docs/run.md, 4).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from evalgate.errors import ArtifactError, DatasetError, UsageError
from evalgate.reader import decode, decode_lines, read_bytes
from evalgate.tasks.taskfile import FIELD

PUBLISHED_SHA256 = {
    "test": "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
    "train": "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465",
}
GSM8K_TEST_SIZE = 1319
"""Questions in the GSM8K test split: a run without --limit asks them all (the default
``min_samples`` of the gate rule)."""
HUB_PATH = "openai/gsm8k"
HUB_NAME = "main"


FULL_SIZES = {"gsm8k": GSM8K_TEST_SIZE, "gpqa_diamond_cot_n_shot": 396, "swebench_lite": 300}
"""Each gated task's full test set (GPQA-diamond: 198 questions asked twice), by task family."""


def full_size(task: str) -> int:
    """A task's full test set, the default --min-samples for its scores (evalgate's
    gsm8k_evalgate_chat is gsm8k's; an unknown task gets GSM8K's)."""
    sizes = (n for name, n in FULL_SIZES.items() if task == name or task.startswith(name + "_"))
    return next(sizes, GSM8K_TEST_SIZE)


def known_name(task: str) -> str:
    """A task as the user knows it, as --task names it: evalgate's own GSM8K task files, which
    lm-eval knows as gsm8k_evalgate_chat and gsm8k_evalgate_completions, are gsm8k."""
    return "gsm8k" if task.startswith("gsm8k_evalgate_") else task


class Dataset(msgspec.Struct, frozen=True):
    """GSM8K as evalgate will use it."""

    source: str
    """bundled, dir or hub."""
    files: dict[str, Path]
    """Local split files (also for hub: the bundled copy builds the probe's prompt)."""
    sha256: dict[str, str]
    test: list[dict[str, str]]
    train: list[dict[str, str]]

    def describe(self) -> dict[str, Any]:
        """What the result records about the data."""
        where = HUB_PATH if self.source == "hub" else str(self.files["test"].parent)
        return {"source": self.source, "location": where, "sha256": dict(self.sha256)}


def bundled_dir() -> Path:
    return Path(__file__).parent / "data" / "gsm8k"


def load_dataset(dataset_dir: Path | None = None, *, hub: bool = False) -> Dataset:
    """Locate, verify and read GSM8K. Raises DatasetError with the file and what to do."""
    if hub and dataset_dir is not None:
        raise DatasetError("Give either --dataset-dir or --dataset-hub, not both.")
    source = "hub" if hub else ("dir" if dataset_dir is not None else "bundled")
    folder = dataset_dir if dataset_dir is not None else bundled_dir()
    files = {split: folder / f"{split}.jsonl" for split in PUBLISHED_SHA256}
    sha256: dict[str, str] = {}
    rows: dict[str, list[dict[str, str]]] = {}
    for split, path in files.items():
        if not path.is_file():
            raise DatasetError(
                f"GSM8K {split} split not found at {path}. The folder given to --dataset-dir "
                "must hold test.jsonl and train.jsonl as published."
            )
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest != PUBLISHED_SHA256[split]:
            raise DatasetError(
                f"{path} has sha256 {digest}, not the published GSM8K {split} split's "
                f"{PUBLISHED_SHA256[split]}. Scores on altered data cannot be gated: restore "
                "the file."
            )
        sha256[split] = digest
        # The published rows, read from the bytes just hashed: each holds the two texts.
        published = (json.loads(line) for line in data.splitlines() if line.strip())
        rows[split] = [{"question": r["question"], "answer": r["answer"]} for r in published]
    return Dataset(
        source=source, files=files, sha256=sha256, test=rows["test"], train=rows["train"]
    )


_TARGET = re.compile(r"####\s*(.+)\s*$")


def reference_answer(answer: str) -> str:
    """The number after '####' in a GSM8K answer."""
    match = _TARGET.search(answer.strip().splitlines()[-1] if answer.strip() else "")
    return match.group(1).strip() if match else answer.strip()


TEMPLATES = ("description", "doc_to_text", "doc_to_target")


def load_file_data(config: Mapping[str, Any], source: Path, num_fewshot: int) -> Dataset:
    """The data a user's task file (`source`, read into `config`) names, every file read and
    checked before anything is sent: lm-eval reads it only after the probe, where a bad file
    would end the eval after its requests went out (RELIABILITY.md, "Task and thresholds files
    that try to do harm")."""
    files = {split: Path(f) for split, f in config["dataset_kwargs"]["data_files"].items()}
    test_split = str(config["test_split"])
    shot_split = str(config.get("fewshot_split") or config.get("training_split") or "")
    if test_split not in files:
        raise UsageError(f"{source}: its data_files have no {test_split!r} (its test_split).")
    if num_fewshot and shot_split not in files:
        raise UsageError(
            f"{source}: {num_fewshot}-shot needs the shots' split: name it in "
            "fewshot_split (or training_split) and in data_files."
        )
    fields = needed_fields(config)  # a shot is rendered by doc_to_text and doc_to_target only
    shot = {name: key for name, key in fields.items() if key in ("doc_to_text", "doc_to_target")}
    needs = {shot_split: shot} if num_fewshot else {}
    rows, sha256 = {}, {}
    for split, path in files.items():
        try:
            data = read_bytes(path)
        except ArtifactError as exc:
            raise DatasetError(
                f"{exc.message} The task file's data_files must name local JSONL files."
            ) from exc
        sha256[split] = hashlib.sha256(data).hexdigest()
        rows[split] = _rows(path, data, fields if split == test_split else needs.get(split, {}))
    if not rows[test_split]:
        raise DatasetError(f"{files[test_split]} holds no questions (its lines are empty).")
    train = rows[shot_split] if num_fewshot else []
    shots = len(train) - (config.get("fewshot_split") == test_split)  # the doc is no shot
    if num_fewshot > shots:
        raise UsageError(
            f"{source}: num_fewshot is {num_fewshot}, but {files[shot_split]} holds "
            f"{shots} shot(s) to draw from. Lower num_fewshot or give more examples."
        )
    return Dataset(source="dir", files=files, sha256=sha256, test=rows[test_split], train=train)


def needed_fields(config: Mapping[str, Any]) -> dict[str, str]:
    """{field: what needs it} for every field a template (or a filter) reads from a row."""
    fields = {name: key for key in TEMPLATES for name in FIELD.findall(str(config.get(key) or ""))}
    steps = [step for entry in config.get("filter_list", []) for step in entry["filter"]]
    if any(step["function"] == "multi_choice_regex" for step in steps):
        fields["choices"] = "the multi_choice_regex filter"
    return fields


def _rows(path: Path, data: bytes, fields: dict[str, str]) -> list[dict[str, Any]]:
    """One JSON object per line (blank lines skipped), each holding `fields`."""
    rows = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:  # a repeated field is refused (the datasets library would)
            row = decode(line, Any, where)
        except ArtifactError as exc:
            raise DatasetError(exc.message) from exc
        if not isinstance(row, dict):
            raise DatasetError(f"{where} is a JSON {type(row).__name__}, not an object of fields.")
        try:  # Python's json reads them; the datasets library fails on them mid-run
            json.dumps(row, allow_nan=False)
        except ValueError:
            raise DatasetError(
                f"{where} holds NaN or Infinity, which is not JSON: write a number or a text."
            ) from None
        missing = next((name for name in fields if name not in row), None)
        if missing is not None:
            raise DatasetError(
                f"{where} has no field {missing!r}, which {fields[missing]} names. Give every "
                "row that field, or change the task file."
            )
        choices = row.get("choices") if "choices" in fields else []
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise DatasetError(f"{where}: its choices must be a list of text.")
        rows.append(row)
    return rows


# GPQA-diamond.

TASK = "gpqa_diamond_cot_n_shot"
FILES = ("gpqa_diamond.csv", "gpqa_diamond.jsonl")
COLUMNS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
           "Incorrect Answer 3")  # fmt: skip
SHUFFLE_SEED = 3407
REPEATS = 2
LETTERS = "ABCD"
WHERE = (
    "Download gpqa_diamond.csv from the gated Hugging Face dataset Idavidrein/gpqa (accept its "
    "terms first; the file is in the repository's gpqa_diamond folder) and put it in that folder"
)


def process_docs(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The docs lm-eval asks, as the harness's process_docs makes them: every question twice,
    one seeded draw shuffling the choices of each asking in turn."""
    rnd = random.Random(SHUFFLE_SEED)  # noqa: S311 - the harness's seeded shuffle, not security
    docs = []
    for row in rows:
        correct = row["Correct Answer"].strip()
        for repeat in range(REPEATS):
            choices = [correct] + [row[f"Incorrect Answer {i}"].strip() for i in (1, 2, 3)]
            rnd.shuffle(choices)
            letters = dict(zip(LETTERS, choices, strict=True))
            docs.append(
                {
                    "Question": row["Question"].strip(),
                    **letters,
                    "answer": LETTERS[choices.index(correct)],
                    "repeat_id": str(repeat),
                    "question": row["Question"].strip(),
                }
            )
    return docs


def load_gpqa(dataset_dir: Path | None) -> Dataset:
    """Find, read and check the user's GPQA-diamond. Raises DatasetError naming the file."""
    if dataset_dir is None:
        raise DatasetError(
            f"{TASK} needs its data, which evalgate cannot ship (the data set is gated): "
            f"give --dataset-dir DIR with {FILES[0]} in it. {WHERE}."
        )
    found = [dataset_dir / name for name in FILES if (dataset_dir / name).is_file()]
    if not found:
        raise DatasetError(
            f"{FILES[0]} not found in {dataset_dir} (nor {FILES[1]}). {WHERE}, or give another "
            "--dataset-dir."
        )
    path = found[0]
    try:
        data = read_bytes(path)
        if path.suffix == ".csv":
            rows = list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))
        else:
            refusal = "is not a JSON object of GPQA's columns"
            rows = decode_lines(data, dict[str, Any], str(path), refusal)
    except ArtifactError as exc:
        raise DatasetError(f"{exc.message} {WHERE}.") from exc
    except (UnicodeDecodeError, csv.Error) as exc:
        raise DatasetError(f"{path} is not a readable CSV file ({exc}). {WHERE}.") from exc
    if not rows:
        raise DatasetError(f"{path} holds no questions. {WHERE}.")
    for number, row in enumerate(rows, start=1):
        absent = [c for c in COLUMNS if not (isinstance(row.get(c), str) and row[c].strip())]
        if absent:
            raise DatasetError(
                f"{path} row {number} lacks the column(s) {', '.join(absent)} (GPQA's columns: "
                f"{', '.join(COLUMNS)}). {WHERE}."
            )
    return Dataset(
        source="dir",
        files={"test": path},
        sha256={"test": hashlib.sha256(data).hexdigest()},
        test=process_docs(rows),
        train=[],
    )
