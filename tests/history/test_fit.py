"""`evalgate history HISTORY --fit-thresholds FILE` through the CLI in its own process, on a
history `verify --record` wrote from sweeps of full GSM8K runs (tests/verify/sweeps.py)."""

from __future__ import annotations

import collections
import json
import math
import random
import statistics
from pathlib import Path

import numpy as np
import pytest

from benchmarks import floors_sim
from evalgate.history.fit import (
    MIN_RUNS,
    BetaBinomialFit,
    IxFit,
    RecordedRun,
    TooThin,
    beta_binomial_weights,
    differ,
    fit_floor,
    fit_thresholds,
    fitted_mean,
    ix_floor,
    lower_quantile,
    summary,
    t_quantile,
)
from evalgate.schemas import validation_errors
from evalgate.thresholds import load_thresholds, parse_thresholds, resolve_floor
from tests.conftest import ROOT, run_subprocess
from tests.history.conftest import history_cli, thresholds, verify
from tests.verify.sweeps import N, answers, evalgate_sweep

# qwen3: five runs of full GSM8K that differ a little, two of them failing the file in use's
# 0.945 (a fit takes failing runs too), and a broken one marked bad; thin: two runs, too few.
IN_USE = {"default": {"gsm8k": 0.945}}


QWEN = {
    1: answers(seed=0),
    2: answers(seed=1, gained=6),
    3: answers(seed=2, lost=12),
    4: answers(seed=3, lost=8),
}


QWEN_LATER = {5: answers(seed=4, lost=5), 6: answers(lost=150)}


THIN = {1: answers(seed=5), 2: answers(seed=6)}


def scores() -> list[float]:
    """qwen3's scores the fit takes: every run but the one marked bad."""
    return [sum(a) / N for a in [*QWEN.values(), QWEN_LATER[5]]]


def recorded(root: Path, history: str) -> Path:
    """The history of three sweeps gated by IN_USE, the broken run marked; the folder of the
    first sweep (its runs' evidence)."""
    (root / "thresholds.json").write_text(json.dumps(IN_USE))
    first = evalgate_sweep(root / "s1", "one", QWEN)
    second = evalgate_sweep(root / "s2", "two", QWEN_LATER)
    thin = evalgate_sweep(root / "s3", "thin", THIN, labels={"model_prefix": "thin"})
    for sweep, name, code in ((first, "n1", 1), (second, "n2", 1), (thin, "n3", 0)):
        done = verify(root, str(sweep), "--record", history, "--sweep-id", name)
        assert done.returncode == code, done.stdout + done.stderr
    marked = history_cli(history, "--mark-run", "two-conc6", "--reason", "broken node")
    assert marked.returncode == 0, marked.stderr
    return first


def summary_line(stdout: str, start: str) -> str:
    [line] = [line.strip() for line in stdout.splitlines() if line.strip().startswith(start)]
    return line


