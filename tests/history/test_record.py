"""Recording a sweep (history/record.py): `verify --record` through the CLI in its own process,
on both stores (tests/history/conftest.py), on sweeps of full GSM8K runs written by
tests/verify/sweeps.py."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import msgspec
import pytest
from msgspec import structs

from evalgate.evidence.artifacts import read_samples, write_samples
from evalgate.history import record
from evalgate.history.store import open_history
from tests.history.conftest import document, history_cli, last_line, rows, thresholds, verify
from tests.verify.sweeps import answers, baseline_answers, evalgate_sweep, harness_sweep


def by_conc(doc: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {c["labels"]["concurrency"]: c for c in doc["configs"]}


def test_a_sweep_is_recorded_whole_with_every_field_and_again_adds_nothing(tmp_path, history):
    sweep = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers(), 8: answers(seed=1)})
    harness_sweep(sweep / "harness", {16: baseline_answers()})
    env = {"GITHUB_SHA": "abc123", "IMAGE": "vllm/vllm-openai:v0.32"}
    done = verify(tmp_path, str(sweep), "--record", history, "--sweep-id", "nightly-1", env=env)
    assert done.returncode == 0, done.stderr
    assert last_line(done.stderr).startswith("history: 3 run(s) recorded in ")
    assert last_line(done.stderr).endswith(" as sweep nightly-1")

    doc = document(history)
    assert doc["schema"] == "evalgate.history/1"
    configs = by_conc(doc)
    assert sorted(configs) == [4, 8, 16]
    four = configs[4]
    assert four["labels"]["task"] == "gsm8k"
    assert four["labels"]["model"] == "Qwen/Qwen3-8B"
    assert four["labels"]["hardware"] == "h100"
    [run] = four["runs"]
    assert run["identity"] == "one-conc4"  # the run id evalgate wrote inside it
    assert run["sweep"] == "nightly-1"
    assert run["verdict"] == "pass"
    assert run["floor"] == 0.85
    assert run["floor_matched"] == "default"
    assert run["floor_file"] == str(thresholds(tmp_path))
    assert run["task_version"] == "3.0"
    assert len(run["question_order"]) == 16
    assert run["harness_commit"] == "abc123"
    assert run["image"] == "vllm/vllm-openai:v0.32"
    assert run["evalgate_version"]
    assert run["run_evalgate_version"] == "0.1.0"  # the one that ran it, from its result.json
    assert run["started_at"] == "2026-01-01T00:00:00Z"
    assert {s["filter"] for s in run["scores"]} == {"strict-match", "flexible-extract"}
    score = run["scores"][0]
    right = sum(baseline_answers())
    assert score["n"] == 1319
    assert score["value"] == pytest.approx(right / 1319)
    assert score["low"] < score["value"] < score["high"]
    assert configs[16]["runs"][0]["identity"].startswith("sha256:")  # the harness's, by content

    # per question and filter: right or not, and the answer extracted
    [(blob,)] = rows(history, "SELECT questions FROM answers WHERE identity = 'one-conc4'")
    stored = msgspec.json.decode(zlib.decompress(bytes(blob)), type=record.Answers)
    assert stored.doc_ids == list(range(1319))
    assert stored.correct["strict-match"].count("1") == right
    assert len(stored.extracted["flexible-extract"]) == 1319
    assert rows(history, "SELECT count(*) FROM answers") == [(3,)]

    again = verify(tmp_path, str(sweep), env={"EVALGATE_HISTORY": history})
    assert again.returncode == 0, again.stderr
    assert "history: 0 run(s) recorded" in last_line(again.stderr)
    assert "(3 already there)" in last_line(again.stderr)
    assert rows(history, "SELECT count(*) FROM runs") == [(3,)]


@pytest.mark.loopback
def test_a_record_that_fails_keeps_the_verdict_and_says_the_history_was_not_written(
    tmp_path, small_disk
):
    """The history's disk fills up while a sweep is recorded: the verdict and its exit code
    stand, the last line says the history was not written, and nothing of the sweep is in it."""
    history = str(small_disk(256 * 1024) / "history.db")
    first = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers()})
    assert verify(tmp_path, str(first), "--record", history, "--sweep-id", "n1").returncode == 0
    big = evalgate_sweep(tmp_path / "s2", "two", {c: answers(seed=c % 5) for c in range(1, 41)})
    done = verify(tmp_path, str(big), "--record", history, "--sweep-id", "n2")
    assert done.returncode == 0, done.stderr
    assert "evalgate verify: PASS (exit 0)" in done.stdout
    line = last_line(done.stderr)
    assert line.startswith("HistoryError: Could not record sweep n2 in the history ")
    assert "database or disk is full" in line
    assert line.endswith("The history was not written; the verdict above stands.")
    assert rows(history, "SELECT DISTINCT sweep FROM runs") == [("n1",)]


def as_evalgate_writes(run: Path, broken: str = "", into: str = "", line: int = 6) -> None:
    """The run's samples.jsonl rewritten by evalgate's writer (every key of a line present, as
    `--record` reads in one typed pass), then its `line`'s `broken` replaced by `into`."""
    path = run / "samples.jsonl"
    write_samples(run, read_samples(path))
    lines = path.read_text().splitlines(keepends=True)
    assert broken in lines[line - 1], lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(broken, into, 1)
    path.write_text("".join(lines))


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("broken", "into", "said"),
    [
        ("", "", None),
        ('"doc_id": 5,', '"doc_id": 5, "doc_id": 5,', "repeats the key 'doc_id' in one object ($)"),
        ('"response":', '"response": null, "response":', "repeats the key 'response'"),
        ('"correct":', '"correct": true, "correct":', "repeats the key 'correct'"),
        ('"doc_id": 5,', '"doc_id": 18446744073709551616,', "Expected `int` <= 922337203685477"),
        ('"completion_tokens": 42', '"completion_tokens": 1' + "0" * 400, "integer of 401 digits"),
        ('"doc_id": 5,', '"doc_id": NaN,', "$.doc_id: Expected `int`, got `float`"),
    ],
    ids=["intact", "doc_id twice", "response twice", "correct twice", "2**64", "10**400", "NaN"],
)
def test_a_run_written_as_evalgate_writes_is_recorded_with_its_answers_unless_a_line_breaks_a_rule(
    tmp_path, broken, into, said
):
    """A repeated key (even one --record does not keep), an integer past its bounds and NaN in a
    samples.jsonl are refused as the reader refuses them: the run is recorded without its
    answers, the log saying why; written whole, it is recorded with them."""
    history = str(tmp_path / "history.db")
    sweep = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers()})
    as_evalgate_writes(sweep / "one-conc4", broken, into)
    done = verify(tmp_path, str(sweep), "--record", history, "--sweep-id", "n1")
    assert done.returncode == 0, done.stderr
    assert last_line(done.stderr).startswith("history: 1 run(s) recorded in ")
    [(blob,)] = rows(history, "SELECT questions FROM answers WHERE identity = 'one-conc4'")
    stored = msgspec.json.decode(zlib.decompress(bytes(blob)), type=record.Answers)
    if said is None:
        assert "without its answers" not in done.stderr
        assert stored.doc_ids == list(range(1319))
        assert stored.correct["strict-match"].count("1") == sum(baseline_answers())
    else:
        assert stored.doc_ids == []
        [warning] = [line for line in done.stderr.splitlines() if "without its answers" in line]
        assert "samples.jsonl line 6 " in warning
        assert said in warning


