"""Time the history (issue 48): what `evalgate verify --record` adds over 1,000 configs of full
GSM8K, on SQLite and on PostgreSQL; and `evalgate history` with its table, its JSON document and
its page over 200 configs x 365 sweeps (goals: --record adds <= 5 s on SQLite; history and its
page <= 2 s each, the page <= 5 MB).

    PYTHONPATH=. python benchmarks/bench_history.py [--configs 1000] [--runs 3]
        [--history-configs 200] [--sweeps 365]

The sweep: a handful of runs written by the tests' writer (result.json + samples.jsonl, 1,319
questions, two filters), copied per config with its own run id and concurrency; the files are
read once before timing (the page cache is warm). `evalgate verify SWEEP -q` is timed alone and
with `--record` into a new history (each run its own), as a subprocess; the difference is what
--record adds, which is then split: reading each run's answers (its samples.jsonl) and the rest
(building, compressing, writing in one transaction), timed in-process. PostgreSQL is a server
started here on a loopback port (tests/history/conftest.py; needs root and Debian's
postgresql-15), with its defaults (fsync on).

The long history is built through the recording path: each night's sweep of --history-configs
configs is gated (evalgate.verify.sweep.verify) and recorded (evalgate.history.record.record,
what `verify --record` calls) with its per-question answers; one result.json per run, its
samples.jsonl a link to one of a few templates (the answers differ between templates; a few
nights regress or fail). Then `evalgate history H`, `--json -` and `--html FILE` are timed as
subprocesses.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_verify_baseline import _copy, _template, size, timed  # noqa: E402
from tests.verify.sweeps import answers, baseline_answers  # noqa: E402

CLI = [sys.executable, "-m", "evalgate.cli"]
THRESHOLDS = {"default": {"gsm8k": 0.85}}


def sweep(root: Path, configs: int) -> Path:
    """One sweep of `configs` full GSM8K runs (evalgate's layout)."""
    templates = root / "templates"
    runs = [_template(templates, "evalgate", f"t{i}", answers(seed=i)) for i in range(7)]
    for conc in range(1, configs + 1):
        _copy(runs[conc % 7], root / "sweep" / f"{conc:05d}", "evalgate", conc)
    shutil.rmtree(templates)
    (root / "thresholds.json").write_text(json.dumps(THRESHOLDS))
    return root / "sweep"


def verify_command(root: Path, *extra: str) -> list[str]:
    thresholds = str(root / "thresholds.json")
    return [*CLI, "verify", str(root / "sweep"), "--thresholds", thresholds, "--no-github", "-q"]


def split(root: Path) -> tuple[float, float]:
    """(seconds reading the runs' answers, seconds building and writing them) of one record
    of the sweep into a new SQLite history, in-process."""
    from evalgate.history import record
    from evalgate.history.store import open_history
    from evalgate.thresholds import load_thresholds
    from evalgate.verify.sweep import verify

    report = verify([str(root / "sweep")], load_thresholds(root / "thresholds.json"))
    entries = record.recordable(report)
    started = time.perf_counter()
    for entry in entries:
        record.read_answers(entry)
    reading = time.perf_counter() - started
    with open_history(str(root / "split.db"), create=True) as store:
        started = time.perf_counter()
        record.record(store, report, record.Context("split", record.now()))
        whole = time.perf_counter() - started
    (root / "split.db").unlink()
    return reading, whole - reading


@contextlib.contextmanager
def postgres() -> Iterator[object | None]:
    from tests.history import conftest

    if conftest.unavailable() is not None:
        yield None
        return
    with conftest.running_postgres() as server:
        yield server


def record_rows(root: Path, configs: int, runs: int) -> list[str]:
    """The --record table: verify alone, with --record on each store, and again (nothing new)."""
    plain = [timed(verify_command(root), 0) for _ in range(runs)]
    rows = [_row("verify, no --record", configs, plain, None)]
    fresh = []
    for index in range(runs):
        history = root / f"h{index}.db"
        fresh.append(timed([*verify_command(root), "--record", str(history)], 0))
    rows.append(_row("verify --record, a new SQLite history", configs, fresh, plain))
    again = [
        timed([*verify_command(root), "--record", str(root / "h0.db")], 0) for _ in range(runs)
    ]
    rows.append(_row("verify --record again, nothing new (SQLite)", configs, again, plain))
    with postgres() as server:
        if server is not None:
            urls = []
            for index in range(runs):
                server.admin(f"CREATE DATABASE bench_{index}")  # type: ignore[attr-defined]
                urls.append(server.url(f"bench_{index}"))  # type: ignore[attr-defined]
            pg = [timed([*verify_command(root), "--record", url], 0) for url in urls]
            rows.append(_row("verify --record, a new PostgreSQL history", configs, pg, plain))
            pg_again = [timed([*verify_command(root), "--record", urls[0]], 0) for _ in urls]
            rows.append(
                _row("verify --record again, nothing new (PostgreSQL)", configs, pg_again, plain)
            )
    reading, writing = split(root)
    rows.append(
        f"| of which, in-process: reading the runs' answers / building and writing | {configs:,} "
        f"| {reading:.2f} / {writing:.2f} | | | | |"
    )
    return rows


def _row(
    name: str,
    configs: int,
    timings: list[tuple[float, float, float]],
    base: list[tuple[float, float, float]] | None,
) -> str:
    walls = [t[0] for t in timings]
    wall, cpu = statistics.median(walls), statistics.median(t[1] for t in timings)
    added = goal = met = ""
    if base is not None:
        extra = wall - statistics.median(t[0] for t in base)
        added = f"{extra:+.2f}"
        if "new SQLite" in name:
            goal, met = "<= 5 s added", "yes" if extra <= 5 else "**no**"
    return (
        f"| {name} | {configs:,} | {wall:.2f} ({min(walls):.2f}-{max(walls):.2f}) | {cpu:.2f} "
        f"| {added} | {goal} | {met} |"
    )


RECORD_HEADER = [
    "| command | configs | wall s, median (min-max) | CPU s | added s (wall) | goal | met |",
    "| --- | --- | --- | --- | --- | --- | --- |",
]


# -- a long history -------------------------------------------------------------------------------


def build_history(root: Path, configs: int, sweeps: int) -> Path:
    """`sweeps` nights of `configs` configs recorded through the recording path."""
    from evalgate.history import record
    from evalgate.history.store import open_history
    from evalgate.thresholds import load_thresholds
    from evalgate.verify.sweep import verify

    templates = root / "templates"
    kinds = [answers(seed=i) for i in range(6)] + [answers(lost=80), answers(lost=200)]
    runs = [_template(templates, "evalgate", f"t{i}", kind) for i, kind in enumerate(kinds)]
    kinds[0] = baseline_answers()
    (root / "thresholds.json").write_text(json.dumps(THRESHOLDS))
    thresholds = load_thresholds(root / "thresholds.json")
    history = root / "history.db"
    with open_history(str(history), create=True) as store:
        for night in range(sweeps):
            folder = root / "night"
            for conc in range(1, configs + 1):
                bad = (night + conc) % 97 == 0  # now and then a config regresses or fails
                template = runs[6 + conc % 2] if bad else runs[(night + conc) % 6]
                target = folder / f"{conc:05d}"
                target.mkdir(parents=True)
                result = json.loads((template / "result.json").read_text())
                result["labels"]["concurrency"] = result["eval"]["num_concurrent"] = conc
                result["run_id"] = f"night{night}-{conc}"
                (target / "result.json").write_text(json.dumps(result))
                (target / "samples.jsonl").symlink_to(template / "samples.jsonl")
            report = verify([str(folder)], thresholds)
            day = time.strftime("%Y-%m-%d", time.gmtime(1735689600 + night * 86400))
            record.record(store, report, record.Context(day, f"{day}T02:00:00Z"))
            shutil.rmtree(folder)
            if night % 50 == 0:
                print(f"  night {night + 1}/{sweeps} recorded", file=sys.stderr, flush=True)
    return history


def copy_history(source: Path, url: str) -> None:
    """The SQLite history's rows copied into a new PostgreSQL history, to time `history` on the
    same runs there (a copy, not a second recording of 73,000 runs)."""
    import sqlite3

    from evalgate.history import record
    from evalgate.history.store import open_history

    columns = ", ".join(record.RUN_COLUMNS)
    marks = ", ".join("?" for _ in record.RUN_COLUMNS)
    reader = sqlite3.connect(source)
    with open_history(url, create=True) as store:
        for table, names, holes in (
            ("runs", columns, marks),
            ("answers", "identity, result, questions", "?, ?, ?"),
        ):
            cursor = reader.execute(f"SELECT {names} FROM {table}")
            while chunk := cursor.fetchmany(2000):
                with store.transaction(f"copy {table}") as writer:
                    store.executemany(
                        writer,
                        f"INSERT INTO {table} ({names}) VALUES ({holes})",
                        chunk,
                    )
    reader.close()


def _history_row(name: str, command: list[str], runs: int, goal: float | None) -> str:
    timings = [timed(command, 0) for _ in range(runs)]
    walls = [t[0] for t in timings]
    wall = statistics.median(walls)
    met = ("yes" if wall <= goal else "**no**") if goal else ""
    return (
        f"| {name} | {wall:.2f} ({min(walls):.2f}-{max(walls):.2f}) | "
        f"{statistics.median(t[1] for t in timings):.2f} | {max(t[2] for t in timings):.0f} "
        f"| {f'<= {goal:g} s' if goal else ''} | {met} |"
    )


def history_rows(root: Path, configs: int, sweeps: int, runs: int) -> list[str]:
    started = time.perf_counter()
    history = build_history(root, configs, sweeps)
    built = time.perf_counter() - started
    megabytes = sum(p.stat().st_size for p in root.glob("history.db*")) / 2**20
    page = root / "trend.html"
    commands: tuple[tuple[str, list[str], float | None], ...] = (
        ("evalgate history H", [], 2.0),
        ("evalgate history H --json -", ["--json", "-"], None),
        ("evalgate history H --html FILE", ["--html", str(page)], 2.0),
        ("evalgate history H --where concurrency=1", ["--where", "concurrency=1"], None),
    )
    rows = [
        _history_row(f"SQLite: {name}", [*CLI, "history", str(history), *extra], runs, goal)
        for name, extra, goal in commands
    ]
    page_mb = page.stat().st_size / 2**20
    rows.append(
        f"| the page's size | {page_mb:.2f} MB | | | <= 5 MB | {'yes' if page_mb <= 5 else 'no'} |"
    )
    with postgres() as server:
        if server is not None:
            server.admin("CREATE DATABASE bench_long")  # type: ignore[attr-defined]
            url = server.url("bench_long")  # type: ignore[attr-defined]
            copy_history(history, url)
            rows += [
                _history_row(f"PostgreSQL: {name}", [*CLI, "history", url, *extra], runs, None)
                for name, extra, _ in commands
            ]
    note = (
        f"History: {configs} configs x {sweeps} sweeps = {configs * sweeps:,} runs with their "
        f"answers, {megabytes:,.0f} MiB on disk (SQLite), recorded in {built:.0f} s; on "
        "PostgreSQL the same rows, copied."
    )
    return [*rows, "", note]


HISTORY_HEADER = [
    "| command | wall s, median (min-max) | CPU s | peak MB | goal | met |",
    "| --- | --- | --- | --- | --- | --- |",
]


def section(configs: int, runs: int, history_configs: int, sweeps: int) -> str:
    """The BENCHMARKS.md section (benchmarks/suite.py --only history)."""
    with tempfile.TemporaryDirectory(prefix="evalgate-bench-history-") as name:
        root = Path(name)
        sweep(root, configs)
        total, files = size(root / "sweep")
        recording = record_rows(root, configs, runs)
    with tempfile.TemporaryDirectory(prefix="evalgate-bench-history-long-") as name:
        long = history_rows(Path(name), history_configs, sweeps, runs)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return "\n".join(
        [
            "## History: verify --record, and evalgate history over a year",
            "",
            f"`evalgate verify SWEEP -q --record HISTORY` over {configs:,} configs of full GSM8K "
            f"({files:,} files, {total / 2**20:,.0f} MiB, in the page cache), alone and with "
            "--record on each store; then `evalgate history` over "
            f"{history_configs} configs x {sweeps} sweeps "
            "(`python benchmarks/bench_history.py`).",
            "",
            f"- {stamp}; runs: {runs}; load average {os.getloadavg()[0]:.1f} on "
            f"{os.cpu_count()} cores when measured",
            "",
            *RECORD_HEADER,
            *recording,
            "",
            *HISTORY_HEADER,
            *long,
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--history-configs", type=int, default=200)
    parser.add_argument("--sweeps", type=int, default=365)
    args = parser.parse_args()
    print(section(args.configs, args.runs, args.history_configs, args.sweeps))


if __name__ == "__main__":
    main()