def test_a_fitted_file_is_accepted_by_verify_and_a_thin_model_is_said_per_model(tmp_path, history):
    first = recorded(tmp_path, history)
    fitted = tmp_path / "fitted.json"
    done = history_cli(
        history, "--fit-thresholds", str(fitted), "--thresholds", str(thresholds(tmp_path))
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("7 completed unmarked run(s) fitted by beta-binomial against ")

    document = json.loads(fitted.read_text())
    assert document["default"] == IN_USE["default"]  # carried over from the file in use
    floor = document["models"]["qwen3"]["gsm8k"]
    assert 0.85 < floor < min(scores())
    assert "thin" not in document["models"]  # too thin: the file in use's floor stands

    qwen = summary_line(done.stdout, "model_prefix=qwen3 gsm8k:")
    assert qwen.startswith(f"model_prefix=qwen3 gsm8k: 0.9450 (default) -> {floor:.4f} (prefix:")
    mean = sum(scores()) / len(scores())  # every run asked all N questions
    assert f"beta-binomial: 5 runs, mean {mean:.4f}" in qwen  # two failing runs among them
    thin = summary_line(done.stdout, "model_prefix=thin gsm8k:")
    assert thin.startswith("model_prefix=thin gsm8k: 0.9450 (default) -> 0.9450 (default);")
    assert "too thin to fit: 2 runs, need 5" in thin
    assert done.stdout.strip().splitlines()[-1].startswith(f"wrote {fitted}")

    # verify takes the fitted file, and its floor is the one that gates qwen3's runs
    verdict = tmp_path / "verdict.json"
    gated = run_subprocess(
        "verify", str(first), "--thresholds", str(fitted), "--no-github", "--json", str(verdict)
    )
    assert gated.returncode == 0, gated.stdout + gated.stderr  # the floor is under every run
    entries = json.loads(verdict.read_text())["entries"]
    assert len(entries) == len(QWEN)
    floors = {(c["threshold"], c["matched"]) for e in entries for c in e["checks"]}
    assert floors == {(floor, "prefix:qwen3")}


def test_policy_ix_gives_the_harness_rule(tmp_path, history):
    recorded(tmp_path, history)
    fitted = tmp_path / "ix.json"
    done = history_cli(
        history,
        "--fit-thresholds",
        str(fitted),
        "--policy",
        "ix",  # against the shipped file, whose GSM8K default is the harness's 0.90
    )
    assert done.returncode == 0, done.stderr
    # the rule, by hand: max(0.90, Q1 - 1.5 IQR - 0.02 rounded down to two decimals) over the
    # scores, quartiles interpolated linearly between order statistics (numpy's default)
    q1, _, q3 = statistics.quantiles(scores(), n=4, method="inclusive")
    expected = max(0.90, math.floor((q1 - 1.5 * (q3 - q1) - 0.02) * 100) / 100)
    assert expected > 0.90  # the fence, not the harness's minimum
    document = json.loads(fitted.read_text())
    assert document["models"]["qwen3"]["gsm8k"] == expected
    qwen = summary_line(done.stdout, "model_prefix=qwen3 gsm8k:")
    assert f"-> {expected:.4f} (prefix:qwen3)" in qwen and f"ix: 5 runs, Q1 {q1:.4f}" in qwen
    assert "too thin to fit: 2 runs, need 5" in summary_line(done.stdout, "model_prefix=thin")


@pytest.mark.loopback
def test_a_fitted_file_onto_evidence_or_an_input_is_refused_and_nothing_is_written(tmp_path):
    history = str(tmp_path / "history.db")
    first = recorded(tmp_path, history)
    in_use = thresholds(tmp_path)
    evidence = first / "one-conc1" / "result.json"
    before = {path: path.read_bytes() for path in (evidence, in_use, Path(history))}
    for target, why in (
        (evidence, "evidence"),
        (tmp_path / "new" / "result.json", "evidence"),  # an evidence name, even where none is
        (in_use, str(in_use)),
        (Path(history), history),
    ):
        done = history_cli(history, "--fit-thresholds", str(target), "--thresholds", str(in_use))
        assert done.returncode == 2, (target, done.stdout, done.stderr)
        assert "--fit-thresholds" in done.stderr and why in done.stderr, done.stderr
        assert done.stdout == ""
    assert {path: path.read_bytes() for path in before} == before
    assert not (tmp_path / "new").exists()

    for bad, message in (
        (["--policy", "ix"], "--policy goes with --fit-thresholds FILE."),
        (["--thresholds", str(in_use)], "--thresholds goes with --fit-thresholds FILE."),
        (["--fit-thresholds", "x.json", "--json", "-"], "--fit-thresholds goes alone"),
    ):
        refused = history_cli(history, *bad)
        assert refused.returncode == 2, refused.stderr
        assert message in refused.stderr


# rules.floors: the two policies that fit a floor from a config's past runs (the simulation of
# how they gate: below; the file they make: tests/history/test_fit.py).


def beta_binomial_pmf(x: int, n: int, a: float, b: float) -> float:
    """The textbook form, by log-gamma: C(n, x) B(x + a, n - x + b) / B(a, b)."""

    def log_beta(p: float, q: float) -> float:
        return math.lgamma(p) + math.lgamma(q) - math.lgamma(p + q)

    log_choose = math.lgamma(n + 1) - math.lgamma(x + 1) - math.lgamma(n - x + 1)
    return math.exp(log_choose + log_beta(x + a, n - x + b) - log_beta(a, b))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("scores", "floor"),
    [
        # Q1 0.95, Q3 0.97: fence 0.92, less 0.02 is 0.90
        ([0.94, 0.95, 0.96, 0.97, 0.98], 0.90),
        # the harness's glm5 row: Q1 0.9659, IQR 0.0030, fence 0.9614 -> 0.94
        ([0.9650, 0.9659, 0.9670, 0.9689, 0.9700], 0.94),
        # fence - 0.02 is 0.93 exactly (0.9299999... in binary): still 0.93
        ([0.95, 0.95, 0.95, 0.95, 0.95], 0.93),
        # a wide spread: the fence falls far below, 0.90 holds the floor up
        ([0.70, 0.80, 0.90, 0.95, 0.97], 0.90),
    ],
)
def test_ix_floor_is_the_harness_rule(scores, floor):
    fit = ix_floor(scores)
    assert fit.floor == floor
    assert fit.describe().endswith(f"= {floor:.2f}")