@pytest.mark.loopback
def test_a_line_breaking_a_rule_far_into_the_file_records_the_run_without_its_answers(tmp_path):
    """samples.jsonl is read a piece at a time (record.PIECE): a repeated key on its 1,000th
    line, after pieces that were read whole, still records the run without its answers."""
    history = str(tmp_path / "history.db")
    sweep = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers()})
    as_evalgate_writes(sweep / "one-conc4", '"doc_id": 999,', '"doc_id": 999, "doc_id": 999,', 1000)
    lines = (sweep / "one-conc4" / "samples.jsonl").read_bytes().splitlines(keepends=True)
    assert len(b"".join(lines[:999])) > 2 * record.PIECE  # pieces read whole before it
    done = verify(tmp_path, str(sweep), "--record", history, "--sweep-id", "n1")
    assert done.returncode == 0, done.stderr
    [warning] = [line for line in done.stderr.splitlines() if "without its answers" in line]
    assert "samples.jsonl line 1000 repeats the key 'doc_id' in one object ($)" in warning
    [(blob,)] = rows(history, "SELECT questions FROM answers WHERE identity = 'one-conc4'")
    assert msgspec.json.decode(zlib.decompress(bytes(blob)), type=record.Answers).doc_ids == []


@pytest.mark.loopback
def test_a_filter_first_named_late_in_the_file_is_kept_for_every_question(tmp_path):
    """A filter the first 300 questions lack (three pieces and more in): its answers are kept
    for every question, - and "" for those it did not score, as in one read."""
    history = str(tmp_path / "history.db")
    sweep = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers()})
    run = sweep / "one-conc4"
    samples = read_samples(run / "samples.jsonl")
    late = [
        structs.replace(s, filters={"strict-match": s.filters["strict-match"]}) if i < 300 else s
        for i, s in enumerate(samples)
    ]
    write_samples(run, late)
    done = verify(tmp_path, str(sweep), "--record", history, "--sweep-id", "n1")
    assert done.returncode == 0, done.stderr
    assert "without its answers" not in done.stderr
    [(blob,)] = rows(history, "SELECT questions FROM answers WHERE identity = 'one-conc4'")
    stored = msgspec.json.decode(zlib.decompress(bytes(blob)), type=record.Answers)
    flexible = [s.filters["flexible-extract"] for s in samples[300:]]
    assert list(stored.correct) == ["strict-match", "flexible-extract"]
    assert stored.correct["flexible-extract"] == "-" * 300 + "".join(
        "1" if a.correct else "0" for a in flexible
    )
    assert stored.extracted["flexible-extract"] == [""] * 300 + [a.extracted for a in flexible]
    assert stored.correct["strict-match"] == "".join(
        "1" if s.filters["strict-match"].correct else "0" for s in samples
    )


