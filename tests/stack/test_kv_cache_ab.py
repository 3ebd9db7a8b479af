"""The seed's own experiment on the real engine: one config change, gated and compared.

The example task (examples/addition: two-digit additions in GSM8K's `#### n` format, which
SmolLM2-135M answers about half right) runs on the session's engine with the default KV cache,
then on an engine of its own started with `--kv-cache-dtype fp8` (or, on a CPU where vLLM refuses
an fp8 KV cache, the stand-in engine-up names), with `--baseline`; `evalgate compare` then pairs
them. The tests check the verdicts against the two runs' own samples, the McNemar p-value with a
binomial sum of their own, and that runs of different tasks are refused.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAST, ROOT, isolated, load_result, load_samples, run_subprocess

from . import stack
from .stack import EngineStack

pytestmark = pytest.mark.engine


EXAMPLE = ROOT / "examples" / "addition"


TASK = EXAMPLE / "addition_chat.yaml"


THRESHOLDS = EXAMPLE / "thresholds.json"


QUESTIONS = 400


FILTERS = ("strict-match", "flexible-extract")


CHANGE = ("--kv-cache-dtype", "fp8")


RUN_TIMEOUT = 1800.0  # one 400-question run; only a guard against a hang (a loaded machine is slow)


@dataclass(frozen=True)
class Runs:
    """The A/B: the same task on the default engine, then on the changed one."""

    changed: EngineStack
    baseline: Path
    candidate: Path
    baseline_done: subprocess.CompletedProcess[str]
    candidate_done: subprocess.CompletedProcess[str]


def example_run(
    running: EngineStack, out: Path, *extra: str, task: Path = TASK, thresholds: Path = THRESHOLDS
) -> subprocess.CompletedProcess[str]:
    """The example task as the quickstart runs it (16 in flight, answers capped at 32 tokens),
    labelled with what the engine serves."""
    return run_subprocess(
        "run", "--base-url", running.router_url, "--model", running.model,
        "--task", str(task), "--thresholds", str(thresholds), "--isl", "256", "--osl", "64",
        "--max-tokens-cap", "32", "--num-concurrent", "16", "--output-dir", str(out),
        "--kv-cache-dtype", running.kv_cache_dtype, "--precision", running.dtype, *FAST, *extra,
        timeout=RUN_TIMEOUT,
    )  # fmt: skip


@pytest.fixture(scope="module")
def changed_engine(
    engine_installed: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EngineStack]:
    """A single stack of its own (other ports, its own run directory) serving the change."""
    env = {
        "EVALGATE_ENGINE_RUN": str(tmp_path_factory.mktemp("changed-stack")),
        "EVALGATE_SINGLE_ROUTER_PORT": "18011",
        "EVALGATE_SINGLE_METRICS_PORT": "18096",
        "EVALGATE_SINGLE_ENGINE_PORT": "18111",
    }
    running = stack.up("single", env, CHANGE)
    try:
        yield running
    finally:
        stack.down("single", env)


@pytest.fixture(scope="module")
def ab(
    engine_single: EngineStack,
    changed_engine: EngineStack,
    tmp_path_factory: pytest.TempPathFactory,
) -> Runs:
    with pytest.MonkeyPatch.context() as monkeypatch, isolated(monkeypatch):
        folder = tmp_path_factory.mktemp("ab")
        baseline, candidate = folder / "default", folder / "changed"
        first = example_run(engine_single, baseline)
        second = example_run(changed_engine, candidate, "--baseline", str(baseline))
    return Runs(changed_engine, baseline, candidate, first, second)


def test_the_changed_engine_serves_fp8_or_names_its_stand_in(engine_single, changed_engine):
    assert engine_single.kv_cache_dtype == "auto" and engine_single.stand_in == ""
    if changed_engine.stand_in:  # a CPU without AVX-512 or AMX: another precision, named
        assert changed_engine.kv_cache_dtype == "auto"
        assert changed_engine.dtype != engine_single.dtype
        assert changed_engine.stand_in == (
            f"--dtype {changed_engine.dtype} for --kv-cache-dtype fp8"
        )
        assert changed_engine.flags == f"--dtype {changed_engine.dtype}"
    else:
        assert changed_engine.kv_cache_dtype == "fp8"
        assert changed_engine.dtype == engine_single.dtype
        assert changed_engine.flags == "--kv-cache-dtype fp8"
        log = (changed_engine.run_dir / "engine.log").read_text(errors="replace")
        assert "Using fp8 data type to store kv cache" in log


def test_a_cpu_without_avx512_or_amx_gets_a_named_stand_in(engine_installed, tmp_path):
    """What engine-up does where vLLM refuses an fp8 KV cache, on this machine: its CPU flags
    read from a copy of /proc/cpuinfo without AVX-512 and AMX."""
    cpuinfo = tmp_path / "cpuinfo"
    flags = re.sub(r" (avx512\w*|amx\w*)", "", Path("/proc/cpuinfo").read_text())
    cpuinfo.write_text(flags)
    env = {
        **os.environ,
        **stack.PINNED,
        "EVALGATE_ENGINE_CPUINFO": str(cpuinfo),
        "EVALGATE_ENGINE_RUN": str(tmp_path / "run"),
        "EVALGATE_SINGLE_ROUTER_PORT": "18012",
        "EVALGATE_SINGLE_METRICS_PORT": "18098",
        "EVALGATE_SINGLE_ENGINE_PORT": "18112",
    }
    env.pop("EVALGATE_ENGINE_DTYPE", None)  # the default dtype as engine-up picks it there
    try:
        done = subprocess.run(
            [str(stack.SCRIPTS / "engine-up"), "single", *CHANGE],
            capture_output=True, text=True, env=env, timeout=stack.UP_TIMEOUT, check=False,
        )  # fmt: skip
    finally:
        stack.down("single", {k: env[k] for k in env if k.startswith("EVALGATE_")})
    assert done.returncode == 0, done.stderr
    served = stack.parse_env(done.stdout)
    # no AVX-512 BF16 either: the default would be float32, the stand-in bfloat16
    assert served["ENGINE_STAND_IN"] == "--dtype bfloat16 for --kv-cache-dtype fp8"
    assert served["ENGINE_FLAGS"] == "--dtype bfloat16"
    assert (served["ENGINE_DTYPE"], served["ENGINE_KV_CACHE_DTYPE"]) == ("bfloat16", "auto")
    assert (
        f"engine-up single: this CPU has neither AVX-512 nor AMX ({cpuinfo}), and vLLM refuses "
        'an fp8 KV cache on it ("FP8 KV cache on CPU requires x86 with AVX-512 or AMX."); '
        "serving a stand-in config change instead: --dtype bfloat16 (weights and KV cache) "
        "against the default float32"
    ) in done.stderr.splitlines()
    assert "engine-up single: engine serves dtype bfloat16, kv_cache_dtype auto" in done.stderr


def right_answers(samples: list[dict[str, Any]], name: str) -> int:
    return sum(sample["filters"][name]["correct"] for sample in samples)


def test_the_example_task_passes_on_the_real_engine(ab):
    done = ab.baseline_done
    assert done.returncode == 0, done.stderr
    document = load_result(ab.baseline)
    assert document["status"] == "pass" and document["exit_code"] == 0
    assert document["eval"]["task"] == "addition_chat"
    threshold = document["threshold"]
    floor = json.loads(THRESHOLDS.read_text())["default"]["addition_chat"]
    assert (threshold["value"], threshold["matched"]) == (floor, "default")
    samples = load_samples(ab.baseline)
    assert sorted(s["doc_id"] for s in samples) == list(range(QUESTIONS))
    assert all(s["error"] is None for s in samples)
    scores = {s["filter"]: s for s in document["scores"]}
    assert set(scores) == set(FILTERS)
    listed = []
    for name in FILTERS:
        right = right_answers(samples, name)
        assert scores[name]["n"] == QUESTIONS
        assert scores[name]["value"] == pytest.approx(right / QUESTIONS)
        assert 0 < right < QUESTIONS  # partly answered: the model is neither useless nor perfect
        check = next(c for c in document["checks"] if c["filter"] == name)
        assert check["passed"] and check["low"] >= floor  # the interval clears the floor
        listed.append(
            f"{name} {check['value']:.4f} (95% CI {check['low']:.4f}-{check['high']:.4f}, "
            f"n={QUESTIONS})"
        )
    assert done.stdout.splitlines()[-1] == (
        f"PASS: {', '.join(listed)} >= threshold {floor:.4f} (default)"
    )


def mcnemar_p(lost: int, gained: int) -> float:
    """Exact two-sided McNemar: 2 * P[X <= min(lost, gained)], X ~ Bin(lost + gained, 1/2)."""
    flips = lost + gained
    if flips == 0:
        return 1.0
    tail = sum(Fraction(math.comb(flips, k), 2**flips) for k in range(min(lost, gained) + 1))
    return float(min(Fraction(1), 2 * tail))


def paired(baseline: Path, candidate: Path, name: str) -> tuple[int, int, int]:
    """(n, lost, gained) for one filter, from the two runs' samples paired by doc_id."""
    was = {s["doc_id"]: s["filters"][name]["correct"] for s in load_samples(baseline)}
    now = {s["doc_id"]: s["filters"][name]["correct"] for s in load_samples(candidate)}
    shared = sorted(was.keys() & now.keys())
    lost = sum(was[d] and not now[d] for d in shared)
    gained = sum(now[d] and not was[d] for d in shared)
    return len(shared), lost, gained


