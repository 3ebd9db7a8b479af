"""rules.floors: the two policies that fit a floor from a config's past runs (the simulation of
how they gate: tests/test_simulation.py; the file they make: tests/test_fitted.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalgate.history.fit import (
    MIN_RUNS,
    BetaBinomialFit,
    IxFit,
    TooThin,
    beta_binomial_weights,
    fit_floor,
    fitted_mean,
    ix_floor,
    lower_quantile,
    t_quantile,
)

pytestmark = pytest.mark.unit

N = 1319


def beta_binomial_pmf(x: int, n: int, a: float, b: float) -> float:
    """The textbook form, by log-gamma: C(n, x) B(x + a, n - x + b) / B(a, b)."""

    def log_beta(p: float, q: float) -> float:
        return math.lgamma(p) + math.lgamma(q) - math.lgamma(p + q)

    log_choose = math.lgamma(n + 1) - math.lgamma(x + 1) - math.lgamma(n - x + 1)
    return math.exp(log_choose + log_beta(x + a, n - x + b) - log_beta(a, b))


# -- ix: the harness's rule -------------------------------------------------------------------


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


def test_ix_quartiles_are_numpys_default_linear_ones():
    rng = np.random.default_rng(4901)
    for size in (5, 8, 13, 60):
        scores = rng.uniform(0.85, 0.97, size).tolist()
        fit = ix_floor(scores)
        q1, q3 = np.percentile(scores, [25, 75])
        assert (fit.q1, fit.q3) == pytest.approx((q1, q3), abs=1e-12)
        expected = max(0.90, math.floor(round((q1 - 1.5 * (q3 - q1) - 0.02) * 100, 9)) / 100)
        assert fit.floor == expected


def test_ix_floor_never_below_its_lowest():
    runs = [(int(N * s), N) for s in (0.80, 0.82, 0.84, 0.86, 0.88)]
    assert fit_floor(runs, "ix").floor == 0.90
    assert fit_floor(runs, "ix", lowest=0.30).floor < 0.80


# -- too thin -----------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["beta-binomial", "ix"])
@pytest.mark.parametrize("runs", [0, 1, MIN_RUNS - 1])
def test_too_few_runs_are_refused_not_guessed(policy, runs):
    fit = fit_floor([(1200, N)] * runs, policy)
    assert fit == TooThin(runs)
    assert fit.describe() == f"too thin to fit: {runs} runs, need {MIN_RUNS}"


@pytest.mark.parametrize("bad", [(1320, N), (-1, N)])
def test_counts_that_cannot_be_are_refused(bad):
    with pytest.raises(ValueError, match=r"must lie in 0..questions, not \((1320|-1), 1319\)"):
        fit_floor([(1200, N)] * 5 + [bad])


def test_runs_that_asked_nothing_do_not_count():
    fit = fit_floor([(1200, N)] * (MIN_RUNS - 1) + [(0, 0)] * 3)
    assert fit == TooThin(MIN_RUNS - 1)


# -- the beta-binomial's parts -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [(0.975, 1, 12.7062), (0.99, 4, 3.7469), (0.99, 9, 2.8214), (0.975, 30, 2.0423)],
)
def test_t_quantile_matches_the_tables(p, df, expected):
    assert t_quantile(p, df) == pytest.approx(expected, abs=1e-4)


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


def test_weights_at_binomial_variance_are_the_binomial():
    n, p = 40, 0.8
    first, weights = beta_binomial_weights(n, p, p * (1 - p) / n)
    for i, w in enumerate(weights):
        x = first + i
        assert w == pytest.approx(math.comb(n, x) * p**x * (1 - p) ** (n - x), abs=1e-12)


def test_lower_quantile_leaves_at_most_the_tail_below():
    n, mean, variance = 1319, 0.93, 0.93 * 0.07 / 1319 * 1.8
    right = lower_quantile(n, mean, variance, 0.01)
    first, weights = beta_binomial_weights(n, mean, variance)
    below = math.fsum(weights[: right - first])
    assert below <= 0.01 < below + weights[right - first]


def test_overdispersion_of_runs_no_more_spread_than_binomial_is_zero():
    mean, rho, error = fitted_mean([(1200, N)] * 10)
    assert (round(mean * N), rho) == (1200, 0.0)
    pooled = (12000 + 0.5) / (10 * N + 1)
    assert error == pytest.approx((pooled * (1 - pooled) / (10 * N)) ** 0.5)  # binomial


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


# -- the beta-binomial floor --------------------------------------------------------------------


def test_floor_is_a_score_the_next_run_can_reach_and_never_stricter_than_the_bound():
    runs = [(r, N) for r in np.random.default_rng(4902).integers(1190, 1231, 20).tolist()]
    fit = fit_floor(runs)
    assert isinstance(fit, BetaBinomialFit)
    assert fit.questions == N
    assert fit.floor == round(fit.floor, 4)
    lowest_passing = math.ceil(fit.floor * N)
    assert lowest_passing / N >= fit.floor > (lowest_passing - 1) / N - 1e-4
    assert min(r for r, _ in runs) / N - 0.03 < fit.floor < fit.mean


def test_more_spread_or_fewer_runs_lower_the_floor():
    rng = np.random.default_rng(4903)
    tight = [(r, N) for r in rng.integers(1192, 1209, 30).tolist()]
    loose = [(r, N) for r in rng.integers(1170, 1231, 30).tolist()]
    assert fit_floor(loose).floor < fit_floor(tight).floor
    assert fit_floor(tight[:5]).floor < fit_floor(tight).floor


def test_a_smaller_run_in_the_history_counts_for_what_it_asked():
    full = [(1200, N), (1205, N), (1195, N), (1210, N), (1190, N)]
    with_small = [*full, (91, 100)]  # 0.91 of 100 questions: within its own noise
    fit = fit_floor(with_small)
    assert isinstance(fit, BetaBinomialFit)
    assert fit.questions == N
    assert fit.rho == 0.0


def test_runs_all_right_still_leave_room_below_one():
    fit = fit_floor([(N, N)] * 10)
    assert 0.99 < fit.floor < 1.0


def test_the_fit_describes_itself():
    fit = fit_floor([(1200, N), (1205, N), (1195, N), (1210, N), (1190, N)])
    text = fit.describe()
    assert text.startswith("beta-binomial: 5 runs, mean 0.9098")
    assert f"lower bound {fit.floor:.4f}" in text
    assert isinstance(fit_floor([(1200, N)] * 5, "ix"), IxFit)


def test_an_unchanged_config_fails_at_most_about_the_tail():
    """Many seeded nights of one config (rho 5e-4, 20 runs behind each fit): the share of next
    runs below their floor. The simulation (tests/test_simulation.py) does this over bands."""
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