@pytest.mark.loopback
def test_each_run_keeps_the_digests_and_order_of_its_own_questions(tmp_path):
    """A run asking its questions in another order than the run recorded before it, then one
    asking them as that one did: each keeps a digest of each of its own questions (text and
    target) in its order, and the digest of that order (its doc_ids joined by commas)."""
    history = str(tmp_path / "history.db")
    sweep = evalgate_sweep(tmp_path / "s1", "one", {c: baseline_answers() for c in (4, 8, 16)})
    asked = read_samples(sweep / "one-conc8" / "samples.jsonl")
    write_samples(sweep / "one-conc8", list(reversed(asked)))
    done = verify(tmp_path, str(sweep), "--record", history, "--sweep-id", "n1")
    assert done.returncode == 0, done.stderr
    for conc in (4, 8, 16):
        identity = f"one-conc{conc}"
        samples = read_samples(sweep / identity / "samples.jsonl")
        [(blob,)] = rows(history, f"SELECT questions FROM answers WHERE identity = '{identity}'")  # noqa: S608
        stored = msgspec.json.decode(zlib.decompress(bytes(blob)), type=record.Answers)
        assert stored.doc_ids == [s.doc_id for s in samples]
        assert stored.doc_ids[0] == (1318 if conc == 8 else 0)
        assert stored.digests == [
            hashlib.blake2b(f"{s.question}\0{s.target}".encode(), digest_size=6).hexdigest()
            for s in samples
        ]
        ids = ",".join(str(s.doc_id) for s in samples).encode()
        [(order,)] = rows(history, f"SELECT question_order FROM runs WHERE identity = '{identity}'")  # noqa: S608
        assert order == hashlib.sha256(ids).hexdigest()[:16]


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A folder on a tmpfs of `size` bytes (needs root and mount(8); else the test skips)."""
    mounted: list[Path] = []

    def make(size: int) -> Path:
        point = tmp_path / "disk"
        point.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],  # noqa: S607
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip("a small tmpfs needs root and mount(8)")
        mounted.append(point)
        return point

    yield make
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)  # noqa: S607


def test_runs_and_sweeps_marked_bad_are_shown_and_a_sweep_deleted_is_gone(tmp_path, history):
    for name, sweep_id in (("one", "n1"), ("two", "n2"), ("three", "n3")):
        sweep = evalgate_sweep(tmp_path / name, name, {4: baseline_answers(), 8: answers(seed=2)})
        assert (
            verify(tmp_path, str(sweep), "--record", history, "--sweep-id", sweep_id).returncode
            == 0
        )

    marked = history_cli(history, "--mark-sweep", "n2", "--reason", "driver bug", "--by", "alice")
    assert marked.returncode == 0, marked.stderr
    assert marked.stdout.strip() == "marked bad: n2 (2 run(s)) by alice: driver bug"
    carol, bob = ({"USER": user, "GITHUB_ACTOR": ""} for user in ("carol", "bob"))
    run = history_cli(history, "--mark-run", "three-conc8", "--reason", "noisy node", env=carol)
    assert run.returncode == 0, run.stderr
    deleted = history_cli(history, "--delete-sweep", "n1", "--reason", "recorded twice", env=bob)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == "deleted: n1 (2 run(s)) by bob: recorded twice"

    configs = by_conc(document(history))
    assert [r["sweep"] for r in configs[4]["runs"]] == ["n2", "n3"]
    mark = configs[4]["runs"][0]["marked"]
    assert (mark["reason"], mark["by"], mark["sweep"]) == ("driver bug", "alice", True)
    assert mark["at"].endswith("Z")
    assert configs[8]["runs"][1]["marked"]["reason"] == "noisy node"
    assert configs[4]["runs"][1]["marked"] is None
    assert "MARKED BAD by alice: driver bug" in history_cli(history).stdout
    log = rows(history, "SELECT action, sweep, by_whom FROM curation ORDER BY id")
    assert log == [("mark", "n2", "alice"), ("mark", None, "carol"), ("delete", "n1", "bob")]
    assert rows(history, "SELECT count(*) FROM answers") == [(4,)]

    # the runs a fit takes: completed and unmarked only
    with open_history(history, create=False) as store:
        from evalgate.history.look import completed_runs

        found = completed_runs(store)
    shown = {(c.labels["concurrency"], c.filter): c for c in found}
    four = shown[4, "strict-match"]
    assert four.labels["task"] == "gsm8k"
    assert [(c.correct, c.n) for c in four.runs] == [(sum(baseline_answers()), 1319)]  # n3's
    assert (8, "strict-match") not in shown  # n2 marked as a sweep, n3's run marked itself

    for bad, message in (
        (["--delete-sweep", "n9", "--reason", "x"], "--delete-sweep n9: "),
        (
            ["--mark-run", "nothing-at-all", "--reason", "x"],
            "--mark-run nothing-at-all: no run",
        ),
        (["--mark-run", "one-conc4"], "--reason is required"),
    ):
        refused = history_cli(history, *bad)
        assert refused.returncode == 2, refused.stderr
        assert message in refused.stderr


def test_eight_recorders_of_overlapping_parts_of_one_sweep_record_every_run_once(tmp_path, history):
    """Eight CI jobs at once into a new history (its schema created by whichever comes first),
    each recording five of twelve runs, every run in the parts of several jobs."""
    runs = evalgate_sweep(
        tmp_path / "runs", "r", {conc: answers(seed=conc % 5) for conc in range(1, 13)}
    )
    parts = []
    for job in range(8):
        part = tmp_path / f"job{job}"
        for conc in [(job + k) % 12 + 1 for k in range(5)]:
            shutil.copytree(runs / f"r-conc{conc}", part / f"r-conc{conc}")
        parts.append(part)
    command = [
        sys.executable,
        "-m",
        "evalgate.cli",
        "verify",
        "--thresholds",
        str(thresholds(tmp_path)),
    ]
    command += ["--no-github", "-q", "--record", history, "--sweep-id", "night"]
    jobs = [
        subprocess.Popen(
            [*command, str(part)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for part in parts
    ]
    results = [(job.wait(timeout=300), *job.communicate()) for job in jobs]
    assert [code for code, _, _ in results] == [0] * 8, [err for _, _, err in results]
    added = [int(last_line(err).split()[1]) for _, _, err in results]
    assert sum(added) == 12
    assert rows(history, "SELECT count(*), count(DISTINCT identity) FROM runs") == [(12, 12)]
    assert rows(history, "SELECT count(*) FROM answers") == [(12,)]
    assert rows(history, "SELECT DISTINCT sweep FROM runs") == [("night",)]


@pytest.mark.loopback
def test_a_sweep_id_without_a_history_is_refused(tmp_path):
    sweep = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers()})
    done = verify(tmp_path, str(sweep), "--sweep-id", "n1")
    assert done.returncode == 2
    assert "--sweep-id applies to --record, or to a history given as --baseline" in done.stderr
    folder = verify(tmp_path, str(sweep), "--sweep-id", "n1", "--baseline", str(sweep))
    assert folder.returncode == 2  # a folder of results is no history
    assert "--sweep-id applies to --record" in folder.stderr
