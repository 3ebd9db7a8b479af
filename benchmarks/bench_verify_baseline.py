"""Time `evalgate verify SWEEP --baseline BASELINE` over 1,000 config pairs of full GSM8K (1,319
questions, two filters), in evalgate's layout and in the harness's, beside `evalgate compare`
run once per pair (issue 32: at most 10 s for evalgate's layout on a 2-core machine).

    PYTHONPATH=. python benchmarks/bench_verify_baseline.py [--configs 1000] [--runs 3]
        [--compare-sample 20]

Each layout gets a fresh temporary tree: a baseline sweep and a candidate sweep of --configs
configs each (evalgate: result.json + samples.jsonl per run, as tests/compare/run_files.py
writes them; the harness: meta_env.json + lm-eval's results_*.json + samples_gsm8k_*.jsonl per
config, as tests/verify/sweeps.py writes them). Every candidate flips a few answers each way
(a rerun), one config loses 80 (a regression). The tree is read once before timing (the page
cache is warm); its size is printed. `evalgate verify` runs as a subprocess (the console entry
point, start-up included); `evalgate compare` is timed on --compare-sample pairs, one process
each, and scaled to all the pairs (said so in the output).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIME = shutil.which("time") or "/usr/bin/time"
sys.path.insert(0, str(ROOT))

from tests.verify.sweeps import (  # noqa: E402  (the tests' own writers, after the path)
    answers,
    baseline_answers,
    evalgate_sweep,
    harness_sweep,
)

DROPPED = 7


def _template(root: Path, layout: str, name: str, correct: list[bool]) -> Path:
    """One run written by the tests' writers (schema-checked), to be copied per config."""
    if layout == "evalgate":
        return evalgate_sweep(root, name, {1: correct}) / f"{name}-conc1"
    return harness_sweep(root / name, {1: correct}, stamp=name)


def _copy(template: Path, target: Path, layout: str, conc: int) -> None:
    """The template run as config `conc`: its files copied, its labels (and run id) its own."""
    shutil.copytree(template, target)
    if layout == "evalgate":
        result = json.loads((target / "result.json").read_text())
        result["labels"]["concurrency"] = result["eval"]["num_concurrent"] = conc
        result["run_id"] = f"{target.parent.name}-{conc}"
        (target / "result.json").write_text(json.dumps(result))
        return
    meta = json.loads((target / "meta_env.json").read_text())
    meta.update({"conc": conc, "eval_concs": [conc], "completed_eval_concs": [conc]})
    (target / "meta_env.json").write_text(json.dumps(meta))
    for path in target.glob("*_conc1.json*"):
        path.rename(path.with_name(path.name.replace("_conc1.", f"_conc{conc}.")))


def generate(root: Path, layout: str, configs: int) -> None:
    """The baseline and the candidate sweep of `configs` configs each: a handful of runs
    written by the tests' writers, copied per config (the files of full size)."""
    templates = root / "templates"
    base = _template(templates, layout, "base", baseline_answers())
    reruns = [_template(templates, layout, f"rerun{i}", answers(seed=i)) for i in range(7)]
    dropped = _template(templates, layout, "dropped", answers(lost=80))
    for conc in range(1, configs + 1):
        _copy(base, root / "base" / f"{conc:05d}", layout, conc)
        source = dropped if conc == DROPPED else reruns[conc % 7]
        _copy(source, root / "cand" / f"{conc:05d}", layout, conc)
    shutil.rmtree(templates)
    (root / "thresholds.json").write_text(json.dumps({"default": {"gsm8k": 0.85}}))


def size(root: Path) -> tuple[int, int]:
    """Bytes and files under root, every file read once (the page cache is then warm)."""
    total = files = 0
    for folder, _, names in os.walk(root):
        for name in names:
            total += len(Path(folder, name).read_bytes())
            files += 1
    return total, files


def timed(command: list[str], *expect: int, root: Path = ROOT) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds: user + system, peak RSS MiB) of one run of `command`, with
    the evalgate of the checkout at `root` (first on the path; run from a neutral folder, so
    that `python -m` finds no other)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("GITHUB_ACTIONS", None)
    # /usr/bin/time gives this command's own peak: the children's maximum resource.getrusage
    # keeps would be the largest child the calling process ever ran (lm-eval, in the suite).
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        timed_command = [TIME, "-o", report.name, "-f", "%e %U %S %M", *command]
        done = subprocess.run(
            timed_command,
            capture_output=True,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),
            check=False,
        )
        if done.returncode not in expect:
            sys.exit(f"{command[3:5]} exited {done.returncode}: {done.stdout[-500:]}{done.stderr}")
        wall, user, system, peak_kb = Path(report.name).read_text().split()[-4:]
    return float(wall), float(user) + float(system), int(peak_kb) / 1024


HEADER = [
    "| layout | files | verify --baseline: wall s, median (min-max) | CPU s, median (min) "
    "| peak MB | goal | met | evalgate compare once per pair, scaled: wall s, CPU s |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
]


def measure(layout: str, configs: int, runs: int, sample: int) -> str:
    """One table row: `verify --baseline` over `configs` pairs in `layout`, and compare once
    per pair timed on `sample` pairs and scaled (evalgate's layout only: compare reads no other)."""
    cli = [sys.executable, "-m", "evalgate.cli"]
    root = Path(tempfile.mkdtemp(prefix=f"evalgate-bench-baseline-{layout}-"))
    try:
        generate(root, layout, configs)
        total, files = size(root)
        verify = [*cli, "verify", str(root / "cand"), "--baseline", str(root / "base")]
        verify += ["--thresholds", str(root / "thresholds.json"), "--no-github", "-q"]
        timings = [timed(verify, 1) for _ in range(runs)]
        walls, cpus = [t[0] for t in timings], [t[1] for t in timings]
        pairs = sorted(os.listdir(root / "cand"))[:sample] if layout == "evalgate" else []
        each = [
            timed([*cli, "compare", str(root / "base" / p), str(root / "cand" / p)], 0, 1)
            for p in pairs
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    goal = "<= 10 s" if layout == "evalgate" else ""
    met = ("yes" if wall <= 10 else "**no**") if goal else ""
    scaled = "-"
    if each:
        one = statistics.median(e[0] for e in each), statistics.median(e[1] for e in each)
        scaled = f"{one[0] * configs:.0f}, {one[1] * configs:.0f} ({len(each)} pairs x {configs})"
    return (
        f"| {layout} | {files:,}, {total / 2**20:,.0f} MiB | {wall:.2f} ({min(walls):.2f}-"
        f"{max(walls):.2f}) | {cpu:.2f} ({min(cpus):.2f}) | {max(t[2] for t in timings):.0f} "
        f"| {goal} | {met} | {scaled} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--compare-sample", type=int, default=20)
    parser.add_argument("--layouts", nargs="+", default=["evalgate", "harness"])
    args = parser.parse_args()
    print(f"{args.configs} config pairs of full GSM8K (1319 questions x 2 filters) per layout")
    print("\n".join(HEADER), flush=True)
    for layout in args.layouts:
        print(measure(layout, args.configs, args.runs, args.compare_sample), flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores after the runs")


if __name__ == "__main__":
    main()
