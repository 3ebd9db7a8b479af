"""The history through the CLI in its own process, on both stores (tests/history/conftest.py):
`verify --record`, `history` (table, --where, --json, curation) and `verify --baseline HISTORY`,
on sweeps of full GSM8K runs written by tests/verify/sweeps.py."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import sqlite3
import struct
import subprocess
import sys
import threading
import zlib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from evalgate.evidence.artifacts import read_samples, write_samples
from evalgate.history import record
from evalgate.history.store import MIGRATIONS, SCHEMA_VERSION, Store, open_history
from evalgate.thresholds import load_thresholds
from evalgate.verify.sweep import verify as gate
from tests.conftest import run_subprocess
from tests.history.conftest import document, history_cli, last_line, rows, thresholds, verify
from tests.verify.sweeps import answers, baseline_answers, evalgate_sweep, harness_sweep


def by_conc(doc: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {c["labels"]["concurrency"]: c for c in doc["configs"]}


# -- record ----------------------------------------------------------------------------------------


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


def as_evalgate_writes(run: Path, broken: str = "", into: str = "") -> None:
    """The run's samples.jsonl rewritten by evalgate's writer (every key of a line present, as
    `--record` reads in one typed pass), then its 6th line's `broken` replaced by `into`."""
    path = run / "samples.jsonl"
    write_samples(run, read_samples(path))
    lines = path.read_text().splitlines(keepends=True)
    assert broken in lines[5], lines[5]
    lines[5] = lines[5].replace(broken, into, 1)
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


# -- look ------------------------------------------------------------------------------------------


def test_history_shows_configs_that_dropped_first_and_filters_by_label(tmp_path, history):
    first = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers(), 8: baseline_answers()})
    assert verify(tmp_path, str(first), "--record", history, "--sweep-id", "n1").returncode == 0
    second = evalgate_sweep(tmp_path / "s2", "two", {4: answers(lost=80), 8: answers(seed=1)})
    done = verify(
        tmp_path, str(second), "--baseline", history, "--record", history, "--sweep-id", "n2"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REGRESSION" in done.stdout

    table = history_cli(history)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].endswith("conc=4 [gsm8k]  DROPPED")
    assert lines[1].split()[0] == "n1" and lines[2].split()[0] == "n2"
    assert " regression " in lines[2] and "floor 0.850 (default)" in lines[2]
    assert lines[-1] == "2 configs, 1 dropped"

    only = document(history, "--where", "concurrency=8", "--where", "hardware=h100")
    assert [c["labels"]["concurrency"] for c in only["configs"]] == [8]
    assert [r["sweep"] for r in only["configs"][0]["runs"]] == ["n1", "n2"]  # in time order

    unknown = history_cli(history, "--where", "gpu=b200")
    assert unknown.returncode == 2
    assert "--where gpu=b200: no run in" in unknown.stderr
    assert "has the label 'gpu'" in unknown.stderr
    none = history_cli(history, "--where", "concurrency=99")
    assert none.returncode == 2
    assert "no run in" in none.stderr and "has that value (it has: 4, 8)" in none.stderr


# -- curate ----------------------------------------------------------------------------------------


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


# -- the baseline from the history -----------------------------------------------------------------


