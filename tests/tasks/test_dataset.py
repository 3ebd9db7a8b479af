"""evalgate.tasks.dataset: the published GSM8K, proven by sha256, and what a bad copy says."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalgate.errors import DatasetError, UsageError
from evalgate.tasks.dataset import (
    PUBLISHED_SHA256,
    bundled_dir,
    load_dataset,
    load_gpqa,
    process_docs,
)
from evalgate.tasks.spec import build_prompts, load_task
from tests.conftest import (
    FAULT_RUN,
    QUICK,
    json_values,
    load_result,
    load_samples,
    run_args,
    run_subprocess,
)
from tests.fakeengine import EngineBehaviour, FakeEngine, choice_docs, gpqa_rows
from tests.tasks.task_files import GPQA_TASK, cli_run_task, edited, write_csv, write_task


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


@pytest.mark.unit
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


@pytest.mark.unit
def test_bundled_rows_are_question_and_answer(bundled):
    first = bundled.test[0]

    assert set(first) == {"question", "answer"}
    assert first["question"].startswith("Janet\u2019s ducks lay 16 eggs per day.")
    assert first["answer"].endswith("#### 18")


@pytest.mark.unit
def test_bundled_sha256sums_file_agrees():
    sums = (bundled_dir() / "SHA256SUMS").read_text(encoding="utf-8")

    for split, digest in PUBLISHED_SHA256.items():
        assert f"{digest}  {split}.jsonl" in sums.splitlines()


@pytest.mark.unit
def test_dataset_dir_with_the_published_files(copy_dir):
    found = load_dataset(copy_dir)

    assert found.source == "dir"
    assert found.files == {"test": copy_dir / "test.jsonl", "train": copy_dir / "train.jsonl"}
    assert found.sha256 == PUBLISHED_SHA256
    assert found.describe()["location"] == str(copy_dir)
    assert len(found.test) == 1319


@pytest.mark.unit
def test_hub_records_the_hub_and_keeps_local_files_for_prompts():
    found = load_dataset(hub=True)

    assert found.source == "hub"
    assert found.describe()["location"] == "openai/gsm8k"
    assert found.files["test"] == bundled_dir() / "test.jsonl"


@pytest.mark.unit
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


@pytest.mark.unit
def test_missing_folder(tmp_path):
    with pytest.raises(DatasetError, match="test split not found at"):
        load_dataset(tmp_path / "nowhere")


@pytest.mark.unit
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


@pytest.mark.unit
def test_dir_and_hub_together_is_refused(copy_dir):
    with pytest.raises(DatasetError) as caught:
        load_dataset(copy_dir, hub=True)

    assert caught.value.message == "Give either --dataset-dir or --dataset-hub, not both."


# GPQA-diamond as the harness runs it, on a GPQA-shaped set the tests make (made-up questions).


QUESTIONS = 50


@pytest.mark.unit
def test_every_question_is_asked_twice_with_its_choices_shuffled_by_a_fixed_seed():
    rows = gpqa_rows(20)
    docs = process_docs(rows)
    assert len(docs) == 40
    assert [d["repeat_id"] for d in docs[:4]] == ["0", "1", "0", "1"]
    for number, doc in enumerate(docs):
        row = rows[number // 2]
        assert doc["Question"] == row["Question"]
        assert doc[doc["answer"]] == row["Correct Answer"]
        assert sorted(doc[k] for k in "ABCD") == sorted(
            row[c]
            for c in (
                "Correct Answer",
                "Incorrect Answer 1",
                "Incorrect Answer 2",
                "Incorrect Answer 3",
            )
        )
    assert process_docs(rows) == docs  # the same seed, the same order
    assert len({d["answer"] for d in docs}) == 4  # the correct answer is not always (A)


@pytest.mark.unit
def test_the_prompt_is_the_harness_s(tmp_path):
    write_csv(tmp_path, gpqa_rows(3))
    dataset = load_gpqa(tmp_path)
    doc = dataset.test[0]
    prompt = build_prompts(load_task("chat", GPQA_TASK), dataset.test, dataset.train)[0]
    assert prompt.messages == (
        {
            "role": "user",
            "content": f"{doc['Question']}\n\n(A) {doc['A']}\n(B) {doc['B']}\n(C) {doc['C']}\n"
            f"(D) {doc['D']}\n\nExpress your final answer as the corresponding option 'A', 'B', "
            "'C', or 'D'.",
        },
    )


@pytest.mark.unit
def test_jsonl_of_the_same_rows_gives_the_same_docs(tmp_path):
    rows = gpqa_rows(5)
    write_csv(tmp_path / "csv", rows)
    (tmp_path / "jsonl").mkdir()
    (tmp_path / "jsonl" / "gpqa_diamond.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    assert load_gpqa(tmp_path / "jsonl").test == load_gpqa(tmp_path / "csv").test


@pytest.mark.unit
@pytest.mark.parametrize(
    ("line", "says"),
    [
        (b'{"Question": "q",', "line 3 is not valid JSON (line 1 column 18: "),
        (b"[1, 2]", "line 3 is not a JSON object of GPQA's columns: $: Expected `object`"),
        (b"\xff\xfe{}", "line 3 is not UTF-8 text (invalid start byte at byte 0)."),
    ],
)
def test_a_bad_jsonl_line_is_named_with_where_the_data_comes_from(tmp_path, line, says):
    path = tmp_path / "gpqa_diamond.jsonl"
    path.write_bytes(json.dumps(gpqa_rows(1)[0]).encode() + b"\n\n" + line + b"\n")

    with pytest.raises(DatasetError) as caught:
        load_gpqa(tmp_path)

    assert caught.value.message.startswith(f"{path} {says}")
    assert caught.value.message.endswith("put it in that folder.")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("Question,Correct Answer\nq,a\n", "row 1 lacks the column(s) Incorrect Answer 1, "),
        ("", "holds no questions"),
    ],
)
def test_malformed_data_names_the_file_and_what_to_do(tmp_path, content, expected):
    (tmp_path / "gpqa_diamond.csv").write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        load_gpqa(tmp_path)
    assert str(tmp_path / "gpqa_diamond.csv") in caught.value.message
    assert expected in caught.value.message
    assert "Download gpqa_diamond.csv from the gated Hugging Face dataset Idavidrein/gpqa" in (
        caught.value.message
    )


@pytest.mark.loopback
@pytest.mark.parametrize(("accuracy", "code"), [(0.6, 0), (0.1, 1)])
def test_gpqa_is_gated_on_its_one_filter_against_the_030_floor(cli, tmp_path, accuracy, code):
    rows = gpqa_rows(QUESTIONS)
    data = write_csv(tmp_path / "data", rows)
    behaviour = EngineBehaviour(accuracy=accuracy, choice_docs=choice_docs(rows))
    with FakeEngine(behaviour) as engine:
        result = cli(
            *run_args(engine.url, tmp_path / "out", task=GPQA_TASK, dataset_dir=data.parent)
        )
    assert result.code == code, result.text
    outcome = "PASS" if code == 0 else "FAIL"
    assert result.out.startswith(f"{outcome}: extract_abcd {accuracy:.4f} (95% CI ")
    assert "threshold 0.3000 (default)" in result.out
    doc = load_result(tmp_path / "out")
    assert doc["eval"]["task"] == GPQA_TASK
    assert doc["threshold"]["value"] == 0.3
    assert [(s["filter"], s["value"], s["n"]) for s in doc["scores"]] == [
        ("extract_abcd", pytest.approx(accuracy), 2 * QUESTIONS)
    ]
    assert doc["eval"]["dataset"]["sha256"] == {
        "test": hashlib.sha256(data.read_bytes()).hexdigest()
    }
    samples = load_samples(tmp_path / "out")
    assert len(samples) == 2 * QUESTIONS
    assert {s["target"] for s in samples} <= set("ABCD")
    assert all(s["response"].endswith(").") for s in samples)
    # Both repeats of a question are asked, with the same question text.
    assert samples[0]["question"] == samples[1]["question"] == rows[0]["Question"]


@pytest.mark.loopback
def test_without_the_data_exit_2_names_the_file_and_where_to_get_it(engine, cli, tmp_path):
    result = cli(
        *run_args(engine.url, tmp_path / "out", task=GPQA_TASK, dataset_dir=tmp_path / "empty")
    )
    assert result.code == 2
    assert f"gpqa_diamond.csv not found in {tmp_path / 'empty'}" in result.err
    assert "Idavidrein/gpqa" in result.err
    assert load_result(tmp_path / "out")["status"] == "error"
    assert engine.requests == []  # nothing was sent


@pytest.mark.loopback
def test_without_a_dataset_dir_exit_2_says_the_data_cannot_ship(engine, cli, tmp_path):
    args = run_args(engine.url, tmp_path / "out", task=GPQA_TASK, dataset_dir=tmp_path)
    index = args.index("--dataset-dir")
    del args[index : index + 2]
    result = cli(*args)
    assert result.code == 2
    assert "give --dataset-dir DIR with gpqa_diamond.csv in it" in result.err


@pytest.mark.loopback
def test_an_unknown_task_is_a_usage_error(engine, cli, tmp_path):
    result = cli(*run_args(engine.url, tmp_path / "out", task="mmlu", dataset_dir=tmp_path))
    assert result.code == 2
    assert "--task 'mmlu' is neither a task evalgate knows" in result.err


@pytest.mark.unit
def test_a_loglikelihood_task_is_refused_with_a_clear_message(tmp_path):
    path = tmp_path / "arc.yaml"
    path.write_text(
        "task: arc_easy\noutput_type: multiple_choice\nprocess_docs: !function utils.process\n",
        encoding="utf-8",
    )
    with pytest.raises(UsageError) as caught:
        load_task("chat", str(path))
    assert caught.value.message.startswith(
        f"{path} is a multiple_choice task (task 'arc_easy'): it scores the log-likelihood of "
        "each choice, which the engines' chat and completions APIs cannot report"
    )


@pytest.mark.loopback
def test_the_cli_refuses_a_loglikelihood_task_with_exit_2(engine, cli, tmp_path):
    path = tmp_path / "hellaswag.yaml"
    path.write_text("task: hellaswag\noutput_type: multiple_choice\n", encoding="utf-8")
    result = cli(*run_args(engine.url, tmp_path / "out", task=path, dataset_dir=tmp_path))
    assert result.code == 2
    assert "is a multiple_choice task (task 'hellaswag')" in result.err
    assert "Traceback" not in result.text
    assert engine.requests == []


HARNESS_GSM8K = Path(__file__).parent / "data" / "harness_gsm8k.yaml"


"""The benchmark harness's utils/evals/gsm8k.yaml as it is, but for its data: the hub's
`dataset_path: openai/gsm8k` / `dataset_name: main` pointed at local JSONL files (TRAIN, TEST)."""


@pytest.mark.loopback
def test_a_harness_shaped_gsm8k_task_file_scores_like_the_built_in_task(cli, tmp_path):
    from evalgate.tasks.dataset import bundled_dir

    path = tmp_path / "gsm8k.yaml"
    data = bundled_dir()
    text = HARNESS_GSM8K.read_text(encoding="utf-8")
    for split in ("train", "test"):
        text = text.replace(split.upper(), str(data / f"{split}.jsonl"))
    path.write_text(text, encoding="utf-8")
    scores = {}
    with FakeEngine(EngineBehaviour(accuracy=0.85)) as engine:
        for task in ("gsm8k", str(path)):
            out = tmp_path / ("file" if task == str(path) else "built-in")
            result = cli(*run_args(engine.url, out, task=task, limit=40, min_samples=0))
            assert result.code == 1, result.text  # 0.85 is below gsm8k's 0.90
            doc = load_result(out)
            assert doc["threshold"]["value"] == 0.9
            scores[task] = {(s["filter"], s["value"], s["n"]) for s in doc["scores"]}
    assert scores[str(path)] == scores["gsm8k"]
    assert {f for f, _, _ in scores["gsm8k"]} == {"strict-match", "flexible-extract"}


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "task: t\ndataset_path: json\nprocess_docs: !function utils.process_docs\n",
            "runs Python code (process_docs), which evalgate does not import",
        ),
        (
            "task: t\ndataset_path: Idavidrein/gpqa\n",
            "its data must be local JSONL files (dataset_path: json and",
        ),
    ],
)
def test_a_generation_task_file_evalgate_cannot_run_is_refused(tmp_path, text, expected):
    path = tmp_path / "task.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        load_task("chat", str(path))
    assert expected in caught.value.message


# Hostile data files: each is a clear error with its exit code (2 for an input), before anything
# is sent, with nothing run and nothing lost.


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


# A dataset missing, changed or broken: a usage error before the engine is asked.


def _dataset_copy(folder: Path) -> Path:
    folder.mkdir()
    for split in ("test", "train"):
        shutil.copyfile(bundled_dir() / f"{split}.jsonl", folder / f"{split}.jsonl")
    return folder


def _missing_train(folder: Path) -> Path:
    _dataset_copy(folder)
    (folder / "train.jsonl").unlink()
    return folder


def _changed_byte(folder: Path) -> Path:
    _dataset_copy(folder)
    path = folder / "test.jsonl"
    data = bytearray(path.read_bytes())
    data[100] ^= 1
    path.write_bytes(bytes(data))
    return folder


def _bad_line(folder: Path) -> Path:
    _dataset_copy(folder)
    with (folder / "test.jsonl").open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    return folder


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda folder: folder, "GSM8K test split not found at"),
        (_missing_train, "GSM8K train split not found at"),
        (_changed_byte, "not the published GSM8K test split's"),
        (_bad_line, "not the published GSM8K test split's"),
    ],
    ids=["no folder", "no train split", "one changed byte", "a bad line"],
)
@pytest.mark.loopback
def test_a_bad_dataset_is_a_usage_error(engine, tmp_path, cli, make, says):
    folder = make(tmp_path / "gsm8k")
    out = tmp_path / "run"

    code, _, err = cli(*run_args(engine.url, out, dataset_dir=folder, **FAULT_RUN), within=30)

    assert code == 2
    assert "DatasetError: " in err and says in err
    assert load_result(out)["stage"] == "dataset"
    assert engine.log == []


# Any dataset split is rows or a dataset error.


@QUICK
@given(st.lists(st.one_of(st.text(max_size=30), json_values.map(json.dumps)), max_size=6))
@pytest.mark.unit
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