@pytest.mark.unit
def test_ix_quartiles_are_numpys_default_linear_ones():
    rng = np.random.default_rng(4901)
    for size in (5, 8, 13, 60):
        scores = rng.uniform(0.85, 0.97, size).tolist()
        fit = ix_floor(scores)
        q1, q3 = np.percentile(scores, [25, 75])
        assert (fit.q1, fit.q3) == pytest.approx((q1, q3), abs=1e-12)
        expected = max(0.90, math.floor(round((q1 - 1.5 * (q3 - q1) - 0.02) * 100, 9)) / 100)
        assert fit.floor == expected


@pytest.mark.unit
def test_ix_floor_never_below_its_lowest():
    runs = [(int(N * s), N) for s in (0.80, 0.82, 0.84, 0.86, 0.88)]
    assert fit_floor(runs, "ix").floor == 0.90
    assert fit_floor(runs, "ix", lowest=0.30).floor < 0.80


@pytest.mark.unit
@pytest.mark.parametrize("policy", ["beta-binomial", "ix"])
@pytest.mark.parametrize("runs", [0, 1, MIN_RUNS - 1])
def test_too_few_runs_are_refused_not_guessed(policy, runs):
    fit = fit_floor([(1200, N)] * runs, policy)
    assert fit == TooThin(runs)
    assert fit.describe() == f"too thin to fit: {runs} runs, need {MIN_RUNS}"


@pytest.mark.unit
@pytest.mark.parametrize("bad", [(1320, N), (-1, N)])
def test_counts_that_cannot_be_are_refused(bad):
    with pytest.raises(ValueError, match=r"must lie in 0..questions, not \((1320|-1), 1319\)"):
        fit_floor([(1200, N)] * 5 + [bad])


@pytest.mark.unit
def test_runs_that_asked_nothing_do_not_count():
    fit = fit_floor([(1200, N)] * (MIN_RUNS - 1) + [(0, 0)] * 3)
    assert fit == TooThin(MIN_RUNS - 1)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [(0.975, 1, 12.7062), (0.99, 4, 3.7469), (0.99, 9, 2.8214), (0.975, 30, 2.0423)],
)
def test_t_quantile_matches_the_tables(p, df, expected):
    assert t_quantile(p, df) == pytest.approx(expected, abs=1e-4)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("n", "mean", "rho"), [(20, 0.5, 0.1), (1319, 0.9, 5e-4), (1319, 0.97, 1e-4), (200, 0.3, 0.02)]
)
def test_weights_are_the_beta_binomial(n, mean, rho):
    variance = mean * (1 - mean) * (1 + rho * (n - 1)) / n
    first, weights = beta_binomial_weights(n, mean, variance)
    a, b = mean * (1 - rho) / rho, (1 - mean) * (1 - rho) / rho
    worst = max(abs(w - beta_binomial_pmf(first + i, n, a, b)) for i, w in enumerate(weights))
    assert worst < 1e-10
    assert math.fsum(weights) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.unit
def test_weights_at_binomial_variance_are_the_binomial():
    n, p = 40, 0.8
    first, weights = beta_binomial_weights(n, p, p * (1 - p) / n)
    for i, w in enumerate(weights):
        x = first + i
        assert w == pytest.approx(math.comb(n, x) * p**x * (1 - p) ** (n - x), abs=1e-12)