def test_the_baseline_is_each_configs_last_passing_unmarked_run_before_the_sweep(tmp_path, history):
    one = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers(), 8: baseline_answers()})
    assert verify(tmp_path, str(one), "--record", history, "--sweep-id", "n1").returncode == 0
    two = evalgate_sweep(tmp_path / "s2", "two", {4: answers(lost=80), 8: answers(seed=1)})
    assert verify(tmp_path, str(two), "--record", history, "--sweep-id", "n2").returncode == 0
    # n2's conc=4 lost 80 questions: marked bad, so the next sweep is paired with n1's
    assert history_cli(history, "--mark-run", "two-conc4", "--reason", "bad node").returncode == 0

    three = evalgate_sweep(
        tmp_path / "s3",
        "three",
        {4: answers(lost=80, seed=3), 8: answers(seed=2), 16: baseline_answers()},
    )
    verdict = tmp_path / "verdict.json"
    args = (str(three), "--baseline", history, "--json", str(verdict), "--sweep-id", "n3")
    done = verify(tmp_path, *args, "--record", history)
    assert done.returncode == 1, done.stdout + done.stderr
    found = {e["labels"]["concurrency"]: e for e in json.loads(verdict.read_text())["entries"]}
    assert found[4]["outcome"] == "regression"
    assert " sweep n1 run one-conc4 " in found[4]["versus"]["baseline_path"]
    assert found[8]["versus"]["standing"] == "equivalent"
    assert " sweep n2 run two-conc8 " in found[8]["versus"]["baseline_path"]
    assert found[16]["versus"]["standing"] == "new"
    assert last_line(done.stderr).startswith("history: 3 run(s) recorded")

    # again, now that the sweep is in the history: its own runs and sweep id are left out
    again = verify(tmp_path, *args)
    assert again.returncode == 1
    found = {e["labels"]["concurrency"]: e for e in json.loads(verdict.read_text())["entries"]}
    assert " sweep n1 run one-conc4 " in found[4]["versus"]["baseline_path"]
    assert found[16]["versus"]["standing"] == "new"


# -- concurrency -----------------------------------------------------------------------------------


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


# -- the schema ------------------------------------------------------------------------------------


def _at_version(history: str, version: int) -> None:
    """A history as an evalgate of schema `version` made it (the migrations up to it)."""
    if history.startswith("postgresql://"):
        import psycopg

        connection: Any = psycopg.connect(history)
        dialect = "postgresql"
    else:
        connection = sqlite3.connect(history, isolation_level=None)
        dialect = "sqlite"
    from evalgate.history.store import Store, migrate

    store = Store(connection, dialect, history)  # type: ignore[arg-type]
    with store.transaction("make an old schema") as cursor:
        migrate(store, cursor, 0, version)
    store.close()


def test_an_older_history_is_upgraded_and_a_newer_one_refused(tmp_path, history):
    assert SCHEMA_VERSION == len(MIGRATIONS) == 3
    _at_version(history, 1)
    assert rows(history, "SELECT value FROM evalgate_history WHERE key = 'schema'") == [("1",)]
    sweep = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers()})
    done = verify(tmp_path, str(sweep), "--record", history, "--sweep-id", "n1")
    assert done.returncode == 0, done.stderr
    assert rows(history, "SELECT value FROM evalgate_history WHERE key = 'schema'") == [("3",)]
    marked = history_cli(history, "--mark-sweep", "n1", "--reason", "curation needs version 2")
    assert marked.returncode == 0, marked.stderr

    rows_before = rows(history, "SELECT count(*) FROM runs")
    _set_schema(history, "7")
    newer = verify(tmp_path, str(sweep), "--record", history, "--sweep-id", "n2")
    assert newer.returncode == 2
    assert newer.stdout == ""  # refused before any result was read
    assert "schema version 7, newer than this evalgate's 3: upgrade evalgate" in newer.stderr
    assert history_cli(history).returncode == 2
    assert rows(history, "SELECT count(*) FROM runs") == rows_before


def _indexes(history: str) -> set[str]:
    if history.startswith("postgresql://"):
        sql = "SELECT indexname FROM pg_indexes WHERE tablename = 'runs'"
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs'"
    return {str(name) for (name,) in rows(history, sql)}


