"""evalgate's benchmark suite: what users run today, side by side with evalgate, as ratios.

    scripts/bench              (or: python -m benchmarks.suite [--quick])

Every figure is the median of repeated runs with its min and max; a ratio wherever there is an
alternative to compare with. Everything runs on this machine against loopback servers
(tests/fakeengine.py). Rewrites BENCHMARKS.md with the table, the machine and the commit.

1. Time to verdict on a misconfigured budget (every request rejected as vLLM does when
   max_tokens > max_model_len): `evalgate run` vs the benchmark harness's lm-eval invocation.
2. Eval overhead on full GSM8K against an engine with a fixed latency and a concurrency cap, so
   the ideal wall time is known: evalgate and plain lm-eval, each over the ideal.
3. `evalgate verify` over 10,000 and 100,000 artifacts, `evalgate compare` on full GSM8K.
4. Start-up of `evalgate --help`, `evalgate context`, `evalgate verify` on one file, and
   whether any of them imports lm-eval.
5. Early stop: wall time to a verdict with and without `--early-stop both` against engines at
   0.97 and 0.0 with a fixed latency (its own section of BENCHMARKS.md).
6. The simulated operating characteristics of the sequential gate and of compare's rule
   (tests/simulation.py, the figures tests/gate/test_sequential.py and
   tests/compare/test_paired.py assert; its own section).

7. `verify --baseline` over 1,000 config pairs of full GSM8K in each layout, beside `evalgate
   compare` once per pair (its own section).
8. Fitted floors: the beta-binomial policy beside the harness's rule over simulated nightly
   refits (benchmarks/floors_sim.py, the table tests/history/test_fit.py checks; its own section).
9. A user's install from the built wheel, the core and the core with the eval extra: size, time
   with an empty pip cache, packages (benchmarks/bench_install.py; its own section).
10. The history: what `verify --record` adds over 1,000 configs of full GSM8K (SQLite and
    PostgreSQL), and `evalgate history` and its page over 200 configs x 365 sweeps (its own
    section).

`--only early-stop`, `--only simulation`, `--only verify-baseline`, `--only floors`, `--only
install` and `--only history` rewrite just their section of BENCHMARKS.md; `--only table` measures
the main table (1 to 4) and rewrites it, keeping every section as it was; the other `--only`
measurements leave the file unchanged.
"""

from __future__ import annotations

import argparse
import compileall
import functools
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from benchmarks import floors_sim
from benchmarks.bench_compare import write_run
from benchmarks.bench_verify import generate
from benchmarks.common import ROOT, commit, git_commit, replace_section, stamp
from evalgate.tasks.spec import load_task
from tests import simulation
from tests.fakeengine import EngineBehaviour, FakeEngine

BIN = Path(sys.executable).parent
EVALGATE = str(BIN / "evalgate")
LM_EVAL = str(BIN / "lm_eval")
TIME = shutil.which("time") or "/usr/bin/time"


@dataclass
class Row:
    """One measured figure."""

    name: str
    seconds: list[float]
    goal: str = ""
    met: bool | None = None
    ratio: str = ""
    peak_mb: float | None = None
    note: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


@dataclass(frozen=True)
class Build:
    """An evalgate to time: this checkout's installed command, or another checkout's beside it
    (--against), run from a neutral folder with that checkout first on the path, by that
    checkout's own interpreter where it has a .venv (its dependencies may differ from ours)."""

    label: str
    root: Path | None = None

    @property
    def python(self) -> str:
        own = self.root / ".venv" / "bin" / "python" if self.root else None
        return str(own) if own and own.exists() else sys.executable

    def command(self, *args: str) -> list[str]:
        if self.root is None:
            return [EVALGATE, *args]
        return [self.python, "-m", "evalgate.cli", *args]

    @property
    def env(self) -> dict[str, str] | None:
        return None if self.root is None else {**os.environ, "PYTHONPATH": str(self.root)}

    def has(self, command: str) -> bool:
        """Whether this build has `command` (an older checkout may lack a newer one's)."""
        asked = subprocess.run(
            self.command(command, "--help"),
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            check=False,
        )
        return asked.returncode == 0

    @property
    def cwd(self) -> Path | None:
        return None if self.root is None else Path(tempfile.gettempdir())