@pytest.mark.unit
def test_lower_quantile_leaves_at_most_the_tail_below():
    n, mean, variance = 1319, 0.93, 0.93 * 0.07 / 1319 * 1.8
    right = lower_quantile(n, mean, variance, 0.01)
    first, weights = beta_binomial_weights(n, mean, variance)
    below = math.fsum(weights[: right - first])
    assert below <= 0.01 < below + weights[right - first]


@pytest.mark.unit
def test_overdispersion_of_runs_no_more_spread_than_binomial_is_zero():
    mean, rho, error = fitted_mean([(1200, N)] * 10)
    assert (round(mean * N), rho) == (1200, 0.0)
    pooled = (12000 + 0.5) / (10 * N + 1)
    assert error == pytest.approx((pooled * (1 - pooled) / (10 * N)) ** 0.5)  # binomial


@pytest.mark.unit
def test_overdispersion_by_moments_on_equal_runs():
    runs = [(1180, N), (1230, N), (1195, N), (1250, N), (1170, N), (1215, N)]
    scores = [r / N for r, _ in runs]
    mean, rho, error = fitted_mean(runs)
    # equal n: the sample variance is mu(1-mu)/n (1 + rho (n - 1)); mu(1-mu) with Jeffreys' half
    pooled = (sum(r for r, _ in runs) + 0.5) / (len(runs) * N + 1)
    ratio = np.var(scores, ddof=1) / (pooled * (1 - pooled) / N)
    assert mean == pytest.approx(np.mean(scores))
    assert rho == pytest.approx((ratio - 1) / (N - 1))
    # the mean's standard error: the runs' own variance over their count
    expected = pooled * (1 - pooled) / N * (1 + rho * (N - 1)) / len(runs)
    assert error == pytest.approx(expected**0.5)


@pytest.mark.unit
def test_floor_is_a_score_the_next_run_can_reach_and_never_stricter_than_the_bound():
    runs = [(r, N) for r in np.random.default_rng(4902).integers(1190, 1231, 20).tolist()]
    fit = fit_floor(runs)
    assert isinstance(fit, BetaBinomialFit)
    assert fit.questions == N
    assert fit.floor == round(fit.floor, 4)
    lowest_passing = math.ceil(fit.floor * N)
    assert lowest_passing / N >= fit.floor > (lowest_passing - 1) / N - 1e-4
    assert min(r for r, _ in runs) / N - 0.03 < fit.floor < fit.mean


@pytest.mark.unit
def test_more_spread_or_fewer_runs_lower_the_floor():
    rng = np.random.default_rng(4903)
    tight = [(r, N) for r in rng.integers(1192, 1209, 30).tolist()]
    loose = [(r, N) for r in rng.integers(1170, 1231, 30).tolist()]
    assert fit_floor(loose).floor < fit_floor(tight).floor
    assert fit_floor(tight[:5]).floor < fit_floor(tight).floor


@pytest.mark.unit
def test_a_smaller_run_in_the_history_counts_for_what_it_asked():
    full = [(1200, N), (1205, N), (1195, N), (1210, N), (1190, N)]
    with_small = [*full, (91, 100)]  # 0.91 of 100 questions: within its own noise
    fit = fit_floor(with_small)
    assert isinstance(fit, BetaBinomialFit)
    assert fit.questions == N
    assert fit.rho == 0.0


@pytest.mark.unit
def test_runs_all_right_still_leave_room_below_one():
    fit = fit_floor([(N, N)] * 10)
    assert 0.99 < fit.floor < 1.0


@pytest.mark.unit
def test_the_fit_describes_itself():
    fit = fit_floor([(1200, N), (1205, N), (1195, N), (1210, N), (1190, N)])
    text = fit.describe()
    assert text.startswith("beta-binomial: 5 runs, mean 0.9098")
    assert f"lower bound {fit.floor:.4f}" in text
    assert isinstance(fit_floor([(1200, N)] * 5, "ix"), IxFit)


@pytest.mark.unit
def test_an_unchanged_config_fails_at_most_about_the_tail():
    """Many seeded nights of one config (rho 5e-4, 20 runs behind each fit): the share of next
    runs below their floor. The simulation (below) does this over bands."""
    rng = np.random.default_rng(4904)
    rho, mean = 5e-4, 0.92
    scale = (1 - rho) / rho
    fails = 0
    nights = 4000
    for _ in range(nights):
        p = rng.beta(mean * scale, (1 - mean) * scale, size=21)
        right = rng.binomial(N, p)
        fit = fit_floor([(int(r), N) for r in right[:20]])
        fails += right[20] / N < fit.floor
    assert fails / nights <= 0.015  # 1% nominal; 0.5% points is 3 standard errors over 4000


