"""Time the history (issue 48): what `evalgate verify --record` adds over 1,000 configs of full
GSM8K, on SQLite and on PostgreSQL; and `evalgate history` with its table, its JSON document and
its page over 200 configs x 365 sweeps (goals: --record adds <= 5 s on SQLite; history and its
page <= 2 s each, the page <= 5 MB). With --against CHECKOUT, every command is also timed with
that checkout's evalgate (its code first on the path, as scripts/bench --against does), beside
this one's, as ratios.

    PYTHONPATH=. python benchmarks/bench_history.py [--configs 1000] [--runs 3]
        [--history-configs 200] [--sweeps 365] [--against CHECKOUT] [--long DIR]

The sweep: a handful of runs written by the tests' writer (result.json + samples.jsonl, 1,319
questions, two filters; samples.jsonl rewritten by evalgate's writer, every key present and each
question's prompt digest a sha256 of its own, as a run writes it),
copied per config with its own run id and concurrency; the files are read once before timing
(the page cache is warm). `evalgate verify SWEEP -q` is timed alone and with `--record` into a
new history (each run its own), as a subprocess; the difference is what --record adds, which is
then split, in a process of each checkout: reading each run's answers (its samples.jsonl, through
the one JSON reader) and the rest (building, compressing, writing in one transaction).
PostgreSQL is a server started here on a loopback port (tests/history/conftest.py; needs root
and Debian's postgresql-15), with its defaults (fsync on).

The long history is built through the recording path: each night's sweep of --history-configs
configs is gated (evalgate.verify.sweep.verify) and recorded (evalgate.history.record.record,
what `verify --record` calls) with its per-question answers; one result.json per run, its
samples.jsonl a link to one of a few templates (the answers differ between templates; a few
nights regress or fail). The other checkout reads the same rows: where its schema is 2, in a
copy without the index schema 3 added (all schema 3 changed). Then `evalgate history H`,
`--json -` and `--html FILE` are timed as subprocesses. With --long DIR it is built in DIR
and kept, or, when DIR holds one already, read from there (building takes about 15 minutes:
build it once, then time this checkout and --against on the same rows).
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_verify_baseline import _copy, _template, size, timed  # noqa: E402
from benchmarks.common import git_commit, stamp  # noqa: E402
from tests.verify.sweeps import answers, baseline_answers  # noqa: E402

CLI = [sys.executable, "-m", "evalgate.cli"]
THRESHOLDS = {"default": {"gsm8k": 0.85}}
INDEXED = 3
"""The schema that added the index `history` reads runs in order by, and nothing else."""


@dataclass(frozen=True)
class Build:
    """An evalgate to time: its checkout (first on the path) and what to call it."""

    label: str
    root: Path

    def schema(self) -> int:
        code = "from evalgate.history.store import SCHEMA_VERSION; print(SCHEMA_VERSION)"
        done = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONPATH": str(self.root)},
            capture_output=True,
            text=True,
            check=True,
        )
        return int(done.stdout)


def _real_hashes(run: Path) -> None:
    """The run's samples.jsonl as a run writes it: by evalgate's writer (every key present), its
    prompt digests sha256 hex, each its own (the tests' writer writes the doc_id padded with
    zeros, and only some keys)."""
    from msgspec import structs

    from evalgate.evidence.artifacts import read_samples, write_samples

    samples = read_samples(run / "samples.jsonl")
    digest = hashlib.sha256
    write_samples(
        run,
        [
            structs.replace(s, prompt_sha256=digest(f"{run.name}:{s.doc_id}".encode()).hexdigest())
            for s in samples
        ],
    )


def _templates(root: Path, kinds: list[list[bool]]) -> list[Path]:
    runs = [_template(root, "evalgate", f"t{i}", kind) for i, kind in enumerate(kinds)]
    for run in runs:
        _real_hashes(run)
    return runs


def sweep(root: Path, configs: int) -> Path:
    """One sweep of `configs` full GSM8K runs (evalgate's layout)."""
    templates = root / "templates"
    runs = _templates(templates, [answers(seed=i) for i in range(7)])
    for conc in range(1, configs + 1):
        _copy(runs[conc % 7], root / "sweep" / f"{conc:05d}", "evalgate", conc)
    shutil.rmtree(templates)
    (root / "thresholds.json").write_text(json.dumps(THRESHOLDS))
    return root / "sweep"


def verify_command(root: Path) -> list[str]:
    thresholds = str(root / "thresholds.json")
    return [*CLI, "verify", str(root / "sweep"), "--thresholds", thresholds, "--no-github", "-q"]


SPLIT = """
import sys, time
from pathlib import Path
from evalgate.history import record
from evalgate.history.store import open_history
from evalgate.thresholds import load_thresholds
from evalgate.verify.sweep import verify
root = Path(sys.argv[1])
report = verify([str(root / "sweep")], load_thresholds(root / "thresholds.json"))
entries = record.recordable(report)
clock = time.process_time
started = clock()
given = (record.Digests(),) if hasattr(record, "Digests") else ()  # an older one: the entry
for entry in entries:
    record.read_answers(entry, *given)
reading = clock() - started
with open_history(str(root / "split.db"), create=True) as store:
    started = clock()
    record.record(store, report, record.Context("split", record.now()))
    whole = clock() - started
(root / "split.db").unlink()
print(reading, whole - reading)
"""
"""In a process of the checkout timed: CPU seconds reading the runs' answers (their samples.jsonl
read into the answers kept), and the rest of one record of the sweep into a new SQLite history
(the rows built, compressed and written)."""


def split(root: Path, build: Build) -> tuple[float, float]:
    done = subprocess.run(
        [sys.executable, "-c", SPLIT, str(root)],
        env={**os.environ, "PYTHONPATH": str(build.root)},
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=True,
    )
    reading, writing = done.stdout.split()
    return float(reading), float(writing)


@contextlib.contextmanager
def postgres() -> Iterator[object | None]:
    from tests.history import conftest

    if conftest.unavailable() is not None:
        yield None
        return
    with conftest.running_postgres() as server:
        yield server


Timings = list[tuple[float, float, float]]
"""(wall s, CPU s, peak MiB) of each run of one command."""


def _median(timings: Timings, what: int) -> float:
    return statistics.median(t[what] for t in timings)


def _cell(timings: Timings) -> str:
    walls = [t[0] for t in timings]
    return f"{statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f})"


def _ratio(ours: Timings, theirs: Timings | None) -> str:
    if not theirs:
        return ""
    return (
        f"{_median(ours, 0) / _median(theirs, 0):.2f} / {_median(ours, 1) / _median(theirs, 1):.2f}"
    )


def record_rows(root: Path, configs: int, runs: int, builds: list[Build]) -> list[str]:
    """The --record table: verify alone, with --record on each store, and again (nothing new),
    for each checkout; then what --record adds, split in two."""
    measured: dict[tuple[str, str], Timings] = {}
    command = verify_command(root)
    with postgres() as server:
        for index in range(runs):  # the checkouts in turn, so that both see the same load
            for build in builds:
                own = root / build.label
                own.mkdir(exist_ok=True)
                fresh, first = own / f"h{index}.db", own / "h0.db"
                timings = {
                    "alone": timed(command, 0, root=build.root),
                    "sqlite": timed([*command, "--record", str(fresh)], 0, root=build.root),
                    "sqlite again": timed([*command, "--record", str(first)], 0, root=build.root),
                }
                if server is not None:
                    name = f"bench_{build.label}_{index}"
                    server.admin(f"CREATE DATABASE {name}")  # type: ignore[attr-defined]
                    url = server.url(name)  # type: ignore[attr-defined]
                    timings["pg"] = timed([*command, "--record", url], 0, root=build.root)
                    timings["pg again"] = timed([*command, "--record", url], 0, root=build.root)
                for key, timing in timings.items():
                    measured.setdefault((build.label, key), []).append(timing)
    ours, theirs = builds[0].label, builds[-1].label if len(builds) > 1 else None
    names = {
        "alone": "verify, no --record",
        "sqlite": "verify --record, a new SQLite history",
        "sqlite again": "verify --record again, nothing new (SQLite)",
        "pg": "verify --record, a new PostgreSQL history",
        "pg again": "verify --record again, nothing new (PostgreSQL)",
    }
    rows = []
    for key, name in names.items():
        if (ours, key) not in measured:
            continue
        mine = measured[ours, key]
        other = measured.get((theirs, key)) if theirs else None
        added = ""
        goal = met = ""
        if key != "alone":
            extra = _median(mine, 0) - _median(measured[ours, "alone"], 0)
            extra_cpu = _median(mine, 1) - _median(measured[ours, "alone"], 1)
            added = f"{extra:+.2f} ({extra_cpu:+.2f})"
            if key == "sqlite":
                goal, met = "<= 5 s added", "yes" if extra <= 5 else "**no**"
        beside = f"{_cell(other)} | {_median(other, 1):.2f}" if other else " | "
        rows.append(
            f"| {name} | {_cell(mine)} | {_median(mine, 1):.2f} | {added} | {beside} "
            f"| {_ratio(mine, other)} | {goal} | {met} |"
        )
    for build in builds:
        reading, writing = split(root, build)
        rows.append(
            f"| of which, in-process ({build.label}): reading the runs' answers / building "
            f"and writing, CPU s | {reading:.2f} / {writing:.2f} | | | | | | | |"
        )
    return rows


def header(builds: list[Build], fourth: str) -> list[str]:
    """A table's head: this checkout's figures, then `fourth` (the --record table's time
    added, the history table's peak), then the other checkout's beside them."""
    theirs = builds[-1].label if len(builds) > 1 else "-"
    return [
        f"| command | {builds[0].label}: wall s, median (min-max) | CPU s | {fourth} "
        f"| {theirs}: wall s | CPU s | ratio: wall / CPU | goal | met |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
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
    runs = _templates(templates, kinds)
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
    from evalgate.history import record
    from evalgate.history.store import open_history

    columns = (*record.CONFIG_COLUMNS, *record.RUN_COLUMNS)
    reader = sqlite3.connect(source)
    with open_history(url, create=True) as store:
        for table, names in (("runs", columns), ("answers", ("identity", "result", "questions"))):
            listed = ", ".join(names)
            holes = ", ".join("?" for _ in names)
            cursor = reader.execute(f"SELECT {listed} FROM {table}")  # our names
            while chunk := cursor.fetchmany(2000):
                with store.transaction(f"copy {table}") as writer:
                    store.executemany(
                        writer,
                        f"INSERT INTO {table} ({listed}) VALUES ({holes})",
                        chunk,
                    )
    reader.close()


def as_schema(location: str, version: int) -> None:
    """A history of schema 3 made what an evalgate of `version` (2 or 3) reads: schema 3 only
    added the index runs_in_order, so without it, and its version set, it is schema 2's."""
    if version == INDEXED:
        return
    if version != INDEXED - 1:
        sys.exit(f"the other checkout's history schema is {version}: this bench reads 2 or 3")
    statements = ("DROP INDEX runs_in_order", "UPDATE evalgate_history SET value = '2'")
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location) as connection:
            for statement in statements:
                connection.execute(statement)  # type: ignore[arg-type]
        return
    with sqlite3.connect(location) as connection:
        for statement in statements:
            connection.execute(statement)


HistoryCommand = tuple[str, list[str], float | None]
"""A row of the history table: its name, the flags after `evalgate history H`, its goal (s)."""


def history_rows(
    root: Path, configs: int, sweeps: int, runs: int, builds: list[Build]
) -> list[str]:
    """The history table: each command over the long history on SQLite (and the page's size),
    then on PostgreSQL where a server can start here."""
    history, built = long_history(root, configs, sweeps, builds[0])
    megabytes = sum(p.stat().st_size for p in root.glob("history.db*")) / 2**20
    page = root / "trend.html"
    commands: tuple[HistoryCommand, ...] = (
        ("evalgate history H", [], 2.0),
        ("evalgate history H --json -", ["--json", "-"], None),
        ("evalgate history H --html FILE", ["--html", str(page)], 2.0),
        ("evalgate history H --where concurrency=1", ["--where", "concurrency=1"], None),
    )
    sqlite_at = sqlite_copies(root, history, builds)
    rows = command_rows("SQLite", sqlite_at, commands, runs, builds, goals=True)
    page_mb = page.stat().st_size / 2**20
    rows.append(
        f"| the page's size | {page_mb:.2f} MB | | | | | | <= 5 MB "
        f"| {'yes' if page_mb <= 5 else '**no**'} |"
    )
    with postgres() as server:
        if server is not None:
            pg_at = postgres_copies(server, history, builds)
            rows += command_rows("PostgreSQL", pg_at, commands, runs, builds, goals=False)
    note = (
        f"History: {configs} configs x {sweeps} sweeps = {configs * sweeps:,} runs with their "
        f"answers, {megabytes:,.0f} MiB on disk (SQLite), {built}; every checkout reads the "
        "same rows (on PostgreSQL, copied)."
    )
    return [*rows, "", note]


def long_history(root: Path, configs: int, sweeps: int, build: Build) -> tuple[Path, str]:
    """The long history in `root` (built there unless it holds one of `configs` x `sweeps`
    already), and how it was built, as the table's note says it."""
    history, made = root / "history.db", root / "built.json"
    if history.exists() and made.exists():
        told = json.loads(made.read_text())
        if (told["configs"], told["sweeps"]) != (configs, sweeps):
            sys.exit(
                f"{root} holds a history of {told['configs']} x {told['sweeps']}, not "
                f"{configs} x {sweeps}: pass another --long folder"
            )
    else:
        started = time.perf_counter()
        build_history(root, configs, sweeps)
        told = {
            "configs": configs,
            "sweeps": sweeps,
            "by": build.label,
            "seconds": round(time.perf_counter() - started),
        }
        made.write_text(json.dumps(told))
    return history, f"recorded in {told['seconds']} s by {told['by']}"


def sqlite_copies(root: Path, history: Path, builds: list[Build]) -> dict[str, str]:
    """A copy of the history for each checkout, at its schema, by label."""
    at = {}
    for build in builds:
        copy = root / f"history-{build.label}.db"
        shutil.copyfile(history, copy)
        as_schema(str(copy), build.schema())
        at[build.label] = str(copy)
    return at


def postgres_copies(server: object, history: Path, builds: list[Build]) -> dict[str, str]:
    """The history copied into a database of the server for each checkout, at its schema."""
    at = {}
    for build in builds:
        name = f"bench_long_{build.label}"
        server.admin(f"CREATE DATABASE {name}")  # type: ignore[attr-defined]
        at[build.label] = server.url(name)  # type: ignore[attr-defined]
        copy_history(history, at[build.label])
        as_schema(at[build.label], build.schema())
    return at


def command_rows(
    store: str,
    at: dict[str, str],
    commands: tuple[HistoryCommand, ...],
    runs: int,
    builds: list[Build],
    *,
    goals: bool,
) -> list[str]:
    """A row for each command, timed `runs` times by each checkout on its copy in `store`."""
    found = []
    for name, extra, goal in commands:
        timings: dict[str, Timings] = {b.label: [] for b in builds}
        for _ in range(runs):  # the checkouts in turn, so that both see the same load
            for b in builds:
                command = [*CLI, "history", at[b.label], *extra]
                timings[b.label].append(timed(command, 0, root=b.root))
        mine = timings[builds[0].label]
        other = timings[builds[-1].label] if len(builds) > 1 else None
        wall = _median(mine, 0)
        met = ("yes" if wall <= goal else "**no**") if goal and goals else ""
        beside = f"{_cell(other)} | {_median(other, 1):.2f}" if other else " | "
        found.append(
            f"| {store}: {name} | {_cell(mine)} | {_median(mine, 1):.2f} "
            f"| {max(t[2] for t in mine):.0f} | {beside} | {_ratio(mine, other)} "
            f"| {f'<= {goal:g} s' if goal and goals else ''} | {met} |"
        )
    return found


def section(
    configs: int,
    runs: int,
    history_configs: int,
    sweeps: int,
    *,
    against: Path | None = None,
    keep: Path | None = None,
) -> str:
    """The BENCHMARKS.md section (benchmarks/suite.py --only history [--against CHECKOUT])."""
    builds = [Build(git_commit(ROOT, otherwise=ROOT.name), ROOT)]
    if against is not None:
        other = against.resolve()
        builds.append(Build(git_commit(other, otherwise=other.name), other))
    for build in builds:  # as an installed package's (suite.py): no timed start compiles them
        compileall.compile_dir(build.root / "evalgate", quiet=1)
    load = os.getloadavg()[0]
    recording: list[str] = []
    total = files = 0
    if configs:  # --configs 0: the history table alone
        with tempfile.TemporaryDirectory(prefix="evalgate-bench-history-") as name:
            root = Path(name)
            sweep(root, configs)
            total, files = size(root / "sweep")
            recording = [
                *header(builds, "added s: wall (CPU)"),
                *record_rows(root, configs, runs, builds),
                "",
            ]
    long: list[str] = []
    if sweeps:  # --sweeps 0: the --record table alone
        with contextlib.ExitStack() as stack:
            folder = keep
            if folder is None:
                temporary = tempfile.TemporaryDirectory(prefix="evalgate-bench-history-long-")
                folder = Path(stack.enter_context(temporary))
            folder.mkdir(parents=True, exist_ok=True)
            long = [
                *header(builds, "peak MB"),
                *history_rows(folder, history_configs, sweeps, runs, builds),
            ]
    beside = (
        f"; beside it {builds[1].label} (`--against`), timed by the same commands right after "
        "it, and the ratio of this checkout's medians to its"
        if len(builds) > 1
        else ""
    )
    timed_ = []
    if configs:
        timed_.append(
            f"`evalgate verify SWEEP -q --record HISTORY` over {configs:,} configs of full GSM8K "
            f"({files:,} files, {total / 2**20:,.0f} MiB, in the page cache), alone and with "
            "--record on each store"
        )
    if sweeps:
        timed_.append(f"`evalgate history` over {history_configs} configs x {sweeps} sweeps")
    flags = {
        "--configs 0": not configs,
        "--sweeps 0": not sweeps,
        "--against CHECKOUT": against,
        "--long DIR": keep,
    }
    command = " ".join(
        ["python benchmarks/bench_history.py", *(f for f, on in flags.items() if on)]
    )
    return "\n".join(
        [
            "## History: verify --record, and evalgate history over a year",
            "",
            f"{'; then '.join(timed_)} (`{command}`).",
            "",
            f"- {builds[0].label}, {stamp()}; runs: {runs}; load average {load:.1f} at the "
            f"start, {os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} cores{beside}",
            "",
            *recording,
            *long,
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=1000, help="0: time history alone")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--history-configs", type=int, default=200)
    parser.add_argument("--sweeps", type=int, default=365, help="0: time --record alone")
    parser.add_argument("--against", type=Path, metavar="CHECKOUT")
    parser.add_argument(
        "--long", type=Path, metavar="DIR", help="build the long history here, or reuse it"
    )
    args = parser.parse_args()
    print(
        section(
            args.configs,
            args.runs,
            args.history_configs,
            args.sweeps,
            against=args.against,
            keep=args.long,
        )
    )


if __name__ == "__main__":
    main()