def test_a_history_of_version_2_with_runs_in_it_is_upgraded_and_read_as_before(tmp_path, history):
    """Runs recorded by an evalgate of schema 2 (its migrations, and the rows it wrote: version 3
    adds the index `history` reads the runs in time order by) are shown, and paired with, once
    today's evalgate has opened the history and upgraded it."""
    _at_version(history, 2)
    night = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers(), 8: answers(seed=1)})
    report = gate([str(night)], load_thresholds(thresholds(tmp_path)))
    if history.startswith("postgresql://"):
        import psycopg

        store = Store(psycopg.connect(history), "postgresql", history)
    else:
        store = Store(sqlite3.connect(history, isolation_level=None), "sqlite", history)
    with store:
        context = record.Context("v2-night", "2026-05-01T02:00:00Z")
        assert record.record(store, report, context).added == 2
    assert rows(history, "SELECT value FROM evalgate_history WHERE key = 'schema'") == [("2",)]
    assert "runs_in_order" not in _indexes(history)

    shown = history_cli(history)
    assert shown.returncode == 0, shown.stderr
    assert rows(history, "SELECT value FROM evalgate_history WHERE key = 'schema'") == [("3",)]
    assert "runs_in_order" in _indexes(history)
    assert shown.stdout.count("v2-night") == 2
    assert shown.stdout.strip().endswith("2 configs, 0 dropped")
    assert [r["identity"] for c in document(history)["configs"] for r in c["runs"]] == [
        "one-conc4",
        "one-conc8",
    ]

    later = evalgate_sweep(tmp_path / "s2", "two", {4: answers(lost=80), 8: answers(seed=2)})
    verdict = tmp_path / "verdict.json"
    done = verify(tmp_path, str(later), "--baseline", history, "--json", str(verdict))
    assert done.returncode == 1, done.stdout + done.stderr
    found = {e["labels"]["concurrency"]: e for e in json.loads(verdict.read_text())["entries"]}
    assert found[4]["outcome"] == "regression"  # paired question by question with v2's run
    assert " sweep v2-night run one-conc4 " in found[4]["versus"]["baseline_path"]
    assert found[8]["versus"]["standing"] == "equivalent"


def _set_schema(history: str, value: str) -> None:
    if history.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(history) as connection:
            connection.execute(
                "UPDATE evalgate_history SET value = %s WHERE key = 'schema'", (value,)
            )
        return
    with sqlite3.connect(history) as connection:
        connection.execute("UPDATE evalgate_history SET value = ? WHERE key = 'schema'", (value,))


# -- bad input -------------------------------------------------------------------------------------


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("corrupt", "cannot be read as an SQLite database"),
        ("text", "is not an SQLite database (it does not start with SQLite's header)"),
        ("another tool's", "holds another tool's database (2 tables: orders, users)"),
        ("folder", "is a folder, not a history"),
    ],
)
def test_a_file_that_is_no_history_is_refused_and_left_as_it_was(tmp_path, case, message):
    sweep = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers()})
    place = tmp_path / "place"
    place.mkdir()
    history = place / "history.db"
    if case == "corrupt":
        history.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 32)
    elif case == "text":
        history.write_text("config,score\nqwen3,0.95\n")
    elif case == "another tool's":
        with sqlite3.connect(history) as connection:
            connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
            connection.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        connection.close()
    else:
        history.mkdir()
    before = _listing(place) if history.is_file() else {}
    done = verify(tmp_path, str(sweep), "--record", str(history))
    assert done.returncode == 2
    assert done.stdout == ""  # refused before any result was read: no verdict to take back
    assert done.stderr.startswith("HistoryError: ")
    assert message in done.stderr
    shown = history_cli(str(history))
    assert shown.returncode == 2
    assert message in shown.stderr
    as_baseline = verify(tmp_path, str(sweep), "--baseline", str(history))
    if case in ("corrupt", "another tool's"):  # an SQLite file by its header: read as a history
        assert as_baseline.returncode == 2
        assert message in as_baseline.stderr
    if history.is_file():
        assert _listing(place) == before