# evalgate.history.fit: the thresholds file fitted from recorded runs, read back by the thresholds
# loader that --thresholds uses.


FILTERS = ("strict-match", "flexible-extract")


def runs(
    count: int, accuracy: float, *, seed: int, task: str = "gsm8k", **labels: str
) -> list[RecordedRun]:
    """`count` runs around `accuracy` (binomial noise only), both GSM8K filters a point apart."""
    made = []
    for right in np.random.default_rng(seed).binomial(N, accuracy, count).tolist():
        scores = {FILTERS[0]: (right - 13, N), FILTERS[1]: (right, N)}
        made.append(RecordedRun(task=task, scores=scores, **labels))
    return made


B200 = {"hardware": "b200", "framework": "vllm", "precision": "fp8", "kv_cache_dtype": "auto"}


MI355 = {"hardware": "mi355x", "framework": "sglang", "precision": "fp8", "kv_cache_dtype": "fp8"}


def written(tmp_path, fitted):
    """The fitted document written as a file and read back by the loader --thresholds uses."""
    path = tmp_path / "fitted.json"
    path.write_text(json.dumps(fitted.document, indent=2))
    return load_thresholds(path)


@pytest.mark.unit
def test_the_fitted_file_is_one_the_thresholds_loader_accepts(tmp_path):
    history = [
        *runs(12, 0.95, seed=1, model_prefix="dsr1", model="deepseek-r1", **B200),
        *runs(9, 0.95, seed=2, model_prefix="dsr1", model="deepseek-r1", **MI355),
        *runs(7, 0.88, seed=3, model="my-org/new-model"),
    ]
    fitted = fit_thresholds(history, load_thresholds())
    assert validation_errors("thresholds", fitted.document) == []
    loaded = written(tmp_path, fitted)

    dsr1 = resolve_floor(loaded, "deepseek-r1", {"model_prefix": "dsr1", **B200})
    assert dsr1.matched == "prefix:dsr1"
    assert 0.91 < dsr1.value < 0.94  # the strict filter's mean is a point below 0.95
    new = resolve_floor(loaded, "my-org/new-model")
    assert new.matched == "model:my-org/new-model"
    assert 0.80 < new.value < 0.87  # below the 0.90 default: fitted to the model's own runs
    # the rest of the file in use carries over
    assert loaded.file.default == load_thresholds().file.default
    assert loaded.file.models["glm5"] == {"gsm8k": 0.94}


@pytest.mark.unit
def test_the_summary_says_what_changed_from_the_file_in_use():
    history = runs(12, 0.95, seed=4, model_prefix="dsr1", **B200)
    fitted = fit_thresholds(history, load_thresholds())
    (change,) = fitted.changes
    assert (change.model, change.task, change.match) == ("dsr1", "gsm8k", {"model_prefix": "dsr1"})
    assert (change.before, change.before_from) == (0.91, "prefix:dsr1")
    assert change.after_from == "prefix:dsr1"
    assert change.after == change.fit.floor
    line = summary(fitted)[0]
    assert line.startswith(f"model_prefix=dsr1 gsm8k: 0.9100 (prefix:dsr1) -> {change.after:.4f}")
    assert "beta-binomial: 12 runs" in line


@pytest.mark.unit
def test_a_model_too_thin_to_fit_says_so_and_keeps_its_floor(tmp_path):
    history = [
        *runs(MIN_RUNS - 2, 0.97, seed=5, model_prefix="glm5"),
        *runs(10, 0.95, seed=6, model_prefix="dsr1"),
    ]
    fitted = fit_thresholds(history, load_thresholds())
    thin = next(c for c in fitted.changes if c.model == "glm5")
    assert thin.fit == TooThin(MIN_RUNS - 2)
    assert (thin.before, thin.after) == (0.94, 0.94)
    lines = summary(fitted)
    assert any(
        line.startswith("model_prefix=glm5 gsm8k: 0.9400 (prefix:glm5) -> 0.9400 (prefix:glm5)")
        and f"too thin to fit: {MIN_RUNS - 2} runs, need {MIN_RUNS}" in line
        for line in lines
    )
    assert written(tmp_path, fitted).file.models["glm5"] == {"gsm8k": 0.94}


