"""The history's stores (history/store.py): versions upgraded or refused, a file or URL that is no
history refused as it was, a server's password in no output; through the CLI in its own process,
on both stores (tests/history/conftest.py)."""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
import struct
import threading
from pathlib import Path
from typing import Any

import pytest

from evalgate.history import record
from evalgate.history.store import MIGRATIONS, SCHEMA_VERSION, Store
from evalgate.thresholds import load_thresholds
from evalgate.verify.sweep import verify as gate
from tests.conftest import run_subprocess
from tests.history.conftest import document, history_cli, last_line, rows, thresholds, verify
from tests.verify.sweeps import answers, baseline_answers, evalgate_sweep


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