@pytest.mark.loopback
def test_a_where_that_is_not_label_equals_value_is_refused(tmp_path):
    history = tmp_path / "history.db"
    sweep = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers()})
    assert verify(tmp_path, str(sweep), "--record", str(history)).returncode == 0
    done = history_cli(str(history), "--where", "concurrency")
    assert done.returncode == 2
    assert "--where 'concurrency' is not LABEL=VALUE" in done.stderr
    missing = history_cli(str(tmp_path / "nothing.db"))
    assert missing.returncode == 2
    assert "There is no history at " in missing.stderr
    assert not (tmp_path / "nothing.db").exists()


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-1", "-1 is out of range: give 0 to 2,147,483,647"),
        ("2147483648", "out of range"),
        ("ten", "not a whole number in ASCII digits"),
    ],
)
def test_a_last_out_of_range_is_refused_naming_the_range(tmp_path, value, message):
    done = history_cli(str(tmp_path / "history.db"), "--last", value)
    assert done.returncode == 2
    assert "argument --last: " in done.stderr
    assert message in done.stderr
    assert not (tmp_path / "history.db").exists()


@pytest.mark.loopback
def test_a_url_to_nothing_is_refused_naming_it_without_its_password(tmp_path):
    pytest.importorskip("psycopg")
    from tests.history.conftest import PASSWORD, USER

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{port}/history"
    sweep = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers()})
    done = verify(tmp_path, str(sweep), "--record", url)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Cannot connect to the history postgresql://" in done.stderr
    assert f":***@127.0.0.1:{port}/history: connection failed" in done.stderr
    assert "Check the host and port in the URL" in done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    shown = history_cli(url)
    assert shown.returncode == 2
    assert PASSWORD not in shown.stdout + shown.stderr


@pytest.mark.loopback
def test_a_postgresql_history_without_the_extra_names_the_install_line(tmp_path):
    blocker = tmp_path / "blocked" / "psycopg"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('psycopg is not installed')\n")
    done = run_subprocess(
        "history",
        "postgresql://someone:a-long-password@127.0.0.1:1/history",
        env={"PYTHONPATH": str(blocker.parent)},
    )
    assert done.returncode == 2
    assert "needs psycopg: pip install 'evalgate-bench[postgres]'" in done.stderr
    assert "a-long-password" not in done.stderr


@pytest.mark.postgres
def test_a_wrong_password_or_another_tools_database_is_refused(tmp_path, postgres_server):
    from tests.history.conftest import PASSWORD

    sweep = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers()})
    postgres_server.admin("CREATE DATABASE wrong_password")
    wrong = postgres_server.url("wrong_password", password="not-the-Password-1")  # noqa: S106
    done = verify(tmp_path, str(sweep), "--record", wrong)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "password authentication failed" in done.stderr
    assert "Check the user and password in the URL." in done.stderr
    assert "not-the-Password-1" not in done.stderr
    assert PASSWORD not in done.stderr

    postgres_server.admin("CREATE DATABASE other_tool")
    other = postgres_server.url("other_tool")
    import psycopg

    with psycopg.connect(other) as connection:
        connection.execute("CREATE TABLE invoices (id integer)")
    refused = verify(tmp_path, str(sweep), "--record", other)
    assert refused.returncode == 2
    assert "holds another tool's database (1 tables: invoices)" in refused.stderr
    assert rows(
        other, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
    ) == [(1,)]


@pytest.mark.postgres
def test_the_urls_password_is_in_no_output(tmp_path, postgres_server):
    from tests.history.conftest import PASSWORD

    postgres_server.admin("CREATE DATABASE secrets")
    history = postgres_server.url("secrets")
    sweep = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers(), 8: answers(seed=1)})
    outputs = [tmp_path / name for name in ("verdict.json", "report.html", "junit.xml")]
    done = verify(
        tmp_path,
        str(sweep),
        "--record",
        history,
        "--baseline",
        history,
        "--json",
        str(outputs[0]),
        "--html",
        str(outputs[1]),
        "--junit",
        str(outputs[2]),
    )
    assert done.returncode == 0, done.stderr
    assert ":***@127.0.0.1:" in last_line(done.stderr)
    again = verify(tmp_path, str(sweep), "--baseline", history, "--json", str(outputs[0]))
    assert again.returncode == 0
    page, table, doc = (
        tmp_path / "history.html",
        history_cli(history),
        history_cli(history, "--json", "-"),
    )
    assert history_cli(history, "--html", str(page)).returncode == 0
    seen = [done.stdout, done.stderr, again.stdout, again.stderr, table.stdout, doc.stdout]
    seen += [p.read_text() for p in (*outputs, page)]
    assert all(PASSWORD not in text for text in seen)
    assert ":***@" in json.loads(outputs[0].read_text())["baseline"]["paths"][0]


