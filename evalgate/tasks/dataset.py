"""GSM8K: where it comes from (shipped, a folder or the hub), and proof that it is the published
data set (README.md, "What `evalgate run` does", 4).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from evalgate.errors import DatasetError

SPLITS = ("test", "train")
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


def json_lines(path: Path, fix: str) -> Iterator[tuple[int, Any]]:
    """Each non-blank line of a JSONL file, decoded, with its number; a line that is not JSON
    is a DatasetError naming it, then `fix`."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path} line {number} is not JSON ({exc.msg}). {fix}") from exc
            yield number, row


def _read_split(path: Path) -> list[dict[str, str]]:
    fix = "Restore the file from the published GSM8K."
    rows: list[dict[str, str]] = []
    for number, row in json_lines(path, fix):
        if not (
            isinstance(row, dict)
            and isinstance(row.get("question"), str)
            and isinstance(row.get("answer"), str)
        ):
            raise DatasetError(
                f"{path} line {number} lacks the string fields question and answer. {fix}"
            )
        rows.append({"question": row["question"], "answer": row["answer"]})
    return rows


def load_dataset(dataset_dir: Path | None = None, *, hub: bool = False) -> Dataset:
    """Locate, verify and read GSM8K. Raises DatasetError with the file and what to do."""
    import hashlib  # here: only a run checks its data, and verify starts without OpenSSL

    if hub and dataset_dir is not None:
        raise DatasetError("Give either --dataset-dir or --dataset-hub, not both.")
    source = "hub" if hub else ("dir" if dataset_dir is not None else "bundled")
    folder = dataset_dir if dataset_dir is not None else bundled_dir()
    files = {split: folder / f"{split}.jsonl" for split in SPLITS}
    sha256: dict[str, str] = {}
    for split, path in files.items():
        if not path.is_file():
            raise DatasetError(
                f"GSM8K {split} split not found at {path}. The folder given to --dataset-dir "
                "must hold test.jsonl and train.jsonl as published."
            )
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != PUBLISHED_SHA256[split]:
            raise DatasetError(
                f"{path} has sha256 {digest}, not the published GSM8K {split} split's "
                f"{PUBLISHED_SHA256[split]}. Scores on altered data cannot be gated: restore "
                "the file."
            )
        sha256[split] = digest
    return Dataset(
        source=source,
        files=files,
        sha256=sha256,
        test=_read_split(files["test"]),
        train=_read_split(files["train"]),
    )


_TARGET = re.compile(r"####\s*(.+)\s*$")


def reference_answer(answer: str) -> str:
    """The number after '####' in a GSM8K answer."""
    match = _TARGET.search(answer.strip().splitlines()[-1] if answer.strip() else "")
    return match.group(1).strip() if match else answer.strip()
