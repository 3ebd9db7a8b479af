"""evalgate.tasks.dataset: the published GSM8K, proven by sha256, and what a bad copy says."""

from __future__ import annotations

import hashlib
import shutil

import pytest

from evalgate.errors import DatasetError
from evalgate.tasks.dataset import PUBLISHED_SHA256, bundled_dir, load_dataset

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def bundled():
    return load_dataset()


@pytest.fixture
def copy_dir(tmp_path):
    """A --dataset-dir holding an exact copy of the published files."""
    folder = tmp_path / "gsm8k"
    folder.mkdir()
    for split in ("test", "train"):
        shutil.copyfile(bundled_dir() / f"{split}.jsonl", folder / f"{split}.jsonl")
    return folder


def test_bundled_copy_is_the_published_data_set(bundled):
    assert bundled.source == "bundled"
    assert len(bundled.test) == 1319
    assert len(bundled.train) == 7473
    assert bundled.sha256 == {
        "test": "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
        "train": "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465",
    }
    assert bundled.describe() == {
        "source": "bundled",
        "location": str(bundled_dir()),
        "sha256": bundled.sha256,
    }


def test_bundled_rows_are_question_and_answer(bundled):
    first = bundled.test[0]

    assert set(first) == {"question", "answer"}
    assert first["question"].startswith("Janet\u2019s ducks lay 16 eggs per day.")
    assert first["answer"].endswith("#### 18")


def test_bundled_sha256sums_file_agrees():
    sums = (bundled_dir() / "SHA256SUMS").read_text(encoding="utf-8")

    for split, digest in PUBLISHED_SHA256.items():
        assert f"{digest}  {split}.jsonl" in sums.splitlines()


def test_dataset_dir_with_the_published_files(copy_dir):
    found = load_dataset(copy_dir)

    assert found.source == "dir"
    assert found.files == {"test": copy_dir / "test.jsonl", "train": copy_dir / "train.jsonl"}
    assert found.sha256 == PUBLISHED_SHA256
    assert found.describe()["location"] == str(copy_dir)
    assert len(found.test) == 1319


def test_hub_records_the_hub_and_keeps_local_files_for_prompts():
    found = load_dataset(hub=True)

    assert found.source == "hub"
    assert found.describe()["location"] == "openai/gsm8k"
    assert found.files["test"] == bundled_dir() / "test.jsonl"


@pytest.mark.parametrize("split", ["test", "train"])
def test_missing_split(copy_dir, split):
    (copy_dir / f"{split}.jsonl").unlink()

    with pytest.raises(DatasetError) as caught:
        load_dataset(copy_dir)

    assert caught.value.message == (
        f"GSM8K {split} split not found at {copy_dir / f'{split}.jsonl'}. The folder given to "
        "--dataset-dir must hold test.jsonl and train.jsonl as published."
    )
    assert caught.value.exit_code == 2


def test_missing_folder(tmp_path):
    with pytest.raises(DatasetError, match="test split not found at"):
        load_dataset(tmp_path / "nowhere")


@pytest.mark.parametrize("split", ["test", "train"])
def test_one_changed_byte_is_refused(copy_dir, split):
    path = copy_dir / f"{split}.jsonl"
    data = bytearray(path.read_bytes())
    position = data.index(b"#### ")  # an answer's final number
    data[position + 5] = ord("9") if data[position + 5] != ord("9") else ord("8")
    path.write_bytes(bytes(data))
    digest = hashlib.sha256(bytes(data)).hexdigest()

    with pytest.raises(DatasetError) as caught:
        load_dataset(copy_dir)

    assert caught.value.message == (
        f"{path} has sha256 {digest}, not the published GSM8K {split} split's "
        f"{PUBLISHED_SHA256[split]}. Scores on altered data cannot be gated: restore the file."
    )


def test_dir_and_hub_together_is_refused(copy_dir):
    with pytest.raises(DatasetError) as caught:
        load_dataset(copy_dir, hub=True)

    assert caught.value.message == "Give either --dataset-dir or --dataset-hub, not both."