# -- a server that goes away -----------------------------------------------------------------------


class Cutter:
    """A TCP proxy in front of the server that cuts each connection (both ways, at once) after
    its client has sent `after` bytes: to evalgate the server goes away mid-transaction."""

    def __init__(self, port: int, after: int) -> None:
        self.port, self.after = port, after
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.cut = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> int:
        return int(self.listener.getsockname()[1])

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.port), timeout=30)
            pair = (client, server)
            threading.Thread(
                target=self._pump, args=(client, server, pair, True), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(server, client, pair, False), daemon=True
            ).start()

    def _pump(
        self,
        source: socket.socket,
        target: socket.socket,
        pair: tuple[socket.socket, ...],
        up: bool,
    ) -> None:
        sent = 0
        try:
            while data := source.recv(65536):
                if up and sent + len(data) > self.after:
                    self.cut += 1
                    for end in pair:
                        end.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        end.close()  # a reset, not a goodbye
                    return
                sent += len(data) if up else 0
                target.sendall(data)
        except OSError:
            pass
        finally:
            for end in pair:
                with contextlib.suppress(OSError):
                    end.close()

    def close(self) -> None:
        self.listener.close()


@pytest.mark.postgres
def test_a_server_that_goes_away_mid_record_leaves_nothing_half_written(tmp_path, postgres_server):
    postgres_server.admin("CREATE DATABASE goes_away")
    direct = postgres_server.url("goes_away")
    first = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers()})
    assert verify(tmp_path, str(first), "--record", direct, "--sweep-id", "n1").returncode == 0
    cutter = Cutter(postgres_server.port, after=24_000)
    try:
        proxied = direct.replace(f":{postgres_server.port}/", f":{cutter.address}/")
        big = evalgate_sweep(tmp_path / "s2", "two", {c: answers(seed=c % 5) for c in range(1, 9)})
        done = verify(tmp_path, str(big), "--record", proxied, "--sweep-id", "n2")
    finally:
        cutter.close()
    assert cutter.cut == 1
    assert done.returncode == 0, done.stderr  # the verdict's code: the sweep passed
    assert "evalgate verify: PASS (exit 0)" in done.stdout
    line = last_line(done.stderr)
    assert line.startswith("HistoryError: Could not record sweep n2 in the history postgresql://")
    assert line.endswith(
        "Nothing of it was written. The history was not written; the verdict above stands."
    )
    assert rows(direct, "SELECT DISTINCT sweep FROM runs") == [("n1",)]
    assert rows(direct, "SELECT count(*) FROM answers") == [(1,)]
    again = verify(tmp_path, str(big), "--record", direct, "--sweep-id", "n2")
    assert again.returncode == 0
    assert last_line(again.stderr).startswith("history: 8 run(s) recorded")
    assert rows(direct, "SELECT count(*) FROM answers") == [(9,)]


@pytest.mark.loopback
def test_a_sweep_id_without_a_history_is_refused(tmp_path):
    sweep = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers()})
    done = verify(tmp_path, str(sweep), "--sweep-id", "n1")
    assert done.returncode == 2
    assert "--sweep-id applies to --record, or to a history given as --baseline" in done.stderr
    folder = verify(tmp_path, str(sweep), "--sweep-id", "n1", "--baseline", str(sweep))
    assert folder.returncode == 2  # a folder of results is no history
    assert "--sweep-id applies to --record" in folder.stderr