@pytest.mark.unit
def test_groups_whose_runs_differ_get_overrides(tmp_path):
    history = [
        *runs(10, 0.96, seed=7, model_prefix="qwen3.5", **B200),
        *runs(10, 0.93, seed=8, model_prefix="qwen3.5", **MI355),
    ]
    fitted = fit_thresholds(history, load_thresholds())
    loaded = written(tmp_path, fitted)
    b200 = resolve_floor(loaded, "q", {"model_prefix": "qwen3.5", **B200})
    mi355 = resolve_floor(loaded, "q", {"model_prefix": "qwen3.5", **MI355})
    model = resolve_floor(loaded, "q", {"model_prefix": "qwen3.5", "hardware": "h100"})
    assert b200.matched.startswith("override[")
    assert mi355.matched.startswith("override[")
    # the model's floor, for a config not yet seen, spans both groups' runs: below either
    assert model.value < mi355.value < b200.value
    assert 0.92 < b200.value < 0.95  # the strict filter's mean is a point below: 0.95
    assert 0.88 < mi355.value < 0.92
    whys = [o.why for o in loaded.file.overrides]
    assert all(w.startswith("fitted: beta-binomial: 10 runs") for w in whys)
    assert len(whys) == 2


@pytest.mark.unit
def test_groups_whose_runs_do_not_differ_share_the_models_floor():
    history = [
        *runs(10, 0.95, seed=9, model_prefix="gptoss", **B200),
        *runs(10, 0.95, seed=10, model_prefix="gptoss", **MI355),
    ]
    fitted = fit_thresholds(history, load_thresholds())
    assert fitted.document["overrides"] == []
    (change,) = fitted.changes
    assert change.note == "2 groups of runs, 0 with a floor of their own"


@pytest.mark.unit
def test_differ_needs_runs_on_both_sides():
    low = runs(6, 0.90, seed=11, model="m")
    high = runs(6, 0.96, seed=12, model="m")
    assert differ(low, high)
    assert not differ(low, high[:1])
    assert not differ(low[:3], runs(6, 0.90, seed=13, model="m"))


@pytest.mark.unit
def test_ix_policy_floors_at_the_default_of_the_file_in_use():
    history = runs(10, 0.88, seed=14, model_prefix="kimik2.5")
    fitted = fit_thresholds(history, load_thresholds(), policy="ix")
    (change,) = fitted.changes
    assert change.fit.floor == 0.90
    assert change.after == 0.90
    assert summary(fitted)[0].split("; ")[1].startswith("ix: 10 runs")


@pytest.mark.unit
def test_the_floor_covers_both_filters():
    """The strict filter scores 13 answers below the flexible one: the floor is the strict's,
    fitted at half the tail (each filter must clear it)."""
    history = runs(10, 0.95, seed=15, model="m")
    fitted = fit_thresholds(history, load_thresholds())
    floor = fitted.document["models"]["m"]["gsm8k"]
    strict_mean = sum(r.scores["strict-match"][0] for r in history) / (10 * N)
    assert strict_mean - 0.03 < floor < strict_mean - 0.01
    assert fitted.changes[0].fit.tail == 0.005


@pytest.mark.unit
def test_the_file_in_use_keeps_its_overrides_save_those_refitted():
    in_use = parse_thresholds(
        {
            "default": {"gsm8k": 0.90},
            "overrides": [
                {
                    "match": {"model_prefix": "dsr1", "hardware": "b200"},
                    "thresholds": {"gsm8k": 0.8},
                },
                {
                    "match": {"model_prefix": "x", **B200},
                    "thresholds": {"gsm8k": 0.5, "gpqa_diamond_cot_n_shot": 0.4},
                    "why": "old",
                },
            ],
        },
        "in use",
    )
    history = [
        *runs(10, 0.96, seed=16, model_prefix="x", **B200),
        *runs(10, 0.92, seed=17, model_prefix="x", **MI355),
    ]
    fitted = fit_thresholds(history, in_use)
    matches = [o["match"] for o in fitted.document["overrides"]]
    assert matches[0] == {"model_prefix": "dsr1", "hardware": "b200"}
    assert {"model_prefix": "x", **B200} in matches
    fitted_b200 = [
        o
        for o in fitted.document["overrides"]
        if o["why"].startswith("fitted") and o["match"] == {"model_prefix": "x", **B200}
    ]
    assert len(fitted_b200) == 1
    assert list(fitted_b200[0]["thresholds"]) == ["gsm8k"]
    assert fitted_b200[0]["thresholds"]["gsm8k"] > 0.9
    # the old override keeps the task not refitted, and its why
    old = {"match": {"model_prefix": "x", **B200}, "thresholds": {"gpqa_diamond_cot_n_shot": 0.4}}
    assert {**old, "why": "old"} in fitted.document["overrides"]
    assert len(matches) == 4