def test_compare_reports_what_the_two_runs_samples_say(ab):
    assert ab.baseline_done.returncode == 0, ab.baseline_done.stderr
    done = run_subprocess("compare", str(ab.baseline), str(ab.candidate), "--json", "-")
    report = json.loads(done.stdout)
    assert done.returncode == report["exit_code"], done.stderr
    assert report["verdict"] in ("equivalent", "inconclusive", "regression")
    assert report["protocol_drift"] == [] and report["excluded"]["unpaired"] == []
    change = {d["field"]: (d["baseline"], d["candidate"]) for d in report["changed"]}
    if ab.changed.stand_in:  # the labels say what the engines served
        assert set(change) == {"precision"}
    else:
        assert change == {"kv_cache_dtype": ("auto", "fp8")}
    by_filter = {f["filter"]: f for f in report["filters"]}
    assert set(by_filter) == set(FILTERS)
    worst = "equivalent"
    for name in FILTERS:
        n, lost, gained = paired(ab.baseline, ab.candidate, name)
        found = by_filter[name]
        assert (
            (found["n"], found["lost"], found["gained"])
            == (n, lost, gained)
            == (QUESTIONS, lost, gained)
        )
        assert found["p_value"] == pytest.approx(mcnemar_p(lost, gained), rel=1e-12, abs=0)
        assert found["difference"] == pytest.approx((gained - lost) / n)
        assert found["flips_total"] == lost + gained
        before = right_answers(load_samples(ab.baseline), name)
        assert found["baseline_score"] == pytest.approx(before / n)
        after = right_answers(load_samples(ab.candidate), name)
        assert found["candidate_score"] == pytest.approx(after / n)
        assert f"{lost} lost, {gained} gained" in found["reason"]
        if found["verdict"] == "regression":  # significant, and at least half the margin
            assert found["p_value"] < 0.05 and found["difference"] < -0.01
        elif found["verdict"] == "equivalent":
            assert found["ci_low"] > -0.02
        else:
            assert "paired questions would settle it" in found["reason"] or (
                "no number of questions" in found["reason"]
            )
        order = ("equivalent", "inconclusive", "regression")
        worst = max(worst, found["verdict"], key=order.index)
    assert report["verdict"] == worst
    text = run_subprocess("compare", str(ab.baseline), str(ab.candidate))
    assert text.returncode == report["exit_code"]
    assert text.stdout.splitlines()[0] == (
        f"evalgate compare: {worst.upper()} (exit {report['exit_code']})"
    )