HERE = Build("this checkout")


def over_builds(builds: list[Build], measure: Callable[[Build], Row]) -> list[Row]:
    """One measurement for each build; the second, if any, set beside the first."""
    rows = [measure(build) for build in builds]
    return rows if len(rows) == 1 else beside(rows[0], rows[1], builds[1].label)


def beside(ours: Row, theirs: Row, label: str) -> list[Row]:
    """Our row with the other checkout's figures in its note, then theirs, named by commit."""
    theirs.name = f"{theirs.name} [{label}]"
    theirs.goal, theirs.met = "", None
    ratio = ours.median / theirs.median
    ours.note = "; ".join(
        x for x in (ours.note, f"{label}: {theirs.median:.3f} s ({ratio:.2f}x its time)") if x
    )
    return [ours, theirs]


def timed(
    command: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall seconds and peak RSS (MB) of one command, through /usr/bin/time."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        started = time.monotonic()
        done = subprocess.run(
            [TIME, "-o", report.name, "-f", "%M", *command],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.monotonic() - started
        lines = [x for x in Path(report.name).read_text().split() if x.isdigit()]
    peak = int(lines[-1]) / 1024 if lines else math.nan
    return wall, peak, done


def expect(
    done: subprocess.CompletedProcess[str],
    code: int,
    says: str | tuple[str, ...],
    *,
    stream: str = "stdout",
) -> None:
    """A timed command must have done its job: the exit code and the line that shows it (one of
    `says`). Timing a crash as a fast start-up is the mistake this guards against."""
    output = done.stdout if stream == "stdout" else done.stderr
    lines = (says,) if isinstance(says, str) else says
    shown = any(line in output for line in lines)
    if done.returncode != code or not shown:
        raise AssertionError(
            f"{' '.join(done.args[4:])!r} exited {done.returncode} (expected {code}) and its "
            f"{stream} {'holds' if shown else 'lacks'} {' or '.join(map(repr, lines))}; "
            f"stderr: {done.stderr[-2000:]}"
        )


def repeat(times: int, run: Callable[[int], tuple[float, float]]) -> tuple[list[float], float]:
    walls, peaks = [], []
    for index in range(times):
        wall, peak = run(index)
        walls.append(wall)
        peaks.append(peak)
    return walls, max(peaks)


def measured(
    times: int,
    command: Callable[[int], list[str]],
    code: int,
    says: str | tuple[str, ...],
    *,
    stream: str = "stdout",
    build: Build = HERE,
) -> tuple[list[float], float]:
    """The walls of `times` runs of a command (the i-th run's `command(i)`) by `build`, each
    checked to have done its job (`expect`), and their peak RSS (MB)."""

    def run(i: int) -> tuple[float, float]:
        wall, peak, done = timed(command(i), env=build.env, cwd=build.cwd)
        expect(done, code, says, stream=stream)
        return wall, peak

    return repeat(times, run)


def harness_task(tmp: Path, api: str = "chat") -> Path:
    """evalgate's task file with absolute data paths, for the plain lm-eval CLI."""
    folder = tmp / "tasks"
    folder.mkdir(exist_ok=True)
    spec = load_task(api)
    config = dict(spec.config)
    data = ROOT / "evalgate" / "tasks" / "data" / "gsm8k"
    config["dataset_kwargs"] = {
        "data_files": {"train": str(data / "train.jsonl"), "test": str(data / "test.jsonl")}
    }
    (folder / f"{spec.name}.yaml").write_text(yaml.safe_dump(config))
    return folder


def lm_eval_command(
    url: str, tasks: Path, *, max_tokens: int, concurrent: int, out: Path
) -> list[str]:
    """The benchmark harness's invocation (REFERENCE §3), on evalgate's task file."""
    return [
        LM_EVAL,
        "run",
        "--model",
        "local-chat-completions",
        "--model_args",
        f"model=fake-model,base_url={url}/chat/completions,num_concurrent={concurrent},"
        "max_retries=5,timeout=1800,tokenized_requests=False,tokenizer_backend=none",
        "--tasks",
        "gsm8k_evalgate_chat",
        "--include_path",
        str(tasks),
        "--apply_chat_template",
        "--gen_kwargs",
        f"max_tokens={max_tokens},temperature=0",
        "--output_path",
        str(out),
    ]


def evalgate_run(url: str, model: str, out: Path, *extra: str, build: Build = HERE) -> list[str]:
    """`evalgate run` as the benchmarks call it: ISL 8192, OSL 1024, into `out`."""
    return [
        *build.command("run"),
        "--base-url",
        url,
        "--model",
        model,
        "--isl",
        "8192",
        "--osl",
        "1024",
        "--output-dir",
        str(out),
        *extra,
    ]


def incident(tmp: Path, repeats: int, harness_repeats: int, builds: list[Build]) -> list[Row]:
    """Served 9472, budget 12288: time until each tool gives up, and requests sent."""
    with FakeEngine(EngineBehaviour(max_model_len=9472)) as engine:
        rows = over_builds(builds, lambda build: incident_evalgate(tmp, engine, build, repeats))
        engine.clear()
        theirs = incident_lm_eval(tmp, engine, harness_repeats)
    ratio = theirs.median / rows[0].median
    rows[0].goal, rows[0].ratio = "< 3 s, >= 30x faster", f"{ratio:.1f}x faster"
    rows[0].met = rows[0].median < 3 and ratio >= 30
    return [*rows, theirs]


def incident_evalgate(tmp: Path, engine: FakeEngine, build: Build, repeats: int) -> Row:
    """`evalgate run` on the misconfigured budget: it stops at the probe."""
    engine.clear()
    walls, peak = measured(
        repeats,
        lambda i: evalgate_run(
            engine.url,
            "fake-model",
            tmp / f"incident-{build.label}-{i}",
            "--max-tokens",
            "12288",
            build=build,
        ),
        3,
        "ProbeError: The engine rejected the pre-flight request",
        stream="stderr",
        build=build,
    )
    return Row(
        "misconfigured budget: evalgate run (exit 3 at the probe)",
        walls,
        peak_mb=peak,
        note=f"{engine.total / repeats:.0f} request(s) sent",
    )


def incident_lm_eval(tmp: Path, engine: FakeEngine, repeats: int) -> Row:
    """lm-eval as the harness runs it on the misconfigured budget: every request rejected."""
    tasks = harness_task(tmp)
    walls, peak = measured(
        repeats,
        lambda i: lm_eval_command(
            engine.url, tasks, max_tokens=12288, concurrent=64, out=tmp / f"harness-incident-{i}"
        ),
        1,
        # REFERENCE §2: lm-eval 0.4.13 ends this storm with "RuntimeError: Session is closed",
        # or, when a retry's 400 is the last thing raised, with that 400
        ("RuntimeError: Session is closed", "400, message='Bad Request'"),
        stream="stderr",
    )
    return Row(
        "misconfigured budget: lm-eval as the harness runs it",
        walls,
        peak_mb=peak,
        note=f"{engine.total / repeats:.0f} rejected requests sent",
    )


def real_engine_incident(tmp: Path, repeats: int, url: str, model: str) -> list[Row]:
    """The misconfigured budget against a real engine (scripts/engine-up single)."""
    walls, peak = measured(
        repeats,
        lambda i: evalgate_run(url, model, tmp / f"engine-incident-{i}", "--max-tokens", "12288"),
        3,
        "ProbeError: The engine rejected the pre-flight request",
        stream="stderr",
    )
    return [
        Row(
            "misconfigured budget on the real stack (vLLM CPU + vllm-router): evalgate run",
            walls,
            goal="< 3 s",
            met=statistics.median(walls) < 3,
            peak_mb=peak,
            note=f"served by {url.rsplit('//', maxsplit=1)[-1]}",
        )
    ]


def overhead(tmp: Path, repeats: int, quick: bool, builds: list[Build]) -> list[Row]:
    """Full GSM8K against a 64-slot engine with a fixed latency: wall over the ideal."""
    concurrency = 64
    batches = math.ceil(1319 / concurrency)
    latency = (10.0 if quick else 60.0) / batches
    ideal = batches * latency
    # A streamed answer starts at once, as vLLM's does (its role chunk before any token): the
    # probe, closed at its first event, costs a round trip, not a whole answer.
    behaviour = EngineBehaviour(
        max_model_len=9472,
        latency_s=latency,
        max_concurrency=concurrency,
        stream_starts_at_once=True,
    )
    with FakeEngine(behaviour) as engine:
        rows = over_builds(
            builds,
            lambda build: overhead_evalgate(
                tmp, engine, build, repeats, concurrency=concurrency, ideal=ideal
            ),
        )
        theirs = overhead_lm_eval(tmp, engine, repeats, concurrency=concurrency, ideal=ideal)
    ours_ratio = rows[0].median / ideal
    theirs_ratio = theirs.median / ideal
    rows[0].goal = "<= 1.06x ideal, no slower than lm-eval"
    rows[0].met = ours_ratio <= 1.06 and ours_ratio <= theirs_ratio
    return [*rows, theirs]


def overhead_evalgate(
    tmp: Path, engine: FakeEngine, build: Build, repeats: int, *, concurrency: int, ideal: float
) -> Row:
    """`evalgate run` on full GSM8K with as many requests in flight as the engine serves."""
    walls, peak = measured(
        repeats,
        lambda i: evalgate_run(
            engine.url,
            "fake-model",
            tmp / f"overhead-{build.label}-{i}",
            "--num-concurrent",
            str(concurrency),
            build=build,
        ),
        0,
        "PASS: strict-match 1.0000 ",
        build=build,
    )
    return Row(
        f"full GSM8K, ideal {ideal:.0f} s: evalgate run",
        walls,
        ratio=f"{statistics.median(walls) / ideal:.3f}x ideal",
        peak_mb=peak,
        note="readiness, context, probe, eval, gate, artifacts",
    )


def overhead_lm_eval(
    tmp: Path, engine: FakeEngine, repeats: int, *, concurrency: int, ideal: float
) -> Row:
    """Plain lm-eval on the same task, concurrency and budget."""
    tasks = harness_task(tmp)
    walls, peak = measured(
        repeats,
        lambda i: lm_eval_command(
            engine.url,
            tasks,
            max_tokens=8192,
            concurrent=concurrency,
            out=tmp / f"harness-overhead-{i}",
        ),
        0,
        "exact_match",
    )
    return Row(
        f"full GSM8K, ideal {ideal:.0f} s: plain lm-eval",
        walls,
        ratio=f"{statistics.median(walls) / ideal:.3f}x ideal",
        peak_mb=peak,
        note="lm-eval CLI, same task, concurrency and budget",
    )


def verify_and_compare(tmp: Path, repeats: int, quick: bool, builds: list[Build]) -> list[Row]:
    rows = []
    for count in (10_000,) if quick else (10_000, 100_000):
        root = tmp / f"sweep-{count}"
        root.mkdir()
        generate(root, count, 0.1)
        seconds = 1.5 if count == 10_000 else 20.0  # issue 27's goals, in at most 250 MB

        def measure(
            build: Build, root: Path = root, count: int = count, seconds: float = seconds
        ) -> Row:
            walls, peak = measured(
                repeats,
                lambda _: build.command("verify", str(root), "--min-samples", "0", "--no-github"),
                0,
                f"evalgate verify: PASS (exit 0): {count} results",
                build=build,
            )
            return Row(
                f"evalgate verify, {count:,} artifacts",
                walls,
                goal=f"<= {seconds:g} s, <= 250 MB",
                met=statistics.median(walls) <= seconds and peak <= 250,
                peak_mb=peak,
                ratio=f"{statistics.median(walls) / count * 1e6:.0f} us/artifact",
            )

        rows += over_builds(builds, measure)
    baseline, candidate = tmp / "baseline", tmp / "candidate"
    write_run(baseline, [True] * 1319)
    write_run(candidate, [i >= 45 or i < 5 for i in range(1319)])

    walls, peak = measured(
        repeats,
        lambda _: [EVALGATE, "compare", str(baseline), str(candidate)],
        1,
        "evalgate compare: REGRESSION (exit 1)",
    )
    rows.append(
        Row(
            "evalgate compare, full GSM8K (1319 x 2 filters)",
            walls,
            goal="< 1 s",
            met=statistics.median(walls) < 1,
            peak_mb=peak,
        )
    )
    return rows


Expected = tuple[list[str], int, str]
"""A command's arguments, its exit code and the line that shows it did its job."""


def startup(tmp: Path, repeats: int, builds: list[Build]) -> list[Row]:
    """Each command's start-up to its answer, and whether it imports lm-eval."""
    rows = []
    for name, command in startup_commands(tmp).items():
        having = [build for build in builds if build.has(command[0][0])]
        rows += over_builds(having, functools.partial(startup_row, name, command, repeats))
    return rows


def startup_commands(tmp: Path) -> dict[str, Expected]:
    """The commands timed, by name: their arguments, exit code and the line that shows each did
    its job (over a sweep of one result, and a history that holds it)."""
    one = tmp / "one"
    one.mkdir()
    generate(one, 1, 0.0)
    history = tmp / "history.db"
    recorded = subprocess.run(
        [
            EVALGATE,
            "verify",
            str(one),
            "--min-samples",
            "0",
            "--no-github",
            "--record",
            str(history),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    expect(recorded, 0, "evalgate verify: PASS (exit 0)")
    return {
        "evalgate --help": (["--help"], 0, "usage: evalgate"),
        # every command's flags, from the settings model; those that need an engine (or two
        # whole runs: compare, timed in full below) as far as their help
        **{
            f"evalgate {name} --help": ([name, "--help"], 0, f"usage: evalgate {name}")
            for name in ("run", "hook", "probe", "compare")
        },
        "evalgate history, one run": (["history", str(history)], 0, "1 configs, 0 dropped"),
        "evalgate context": (
            [
                "context",
                "--isl",
                "1024",
                "--osl",
                "1024",
                "--served-max-model-len",
                "4096",
            ],
            0,
            "EVAL_MAX_MODEL_LEN=2304\n",
        ),
        "evalgate verify, one file": (
            ["verify", str(one), "--min-samples", "0", "--no-github"],
            0,
            "evalgate verify: PASS (exit 0): 1 results",
        ),
    }


def startup_row(name: str, command: Expected, repeats: int, build: Build) -> Row:
    """One command's start-up by one build: timed, then run once more to list its imports."""
    arguments, code, says = command
    walls, peak = measured(repeats, lambda _: build.command(*arguments), code, says, build=build)
    module = [build.python, "-X", "importtime", "-m", "evalgate.cli", *arguments]
    imports = subprocess.run(
        module, env=build.env, cwd=build.cwd, capture_output=True, text=True, check=False
    ).stderr
    loaded = {line.rsplit("|", 1)[-1].strip() for line in imports.splitlines()}
    loads_lm_eval = any(imported.split(".")[0] == "lm_eval" for imported in loaded)
    return Row(
        f"start-up: {name}",
        walls,
        goal="< 0.5 s, no lm-eval",
        met=statistics.median(walls) < 0.5 and not loads_lm_eval,
        peak_mb=peak,
        note="imports lm-eval" if loads_lm_eval else "lm-eval not imported",
    )


def early_stop(tmp: Path, repeats: int, quick: bool) -> list[Row]:
    """Full GSM8K at 64 in flight with a fixed latency: time to the verdict, with and without
    --early-stop both, for an engine that passes (0.97) and one that answers garbage (0.0)."""
    concurrency = 64
    latency = 0.5 if quick else 1.0
    ideal = math.ceil(1319 / concurrency) * latency
    rows = []
    for accuracy, code in ((0.97, 0), (0.0, 1)):
        behaviour = EngineBehaviour(
            max_model_len=9472,
            accuracy=accuracy,
            latency_s=latency,
            max_concurrency=concurrency,
        )
        with FakeEngine(behaviour) as engine:
            off, both = (
                early_stop_row(tmp, engine, repeats, mode, code=code, concurrency=concurrency)
                for mode in ("off", "both")
            )
        off.ratio = f"{off.median / ideal:.2f}x ideal {ideal:g} s"
        both.ratio = f"{off.median / both.median:.1f}x faster"
        rows += [off, both]
    return rows


def early_stop_row(
    tmp: Path, engine: FakeEngine, repeats: int, mode: str, *, code: int, concurrency: int
) -> Row:
    """`evalgate run --early-stop MODE` to its verdict (exit `code`), and the questions asked."""
    behaviour = engine.behaviour
    asked: list[int] = []

    def run(i: int) -> tuple[float, float]:
        out = tmp / f"early-{behaviour.accuracy}-{mode}-{i}"
        wall, peak, done = timed(
            evalgate_run(
                engine.url,
                "fake-model",
                out,
                "--num-concurrent",
                str(concurrency),
                "--early-stop",
                mode,
            )
        )
        assert done.returncode == code, done.stderr[-2000:]
        record = json.loads((out / "result.json").read_text())["eval"]
        asked.append((record.get("early_stop") or {}).get("questions_asked", 1319))
        return wall, peak

    walls, peak = repeat(repeats, run)
    verdict = "PASS" if code == 0 else "FAIL"
    return Row(
        f"{verdict} at accuracy {behaviour.accuracy}, latency {behaviour.latency_s:g} s, "
        f"--early-stop {mode}",
        walls,
        peak_mb=peak,
        note=f"{statistics.median(asked):.0f} of 1319 questions asked",
    )


def simulation_section(runs: int) -> str:
    """The seeded simulation's figures (the same functions the tests assert)."""
    gate = simulation.gate_table(simulation.gate_scenarios(runs))
    compare = simulation.compare_table(simulation.compare_rates(runs))
    repeats = simulation.repeat_table(simulation.repeat_rates(runs))
    sweep = simulation.sweep_table(simulation.sweep_rates(runs))
    return (
        "## Sound verdicts: simulated operating characteristics\n\n"
        "Seeded simulation of the statistics alone, no HTTP (tests/simulation.py). The "
        "sequential gate (`--early-stop both`, alpha 0.05, threshold 0.90, two filters that "
        "agree on every answer) over 1319 questions; with answers in flight, each slot takes "
        "every n-th question and a wrong answer takes 4x as long as a right one, so wrong "
        "answers arrive late. False PASS: an early PASS at a true accuracy at or below 0.90 "
        "(goal <= 5%).\n\n"
        + gate
        + "\ncompare on full GSM8K, default margin (2 points), 3% of questions flipping between "
        "runs; a true drop of d adds d to the share lost (goals: no change EQUIVALENT >= 80% "
        "and REGRESSION <= 5%; a 2-point drop REGRESSION >= 80%):\n\n"
        + compare
        + "\ncompare on GPQA-diamond as the harness asks it (198 questions, each twice), no "
        "true change, 20% of questions flipping between runs, a flipped question flipping in "
        "both repeats with the share in the first column: the repeats clustered (evalgate) "
        "against every answer counted as independent (goal: clustered REGRESSION <= 5%):\n\n"
        + repeats
        + "\n`verify --baseline` on sweeps of 200 configs of full GSM8K against their baseline, "
        "3% of answers flipping, two filters, the default margin; one config's true drop in "
        "the first column (Holm over the configs, one-sided; goals: no change fails <= 5% of "
        "sweeps, a 3-point drop found >= 75%, a 4-point drop >= 95%):\n\n" + sweep
    )


NOTE_VERIFY_BASELINE = (
    "Each evalgate run is a result.json and a samples.jsonl of 0.74 MiB (the tests' writer, "
    "short responses); each harness run a meta_env.json, lm-eval's results file and a samples "
    "file of 1.5 MiB (two lines per question, with the doc and the arguments as lm-eval logs "
    "them). The harness's samples are read slower: lm-eval's free-form `doc` is checked for "
    "integers past what a float holds by scanning the text, and each line is merged into its "
    "question in Python. No goal is set for them."
)


def verify_baseline_section(quick: bool) -> str:
    """`verify --baseline` over 1,000 config pairs of full GSM8K in each layout, beside
    `evalgate compare` once per pair (benchmarks/bench_verify_baseline.py)."""
    from benchmarks import bench_verify_baseline as bench

    configs, runs = (100, 1) if quick else (1000, 5)
    rows = [bench.measure(layout, configs, runs, 20) for layout in ("evalgate", "harness")]
    return (
        "\n".join(
            [
                "## verify --baseline: a sweep paired with its baseline",
                "",
                f"`evalgate verify SWEEP --baseline BASELINE -q` over {configs:,} config pairs "
                "of full GSM8K (1,319 questions, two filters; one config regressed), the files "
                "in the page cache; `evalgate compare` run once per pair, timed on 20 pairs "
                "and scaled (`python benchmarks/bench_verify_baseline.py`).",
                "",
                f"- commit: {commit()}, {stamp()}; runs: {runs}; load average "
                f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores when measured",
                "",
                *bench.HEADER,
                *rows,
                "",
                NOTE_VERIFY_BASELINE,
            ]
        )
        + "\n"
    )


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| benchmark | median s | min s | max s | ratio | peak MB | goal | met | note |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        met = "" if r.met is None else ("yes" if r.met else "**no**")
        peak = "" if r.peak_mb is None else f"{r.peak_mb:.0f}"
        lines.append(
            f"| {r.name} | {r.median:.3f} | {min(r.seconds):.3f} | "
            f"{max(r.seconds):.3f} | {r.ratio} | {peak} | {r.goal} | {met} | "
            f"{r.note} |"
        )
    return lines


def early_stop_section(rows: list[Row], repeats: str) -> str:
    return (
        "\n".join(
            [
                "## Early stop: wall time to a verdict",
                "",
                "`evalgate run` on full GSM8K against a 64-slot engine with a fixed latency per "
                "request, `--num-concurrent 64`, with `--early-stop off` (every question) and "
                "`both` (stop once the sequential test is certain).",
                "",
                f"- commit: {commit()}, {stamp()}; repeats: {repeats}; load average "
                f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores when measured",
                "",
                *table(rows),
            ]
        )
        + "\n"
    )


# BENCHMARKS.md's sections, each measured by its own `--only` (by-hand: figures measured by hand)
SECTIONS = (
    "early-stop",
    "simulation",
    "floors",
    "verify-baseline",
    "by-hand",
    "install",
    "history",
)


def keep_sections(text: str, previous: Path, names: tuple[str, ...]) -> str:
    """`text` with the `names` sections of the `previous` report kept as they were written (the
    by-hand figures; with `--only table`, every section), in the previous report's order."""
    old = previous.read_text() if previous.exists() else ""
    for start in re.findall(r"<!-- ([\w-]+):start -->", old):
        begin, end = f"<!-- {start}:start -->", f"<!-- {start}:end -->"
        if start in names and end in old:
            body = old.split(begin, 1)[1].split(end, 1)[0].lstrip("\n")
            text = replace_section(text, start, body)
    return text


def machine() -> str:
    cpu = "unknown CPU"
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    return (
        f"{os.cpu_count()} cores ({cpu}), {pages:.0f} GiB, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}"
    )


def render(rows: list[Row], repeats: str, beside: str | None = None) -> str:
    lines = [
        "# Benchmarks",
        "",
        "Written by `scripts/bench` (benchmarks/suite.py); do not edit by hand.",
        "",
        f"- machine: {machine()}",
        f"- commit: {commit()}, {stamp()}",
        f"- repeats: {repeats}; times are wall seconds of whole commands, start-up included",
        *(
            [
                f"- beside: {beside}, another checkout timed by the same commands on the same "
                f"machine, right after ours (`scripts/bench --against`); its rows are marked "
                f"[{beside}] and each of ours says its time as a multiple of that one's"
            ]
            if beside
            else []
        ),
        "",
        *table(rows),
    ]
    return "\n".join(lines) + "\n"


def own_sections(args: argparse.Namespace, tmp: Path) -> dict[str, str]:
    """The measurements with a section of their own in BENCHMARKS.md, as --only asks."""
    sections = {}
    if args.only in (None, "early-stop"):
        early_repeats = 1 if args.quick else 3
        sections["early-stop"] = early_stop_section(
            early_stop(tmp, early_repeats, args.quick),
            "quick" if args.quick else str(early_repeats),
        )
    if args.only in (None, "simulation"):
        sections["simulation"] = simulation_section(500 if args.quick else 2000)
    if args.only in (None, "verify-baseline"):
        sections["verify-baseline"] = verify_baseline_section(args.quick)
    if args.only in (None, "floors"):
        sections["floors"] = floors_sim.section(floors_sim.simulate())
    if args.only in (None, "install"):
        from benchmarks import bench_install

        started = stamp()
        rows = bench_install.measure(1 if args.quick else 3)
        sections["install"] = bench_install.section(rows, started, commit())
    if args.only in (None, "history"):
        from benchmarks import bench_history

        sizes = (100, 1, 50, 30) if args.quick else (1000, 3, 200, 365)
        sections["history"] = bench_history.section(*sizes, against=args.against)
    return sections


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer repeats, a 10 s overhead workload, no 100k verify",
    )
    parser.add_argument(
        "--only",
        choices=[
            "table",
            "incident",
            "overhead",
            "verify",
            "startup",
            "early-stop",
            "simulation",
            "verify-baseline",
            "floors",
            "install",
            "history",
        ],
    )
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument(
        "--engine-url",
        help="also time the incident against this real engine "
        "(e.g. the ROUTER_URL of scripts/engine-up single)",
    )
    parser.add_argument("--engine-model", default="smollm2-135m")
    parser.add_argument(
        "--against",
        type=Path,
        metavar="CHECKOUT",
        help="also time another checkout of evalgate (e.g. a git worktree of an older commit) "
        "beside this one: start-ups, the incident, verify and the overhead",
    )
    return parser


def main() -> int:
    args = arguments().parse_args()
    builds = [HERE]
    if args.against:
        label = git_commit(args.against.resolve())
        builds.append(Build(label, args.against.resolve()))
        compileall.compile_dir(args.against / "evalgate", quiet=1)
    repeats = 3 if args.quick else 5
    # evalgate's modules compiled, as an installed package's are: where PYTHONDONTWRITEBYTECODE
    # is set, an editable checkout would otherwise compile them again in every timed start-up.
    compileall.compile_dir(ROOT / "evalgate", quiet=1)
    with tempfile.TemporaryDirectory(prefix="evalgate-bench-") as name:
        tmp = Path(name)
        rows = table_rows(args, tmp, repeats, builds)
        sections = own_sections(args, tmp)
    write_report(args, rows, sections, repeats, builds)
    return 0


def table_rows(args: argparse.Namespace, tmp: Path, repeats: int, builds: list[Build]) -> list[Row]:
    """The measurements of BENCHMARKS.md's main table, as --only asks."""
    rows: list[Row] = []
    if args.only in (None, "table", "startup"):
        rows += startup(tmp, repeats, builds)
    if args.only in (None, "table", "incident"):
        rows += incident(tmp, repeats, 1 if args.quick else 3, builds)
        if args.engine_url:
            rows += real_engine_incident(tmp, repeats, args.engine_url, args.engine_model)
    if args.only in (None, "table", "verify"):
        rows += verify_and_compare(tmp, repeats, args.quick, builds)
    if args.only in (None, "table", "overhead"):
        rows += overhead(tmp, 1 if args.quick else 3, args.quick, builds)
    return rows


def write_report(
    args: argparse.Namespace,
    rows: list[Row],
    sections: dict[str, str],
    repeats: int,
    builds: list[Build],
) -> None:
    """BENCHMARKS.md rewritten whole, or (--only) just the section measured; a measurement of
    the main table alone is printed and leaves the file as it is."""
    said = "quick" if args.quick else f"{repeats} (lm-eval runs: 3)"
    if args.only is None:
        text = render(rows, said, builds[1].label if len(builds) > 1 else None)
        for name, body in sections.items():
            text = replace_section(text, name, body)
        text = keep_sections(text, args.output, ("by-hand",))
        print(text)
        args.output.write_text(text)
        print(f"wrote {args.output}", file=sys.stderr)
    elif args.only == "table":  # the main table measured; every section kept as it was
        text = render(rows, said, builds[1].label if len(builds) > 1 else None)
        text = keep_sections(text, args.output, SECTIONS)
        args.output.write_text(text)
        print(f"rewrote the main table of {args.output}", file=sys.stderr)
    elif sections:
        text = args.output.read_text() if args.output.exists() else render([], "")
        for name, body in sections.items():
            print(body)
            text = replace_section(text, name, body)
        args.output.write_text(text)
        print(f"rewrote the {args.only} section of {args.output}", file=sys.stderr)
    else:
        print(render(rows, said))
        print(json.dumps({"note": "--only: BENCHMARKS.md left unchanged"}), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