@pytest.mark.unit
def test_runs_with_no_model_label_are_counted_and_left_out():
    fitted = fit_thresholds(runs(6, 0.9, seed=18), load_thresholds())
    assert fitted.changes == []
    assert summary(fitted) == ["6 runs have neither a model nor a model_prefix label: left out"]


@pytest.mark.unit
@pytest.mark.parametrize("task", ["gpqa_diamond_cot_n_shot"])
def test_each_task_gets_its_own_floor(task):
    history = [
        *runs(8, 0.95, seed=19, model="m"),
        *runs(8, 0.55, seed=20, model="m", task=task),
    ]
    fitted = fit_thresholds(history, load_thresholds())
    floors = fitted.document["models"]["m"]
    assert set(floors) == {"gsm8k", task}
    assert 0.45 < floors[task] < 0.55 < floors["gsm8k"]


# The fitted floors' operating characteristics, measured by seeded simulation
# (benchmarks/floors_sim.py, no HTTP): BENCHMARKS.md's floors section, docs/history.md.


@pytest.fixture(scope="module")
def floors():
    """The full seeded simulation BENCHMARKS.md shows (about 10 s)."""
    return floors_sim.simulate()


@pytest.mark.unit
def test_the_floors_section_of_benchmarks_is_what_the_simulation_gives(floors):
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    shown = text.split("<!-- floors:start -->\n", 1)[1].split("<!-- floors:end -->")[0]
    assert shown == floors_sim.section(floors)


@pytest.mark.unit
def test_the_beta_binomial_floor_meets_its_goals_in_every_band(floors):
    """At most 1% of unchanged runs failed per config and night, and 3- and 5-point drops
    caught at least as often as by ix wherever ix fails at most 1% of unchanged runs."""
    assert floors_sim.shortfalls(floors) == {band: [] for band in floors_sim.BANDS}
    ours = [r for r in floors if r.policy == "beta-binomial"]
    assert all(r.thin == 0 and r.caught[-1] >= 0.85 for r in ours)


@pytest.mark.unit
def test_ix_fails_unchanged_configs_near_its_090_floor(floors):
    ix = {r.band: r for r in floors if r.policy == "ix"}
    assert ix[0.85, 0.87].unchanged > 0.95
    assert ix[0.89, 0.91].unchanged > 0.30
    assert ix[0.95, 0.97].caught[1] < 0.5  # and misses most 3-point drops where it is loose


@pytest.mark.unit
def test_the_floors_simulation_draws_binomial_and_overdispersed_runs():
    """What the simulation's proof rests on: its binomial sampler is the binomial, and a run's
    score varies by binomial noise times 1 + 1318 rho."""
    rng = random.Random(4905)  # noqa: S311 -- the simulation's own seeded generator
    n, p, draws = 30, 0.8, 20000
    counts = collections.Counter(floors_sim.binomial(rng, n, p) for _ in range(draws))
    distance = sum(
        abs(counts[x] / draws - math.comb(n, x) * p**x * (1 - p) ** (n - x)) for x in range(n + 1)
    )
    assert distance < 0.03  # total variation, twice; 20,000 draws
    rho, accuracy = 1e-3, 0.9
    scores = [floors_sim.run(rng, accuracy, rho) / floors_sim.QUESTIONS for _ in range(draws)]
    binomial = accuracy * (1 - accuracy) / floors_sim.QUESTIONS
    assert statistics.fmean(scores) == pytest.approx(accuracy, abs=0.0005)
    assert statistics.variance(scores) / binomial == pytest.approx(1 + 1318 * rho, rel=0.05)
