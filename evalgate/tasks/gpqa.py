"""GPQA-diamond as the benchmark harness asks it: the data the user supplies (gated: it cannot
ship), shuffled and repeated (docs/run.md, 4).
"""

from __future__ import annotations

import csv
import hashlib
import io
import random
from pathlib import Path
from typing import Any

from evalgate.errors import ArtifactError, DatasetError
from evalgate.evidence.read import decode_lines, read_bytes
from evalgate.tasks.dataset import Dataset

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


def _rows_csv(path: Path, data: bytes) -> list[dict[str, Any]]:
    try:
        return list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise DatasetError(f"{path} is not a readable CSV file ({exc}). {WHERE}.") from exc


def _rows_jsonl(path: Path, data: bytes) -> list[dict[str, Any]]:
    try:
        return decode_lines(
            data, dict[str, Any], str(path), "is not a JSON object of GPQA's columns"
        )
    except ArtifactError as exc:
        raise DatasetError(f"{exc.message} {WHERE}.") from exc


def _check(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        raise DatasetError(f"{path} holds no questions. {WHERE}.")
    for number, row in enumerate(rows, start=1):
        absent = [c for c in COLUMNS if not (isinstance(row.get(c), str) and row[c].strip())]
        if absent:
            raise DatasetError(
                f"{path} row {number} lacks the column(s) {', '.join(absent)} (GPQA's columns: "
                f"{', '.join(COLUMNS)}). {WHERE}."
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
    except ArtifactError as exc:
        raise DatasetError(f"{exc.message} {WHERE}.") from exc
    rows = (_rows_csv if path.suffix == ".csv" else _rows_jsonl)(path, data)
    _check(path, rows)
    digest = hashlib.sha256(data).hexdigest()
    return Dataset(
        source="dir",
        files={"test": path},
        sha256={"test": digest},
        test=process_docs(rows),
        train=[],
    )