def test_the_candidate_run_is_gated_against_its_baseline(ab):
    """`run --baseline` reaches compare's verdict itself: a REGRESSION fails the run, an
    INCONCLUSIVE comparison leaves it no better than inconclusive."""
    done = ab.candidate_done
    document = load_result(ab.candidate)
    assert done.returncode == document["exit_code"], done.stderr
    assert done.stdout.splitlines()[0] == f"{document['status'].upper()}: {document['reason']}"
    assert document["files"]["comparison"] == "comparison.json"
    own = json.loads((ab.candidate / "comparison.json").read_text())
    report = json.loads(
        run_subprocess("compare", str(ab.baseline), str(ab.candidate), "--json", "-").stdout
    )
    assert own["verdict"] == report["verdict"]
    counts = [
        [(f["n"], f["lost"], f["gained"], f["p_value"]) for f in r["filters"]]
        for r in (own, report)
    ]
    assert counts[0] == counts[1]
    if report["verdict"] == "regression":
        assert document["status"] == "fail" and document["exit_code"] == 1
        assert document["reason"].startswith(f"regression against the baseline {ab.baseline}: ")
    elif report["verdict"] == "inconclusive":
        assert document["status"] in ("inconclusive", "fail")
        assert "the comparison with the baseline is inconclusive" in document["reason"]
    else:
        assert "baseline" not in document["reason"]


def test_runs_of_different_tasks_are_refused(ab, engine_single, tmp_path):
    other = tmp_path / "other.yaml"  # the same questions under another task name
    text = TASK.read_text().replace("task: addition_chat", "task: addition_other")
    text = re.sub(r"(train|test)\.jsonl", lambda m: str(EXAMPLE / m.group(0)), text)
    other.write_text(text)
    floors = tmp_path / "thresholds.json"
    floors.write_text(json.dumps({"default": {"addition_chat": 0.25, "addition_other": 0.25}}))
    named = 'task: baseline "addition_chat", '

    # `run --baseline` refuses before a single question is asked
    refused = example_run(
        engine_single,
        tmp_path / "refused",
        "--baseline",
        str(ab.baseline),
        task=other,
        thresholds=floors,
    )
    assert refused.returncode == 2, refused.stderr
    assert not (tmp_path / "refused" / "journal.jsonl").exists()
    [line] = [ln for ln in refused.stderr.splitlines() if ln.startswith("UsageError: ")]
    assert "was not measured the same way as this run" in line
    assert named + 'this run "addition_other"' in line

    # two real runs of different tasks: compare refuses them, naming the difference
    asked = tmp_path / "other-run"
    done = example_run(engine_single, asked, "--limit", "20", task=other, thresholds=floors)
    assert load_result(asked)["eval"]["requests"]["completed"] == 20, done.stderr
    compared = run_subprocess("compare", str(ab.baseline), str(asked))
    assert compared.returncode == 2, compared.stdout
    [line] = [ln for ln in compared.stderr.splitlines() if ln.startswith("UsageError: ")]
    assert "were not measured the same way" in line
    assert named + 'candidate "addition_other"' in line
