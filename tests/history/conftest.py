"""The history's two stores, real: an SQLite file in a temporary folder, and a PostgreSQL 15
server (Debian's packages; scripts/test installs them as root where missing) started once per
session on a loopback port in a temporary folder as the unprivileged user `postgres`, with
password logins over TCP, and stopped at the end. Each test gets a database of its own.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shlex
import shutil
import socket
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_subprocess
from tests.verify.sweeps import THRESHOLDS

BIN = Path("/usr/lib/postgresql/15/bin")
USER = "evalgate_ci"
PASSWORD = "s3cret-Pa55word-xyz"  # noqa: S105  # the test server's; long enough to be scrubbed
_databases = itertools.count()


@dataclass(frozen=True)
class Server:
    """A running PostgreSQL: where it listens, and how to log in as its superuser."""

    port: int
    folder: Path

    def url(self, database: str = "postgres", password: str = PASSWORD) -> str:
        return f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as connection:
            connection.execute(sql)  # type: ignore[arg-type]

    def pg_ctl(self, *args: str) -> None:
        _as_postgres([str(BIN / "pg_ctl"), "-D", str(self.folder / "data"), *args])


def _as_postgres(command: list[str]) -> None:
    """Run `command` as the user postgres (PostgreSQL refuses to run as root)."""
    line = " ".join(shlex.quote(part) for part in command)
    subprocess.run(
        ["/bin/su", "postgres", "-s", "/bin/sh", "-c", line],
        check=True,
        capture_output=True,
        timeout=120,
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def unavailable() -> str | None:
    """Why no server can be started here, or None."""
    if not (BIN / "initdb").exists() or os.geteuid() != 0 or shutil.which("su") is None:
        return (
            "it needs Debian's postgresql-15 (scripts/test installs it as root with apt-get) "
            "and root, to start the server as the user postgres"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "it needs the [postgres] extra (pip install -e '.[dev]')"
    return None


@contextlib.contextmanager
def running_postgres() -> Iterator[Server]:
    """PostgreSQL 15 on 127.0.0.1, as postgres, in a temporary folder; stopped at the end."""
    folder = Path(tempfile.mkdtemp(prefix="evalgate-postgres-"))
    os.chmod(folder, 0o755)  # noqa: S103  # the user postgres must reach its data folder
    shutil.chown(folder, "postgres")
    (folder / "password").write_text(PASSWORD)
    shutil.chown(folder / "password", "postgres")
    server = Server(_free_port(), folder)
    try:
        _as_postgres(
            [
                str(BIN / "initdb"),
                "-D",
                str(folder / "data"),
                "-U",
                USER,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                f"--pwfile={folder / 'password'}",
            ]
        )
        options = f"-p {server.port} -k {folder} -c listen_addresses=127.0.0.1"
        server.pg_ctl("-o", options, "-l", str(folder / "log"), "-w", "start")
        yield server
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            server.pg_ctl("-m", "fast", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    """The session's PostgreSQL server (the postgres tier is skipped, saying why, without one)."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(f"postgres tier skipped: {reason}")
    with running_postgres() as server:
        yield server


# each case's tier: SQLite's is loopback (the history tests run the CLI in its own process)
@pytest.fixture(
    params=[
        pytest.param("sqlite", marks=pytest.mark.loopback),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def history(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty history location: an SQLite file's path, or a PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "history.db")
    server: Server = request.getfixturevalue("postgres_server")
    name = f"history_{os.getpid()}_{next(_databases)}"
    server.admin(f"CREATE DATABASE {name}")
    return server.url(name)


# -- the history through the CLI, each command in its own process ------------------------------


def thresholds(root: Path) -> Path:
    path = root / "thresholds.json"
    if not path.exists():
        path.write_text(json.dumps(THRESHOLDS))
    return path


def verify(root: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return run_subprocess(
        "verify", *args, "--thresholds", str(thresholds(root)), "--no-github", "-q", env=env
    )


def history_cli(*args: str, env: dict[str, str] | None = None) -> Any:
    return run_subprocess("history", *args, env=env)


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def rows(history: str, sql: str) -> list[tuple[Any, ...]]:
    """Read the history directly, as another client would."""
    if history.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(history, connect_timeout=10) as connection:
            return list(connection.execute(sql).fetchall())  # type: ignore[arg-type]
    with sqlite3.connect(history) as connection:
        return list(connection.execute(sql).fetchall())


def document(history: str, *args: str) -> dict[str, Any]:
    done = history_cli(history, "--json", "-", *args)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))
