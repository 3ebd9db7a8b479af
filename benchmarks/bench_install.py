"""What a user's install costs: the core (`verify`, `compare`, `context`, `probe`) and the core
with the eval extra (`run`, `hook`), each from the built wheel into a fresh virtualenv with an
empty pip cache, as a CI job starting from nothing would install it.

    python -m benchmarks.bench_install      (or: scripts/bench --only install)

Size is the growth of site-packages over a bare virtualenv's (`du -sk`), time the wall time of
`pip install`, packages the distributions pip installed (evalgate-bench included).
"""

from __future__ import annotations

import email
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import ROOT, commit, stamp

GOAL_MB, GOAL_S = 60, 20
"""The core's goal: a CI job that only runs `verify` installs at most this much this fast."""


@dataclass
class Install:
    name: str
    requirement: str
    requires: list[str]
    seconds: list[float]
    cpu_seconds: list[float]
    growth_mb: float
    packages: int
    load: tuple[float, float]
    """The 1-minute load average before the first install and after the last."""
    goal: str = ""
    met: bool | None = None


def core_requirements(wheel: Path) -> list[str]:
    """The core's requirements as the wheel declares them (no extra): the section records them,
    so a test can tell when they changed since they were measured."""
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(archive.read(name))
    return [r for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r]


def build_wheel(into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(into)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    [wheel] = into.glob("evalgate_bench-*.whl")
    return wheel


def site_packages(venv: Path) -> Path:
    [found] = venv.glob("lib/python*/site-packages")
    return found


def kilobytes(path: Path) -> int:
    done = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])


def install_once(tmp: Path, dist: Path, requirement: str) -> tuple[float, float, int, int]:
    """(wall seconds, CPU seconds, site-packages growth in kB, packages installed) for one
    fresh install. CPU time (pip's user + system) does not grow with the machine's load; wall
    time does, on a shared machine."""
    venv, cache = tmp / "venv", tmp / "pip-cache"
    shutil.rmtree(venv, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    bare = kilobytes(site_packages(venv))
    before = set(_installed(python))
    env = os.environ | {"PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    started, cpu = time.perf_counter(), _children_cpu()
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--cache-dir", str(cache),
         "--find-links", str(dist), requirement],
        check=True,
        env=env,
    )  # fmt: skip
    seconds, cpu = time.perf_counter() - started, _children_cpu() - cpu
    added = set(_installed(python)) - before
    return seconds, cpu, kilobytes(site_packages(venv)) - bare, len(added)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _installed(python: Path) -> list[str]:
    done = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "freeze"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


def measure(repeats: int) -> list[Install]:
    with tempfile.TemporaryDirectory(prefix="evalgate-install-") as name:
        tmp = Path(name)
        requires = core_requirements(build_wheel(tmp / "dist"))
        rows = []
        for label, requirement in (
            ("core: verify, compare, context, probe", "evalgate-bench"),
            ("core + eval extra: also run, hook", "evalgate-bench[eval]"),
        ):
            before = os.getloadavg()[0]
            runs = [install_once(tmp, tmp / "dist", requirement) for _ in range(repeats)]
            load = (before, os.getloadavg()[0])
            growth, packages = runs[-1][2], runs[-1][3]
            seconds, cpu = [r[0] for r in runs], [r[1] for r in runs]
            rows.append(
                Install(label, requirement, requires, seconds, cpu, growth / 1024, packages, load)
            )
        core = rows[0]
        core.goal = f"<= {GOAL_MB} MB, <= {GOAL_S} s"
        core.met = core.growth_mb <= GOAL_MB and max(core.seconds) <= GOAL_S
        return rows


def section(rows: list[Install], stamp: str, commit: str) -> str:
    lines = [
        "## Install: the core and the eval extra",
        "",
        "`pip install --find-links dist/ REQUIREMENT` of the built wheel into a fresh virtualenv "
        "with an empty pip cache (`--cache-dir` of its own; the packages come from the "
        "registry over the network); size is the growth of site-packages over a bare "
        "virtualenv's (`du -sk`), packages what pip installed, CPU s pip's user + system time "
        "(median), which the machine's load does not stretch as it does the wall time "
        "(`python -m benchmarks.bench_install`).",
        "",
        f"- commit: {commit}, {stamp}; {os.cpu_count()} cores; load: the 1-minute load "
        "average before the first install and after the last",
        f"- the core's requirements, as measured: {', '.join(rows[0].requires)}",
        "",
        "| install | requirement | median s | min s | max s | CPU s | MB | packages | load | goal "
        "| met |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        met = "" if r.met is None else ("yes" if r.met else "**no**")
        lines.append(
            f"| {r.name} | `{r.requirement}` | {statistics.median(r.seconds):.1f} | "
            f"{min(r.seconds):.1f} | {max(r.seconds):.1f} | "
            f"{statistics.median(r.cpu_seconds):.1f} | {r.growth_mb:.0f} | {r.packages} | "
            f"{r.load[0]:.1f}-{r.load[1]:.1f} | {r.goal} | {met} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    started = stamp()
    print(section(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 1), started, commit()))
