"""The paired statistics and the rule, against independent computations (scipy)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from scipy.optimize import brentq, minimize_scalar
from scipy.stats import binomtest, norm

from evalgate.compare.comparison import questions_to_settle
from evalgate.compare.paired import (
    Cluster,
    Finding,
    PairedCounts,
    classify,
    clustered_exact_p,
    config_p,
    design_effect,
    difference_interval,
    holm,
    judge_pairs,
    mcnemar_exact_p,
    one_sided_p,
    score_interval,
)
from evalgate.environment import DEFAULT_MAX_DROP
from evalgate.errors import ExitCode
from evalgate.schemas import validation_errors
from tests.conftest import ROOT, load_samples, run_args
from tests.fakeengine import EngineBehaviour, FakeEngine, answered_right, choice_docs, gpqa_rows
from tests.simulation import (
    RUNS,
    SweepRates,
    compare_rates,
    compare_table,
    repeat_rates,
    repeat_table,
    simulate_compare,
    simulate_compare_repeats,
    sweep_rates,
)
from tests.simulation import (
    sweep_table as simulated_sweep_table,
)
from tests.tasks.task_files import write_csv


def table(n: int, lost: int, gained: int, right: float = 0.8) -> PairedCounts:
    """A 2x2 table of n questions: the concordant ones split about `right` : 1 - `right`."""
    both_right = round((n - lost - gained) * right)
    return PairedCounts(both_right, lost, gained, n - lost - gained - both_right)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("lost", "gained", "expected"),
    [
        (0, 0, 1.0),
        (5, 5, 1.0),
        (0, 5, 2 / 32),
        (5, 0, 2 / 32),
        (1, 5, 2 * 7 / 64),
        (0, 1, 1.0),
    ],
)
def test_mcnemar_exact_known_values(lost, gained, expected):
    assert mcnemar_exact_p(lost, gained) == pytest.approx(expected, rel=1e-15)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("lost", "gained"),
    [
        (1, 0),
        (3, 12),
        (12, 3),
        (40, 5),
        (5, 40),
        (10, 10),
        (10, 11),
        (0, 25),
        (100, 130),
        (560, 500),
        (1000, 319),
    ],
)
def test_mcnemar_exact_matches_scipy_binomtest(lost, gained):
    independent = binomtest(min(lost, gained), lost + gained, 0.5).pvalue
    assert mcnemar_exact_p(lost, gained) == pytest.approx(independent, rel=1e-9, abs=1e-300)


def _score_statistic(gained: int, lost: int, n: int, delta: float) -> float:
    """The score statistic for H0: difference = delta, with the constrained maximum likelihood
    found numerically (no closed form): an independent route to Tango's interval."""
    rest = n - gained - lost

    def negative_log_likelihood(p21: float) -> float:
        cells = ((gained, p21 + delta), (lost, p21), (rest, 1 - 2 * p21 - delta))
        return -sum(k * math.log(p) for k, p in cells if k)

    low, high = max(0.0, -delta), (1 - delta) / 2
    p21 = minimize_scalar(
        negative_log_likelihood,
        bounds=(low + 1e-13, high - 1e-13),
        method="bounded",
        options={"xatol": 1e-14},
    ).x
    return (gained - lost - n * delta) / math.sqrt(n * (2 * p21 + delta * (1 - delta)))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("n", "lost", "gained"),
    [
        (1319, 40, 5),
        (20, 3, 2),
        (50, 0, 0),
        (30, 0, 10),
        (100, 1, 7),
        (1319, 30, 10),
        (200, 60, 20),
    ],
)
def test_tango_interval_matches_a_numerical_score_interval(n, lost, gained):
    z = norm.ppf(0.975)
    estimate = (gained - lost) / n
    low = brentq(lambda d: _score_statistic(gained, lost, n, d) - z, -1 + 1e-9, estimate - 1e-12)
    high = brentq(lambda d: _score_statistic(gained, lost, n, d) + z, estimate + 1e-12, 1 - 1e-9)
    interval = difference_interval(table(n, lost, gained))
    assert interval == pytest.approx((low, high), abs=1e-7)
    assert interval[0] < estimate < interval[1]


@pytest.mark.unit
@pytest.mark.parametrize("n", [10, 50, 188, 189, 1319])
def test_no_flips_still_leaves_a_width(n):
    """With no discordant pair the interval is +-z^2/(n+z^2), not the Wald interval's zero."""
    z2 = norm.ppf(0.975) ** 2
    low, high = difference_interval(table(n, 0, 0))
    assert (low, high) == pytest.approx((-z2 / (n + z2), z2 / (n + z2)), abs=1e-12)


@pytest.mark.unit
def test_nothing_paired_is_the_widest_interval():
    assert difference_interval(PairedCounts(0, 0, 0, 0)) == (-1.0, 1.0)


@pytest.mark.unit
def test_all_flipped_one_way_reaches_the_bound():
    low, high = difference_interval(PairedCounts(0, 0, 10, 0))
    assert high == pytest.approx(1.0)
    assert _score_statistic(10, 0, 10, low) == pytest.approx(norm.ppf(0.975), abs=1e-6)
    assert difference_interval(PairedCounts(0, 10, 0, 0)) == pytest.approx((-high, -low))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("counts", "max_drop", "finding"),
    [
        (table(1319, 0, 0), 0.02, Finding.EQUIVALENT),  # identical full runs
        (table(50, 0, 0), 0.02, Finding.INCONCLUSIVE),  # identical, too few to tell
        (table(189, 0, 0), 0.02, Finding.EQUIVALENT),
        (table(188, 0, 0), 0.02, Finding.INCONCLUSIVE),
        (table(1319, 40, 5), 0.02, Finding.REGRESSION),  # significant, beyond the margin
        (table(1319, 40, 5), 0.03, Finding.REGRESSION),  # significant, beyond half a wider one
        (table(1319, 21, 0), 0.02, Finding.REGRESSION),  # -1.6 points, p = 1e-6: certain
        (table(1319, 30, 10), 0.02, Finding.REGRESSION),  # significant, -1.5 points
        (table(1319, 30, 10), 0.04, Finding.EQUIVALENT),  # under half the margin, within it
        (table(1319, 12, 4), 0.02, Finding.EQUIVALENT),  # p = 0.08, -0.6 points
        (table(1319, 22, 9), 0.02, Finding.EQUIVALENT),  # significant, but under half of it
        (table(1319, 50, 40), 0.02, Finding.INCONCLUSIVE),  # -0.8 points, interval past -2
        (table(400, 20, 12), 0.02, Finding.INCONCLUSIVE),  # -2 points, p = 0.22
        (table(1319, 10, 30), 0.02, Finding.IMPROVED),  # significantly better, +1.5 points
        (table(1319, 0, 12), 0.02, Finding.EQUIVALENT),  # significantly better, +0.9 points
        (table(1319, 10, 10), 0.02, Finding.EQUIVALENT),
        (table(50, 3, 0), 0.02, Finding.INCONCLUSIVE),  # -6 points but p = 0.25
        (table(50, 10, 0), 0.02, Finding.REGRESSION),  # -20 points, p = 0.002
        (table(1319, 0, 0), 0.0, Finding.INCONCLUSIVE),  # no margin: never equivalent
        (PairedCounts(0, 0, 0, 0), 0.02, Finding.INCONCLUSIVE),  # nothing paired
    ],
)
def test_decide(counts, max_drop, finding):
    assert classify(counts, max_drop)[0] is finding


@pytest.mark.unit
def test_decide_returns_the_numbers_behind_the_finding():
    counts = table(1319, 40, 5)
    finding, p_value, interval = classify(counts, DEFAULT_MAX_DROP)
    assert p_value == mcnemar_exact_p(40, 5)
    assert interval == difference_interval(counts)
    assert finding.exit_code is ExitCode.FAIL


@pytest.mark.unit
def test_findings_rank_and_exit_codes():
    assert [f.exit_code for f in Finding] == [
        ExitCode.PASS, ExitCode.PASS, ExitCode.INCONCLUSIVE, ExitCode.FAIL
    ]  # fmt: skip
    assert max(Finding, key=lambda f: f.rank) is Finding.REGRESSION
    ranks = [Finding.IMPROVED, Finding.EQUIVALENT, Finding.INCONCLUSIVE, Finding.REGRESSION]
    assert [f.rank for f in ranks] == [0, 1, 2, 3]


def _scaled(counts: PairedCounts, size: int) -> PairedCounts:
    """The table with the same cell proportions at `size` questions (rounded)."""
    s = size / counts.n
    lost, gained = round(counts.lost * s), round(counts.gained * s)
    both_right = round(counts.both_right * s)
    return PairedCounts(both_right, lost, gained, size - lost - gained - both_right)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        (table(50, 0, 0), 189),  # z^2 (1 - m) / m = 188.3
        (table(100, 0, 0), 189),
        (table(10, 0, 0), 189),
    ],
)
def test_questions_to_settle_identical_runs(counts, expected):
    assert questions_to_settle(counts, 0.02) == expected
    assert classify(_scaled(counts, expected), 0.02)[0] is Finding.EQUIVALENT
    assert classify(_scaled(counts, expected - 1), 0.02)[0] is Finding.INCONCLUSIVE


@pytest.mark.unit
@pytest.mark.parametrize(
    "counts",
    [table(400, 40, 25), table(300, 20, 10), table(1319, 50, 40), table(500, 20, 14)],
)
def test_questions_to_settle_is_about_where_the_rule_decides(counts):
    """At the observed proportions, 15% fewer questions leave it open, 15% more settle it (the
    exact test on rounded counts is not monotone in n, hence "about")."""
    assert classify(counts, 0.02)[0] is Finding.INCONCLUSIVE
    needed = questions_to_settle(counts, 0.02)
    assert needed is not None and needed > counts.n
    assert classify(_scaled(counts, round(needed * 0.85)), 0.02)[0] is Finding.INCONCLUSIVE
    assert classify(_scaled(counts, round(needed * 1.15)), 0.02)[0] is not Finding.INCONCLUSIVE


@pytest.mark.unit
def test_questions_to_settle_on_the_equivalence_side_is_exact_for_the_interval():
    counts = table(1319, 50, 40)
    needed = questions_to_settle(counts, 0.02)
    assert needed is not None
    scale = needed / counts.n
    assert score_interval(40 * scale, 50 * scale, needed)[0] > -0.02
    scale = (needed - 1) / counts.n
    assert score_interval(40 * scale, 50 * scale, needed - 1)[0] <= -0.02


@pytest.mark.unit
@pytest.mark.parametrize(
    "counts",
    # nothing paired; d = -margin / 2, where neither REGRESSION nor EQUIVALENT can be reached
    [PairedCounts(0, 0, 0, 0), table(100, 1, 0), table(1000, 30, 20)],
)
def test_questions_to_settle_out_of_reach(counts):
    assert questions_to_settle(counts, 0.02) is None


def repeated(*clusters: tuple[int, int], questions: int = 50) -> PairedCounts:
    """`questions` questions asked twice: the given (lost, gained) answers per question for the
    first ones, nothing flipped in the rest; the concordant answers all right."""
    shapes = [Cluster(2, lost, gained) for lost, gained in clusters]
    shapes += [Cluster(2, 0, 0)] * (questions - len(shapes))
    lost = sum(c.lost for c in shapes)
    gained = sum(c.gained for c in shapes)
    return PairedCounts(2 * questions - lost - gained, lost, gained, 0, tuple(shapes))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("totals", "expected"),
    [
        ([], 1.0),
        ([0, 0], 1.0),  # a lost and a gained repeat of one question cancel
        ([-2, 2], 1.0),
        ([-2] * 5, 2 / 2**5),  # five questions lost twice: 1 pattern of 32 as low, two-sided
        ([-2] * 6, 2 / 2**6),
        ([-1, -2], 2 * 1 / 4),  # sums -3, -1, 1, 3: one as low as -3
        # sums 2(+-1+-1+-1) + (+-1+-1) <= -6: all three 2s negative and the 1s not both
        # positive (3 of 32 patterns)
        ([-2, -2, -1, 1, -2], 2 * 3 / 32),
        ([-2, -2, 0, -2, -1, 1], 2 * 3 / 32),  # a cluster with T = 0 changes nothing
    ],
)
def test_clustered_exact_p_known_values(totals, expected):
    assert clustered_exact_p(totals) == pytest.approx(expected, rel=1e-15)


@pytest.mark.unit
@pytest.mark.parametrize(("lost", "gained"), [(0, 0), (0, 5), (1, 5), (40, 5), (560, 500)])
def test_clustered_exact_p_of_single_answers_is_mcnemar_to_the_bit(lost, gained):
    assert clustered_exact_p([-1] * lost + [1] * gained) == mcnemar_exact_p(lost, gained)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        # 5 of 50 questions lost in both repeats, d = -0.1: robust 50/49 (5 (-2 + 0.2)^2 +
        # 45 (0.2)^2) = 50/49 * 18 over independent 100/99 (10 (0.9)^2 + 90 (0.1)^2) =
        # 100/99 * 9: 99/49
        (repeated(*[(2, 0)] * 5), 99 / 49),
        # 4 questions lost in one repeat, d = -0.04: 50/49 * 3.68 over 100/99 * 3.84 < 1
        (repeated(*[(1, 0)] * 4), 1.0),
        # one question lost in one repeat and gained in the other: T = 0, robust 0
        (repeated((1, 1), questions=10), 1.0),
        (repeated(), 2.0),  # nothing flipped: the answers per question
        (repeated(*[(2, 0)] * 3, questions=3), 2.0),  # every answer lost: nothing varies
        (table(1319, 40, 5), 1.0),  # no repeats
    ],
)
def test_design_effect_known_values(counts, expected):
    assert design_effect(counts) == pytest.approx(expected, rel=1e-12)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("counts", "finding", "p_value"),
    [
        # 5 questions lost in both repeats of 50: 10 answers, p = 2/32: not significant
        (repeated(*[(2, 0)] * 5), Finding.INCONCLUSIVE, 2 / 32),
        # 6 questions: p = 2/64 < 0.05 and d = -12 points: a regression
        (repeated(*[(2, 0)] * 6), Finding.REGRESSION, 2 / 64),
        # the same 10 answers as single questions of 100: p = 2/1024, a regression
        (PairedCounts(90, 10, 0, 0), Finding.REGRESSION, 2 / 1024),
    ],
)
def test_clustered_classify_counts_questions_not_answers(counts, finding, p_value):
    got, p, interval = classify(counts, DEFAULT_MAX_DROP)
    assert (got, p) == (finding, pytest.approx(p_value, rel=1e-15))
    effect = design_effect(counts)
    assert interval == score_interval(
        counts.gained / effect, counts.lost / effect, counts.n / effect
    )


@pytest.mark.unit
def test_clustered_interval_is_wider_than_the_naive_one_by_the_design_effect():
    clustered = repeated(*[(2, 0)] * 5)
    naive = PairedCounts(clustered.both_right, clustered.lost, clustered.gained, 0)
    low, high = difference_interval(clustered)
    naive_low, naive_high = difference_interval(naive)
    assert low < naive_low < -0.1 < naive_high < high
    # Dividing the counts by DE = 99/49 by hand: 10 / DE lost of 100 / DE answers.
    assert (low, high) == pytest.approx(score_interval(0, 10 * 49 / 99, 100 * 49 / 99), abs=1e-12)


@pytest.mark.unit
def test_with_one_answer_per_question_clusters_change_nothing():
    for lost, gained in [(0, 0), (21, 0), (40, 5), (3, 12)]:
        plain = table(1319, lost, gained)
        singles = [Cluster(1, 1, 0)] * lost + [Cluster(1, 0, 1)] * gained
        singles += [Cluster(1, 0, 0)] * (1319 - lost - gained)
        clustered = PairedCounts(plain.both_right, lost, gained, plain.both_wrong, tuple(singles))
        assert not clustered.clustered
        assert classify(clustered, 0.02) == classify(plain, 0.02)
        assert questions_to_settle(clustered, 0.02) == questions_to_settle(plain, 0.02)


@pytest.mark.unit
def test_questions_to_settle_counts_questions_when_they_repeat():
    counts = repeated(*[(2, 0)] * 5)  # INCONCLUSIVE at 50 questions
    needed = questions_to_settle(counts, DEFAULT_MAX_DROP)
    assert needed is not None and needed > counts.questions
    grown = repeated(*[(2, 0)] * (needed // 10 + 1), questions=needed)
    assert classify(grown, DEFAULT_MAX_DROP)[0] is Finding.REGRESSION


@pytest.mark.unit
def test_clusters_must_add_up_to_the_table():
    with pytest.raises(ValueError, match="the clusters do not add up to the table"):
        PairedCounts(10, 1, 0, 0, (Cluster(2, 1, 0),))


# evalgate compare on GPQA-shaped runs (every question asked twice), made by `evalgate run`
# against the fake engine on a made-up GPQA-shaped set.

TASK = "gpqa_diamond_cot_n_shot"


QUESTIONS = 50


ACCURACY = 0.6


def gpqa_run(cli, data: Path, out: Path, wrong: list[str]) -> None:
    """`evalgate run` of GPQA-diamond at ACCURACY, the questions in `wrong` answered wrong."""
    rows = gpqa_rows(QUESTIONS)
    behaviour = EngineBehaviour(
        accuracy=ACCURACY, choice_docs=choice_docs(rows), wrong_questions=frozenset(wrong)
    )
    with FakeEngine(behaviour) as engine:
        result = cli(*run_args(engine.url, out, "--task", TASK, "--dataset-dir", str(data)))
    assert result.code == 0, result.text


@pytest.mark.loopback
def test_compare_of_gpqa_runs_clusters_each_question_s_two_repeats(cli, tmp_path):
    rows = gpqa_rows(QUESTIONS)
    data = write_csv(tmp_path / "data", rows).parent
    right = [row["Question"] for i, row in enumerate(rows) if answered_right(i, ACCURACY)]
    gpqa_run(cli, data, tmp_path / "base", [])
    gpqa_run(cli, data, tmp_path / "five", right[:5])  # 5 questions lost: 10 answers
    gpqa_run(cli, data, tmp_path / "eight", right[:8])

    samples = load_samples(tmp_path / "base")
    assert [(s["doc_id"], s["cluster"], s["repeat"]) for s in samples[:4]] == [
        (0, 0, 0),
        (1, 0, 1),
        (2, 2, 0),
        (3, 2, 1),
    ]

    # Ten answers lost, all from five questions: counted as independent answers that is
    # p = 2/1024, a REGRESSION; as five questions p = 2/32, not significant.
    result = cli("compare", str(tmp_path / "base"), str(tmp_path / "five"))
    assert result.code == 5, result.text
    assert result.out.startswith("evalgate compare: INCONCLUSIVE (exit 5)")
    assert (
        "extract_abcd: 100 answers to 50 questions paired by (question, repeat); the repeats of "
        "each question are one cluster in the statistics (design effect 2.02)." in result.out
    )
    assert "10 answers lost, 0 gained, of 100 answers to 50 questions: -10.00 points" in (
        result.out
    )
    assert "clustered McNemar p = 0.062" in result.out
    assert "repeated questions clustered: clustered exact McNemar test" in result.out

    result = cli("compare", str(tmp_path / "base"), str(tmp_path / "eight"), "--json", "-")
    assert result.code == 1, result.text
    document = json.loads(result.out)
    assert validation_errors("comparison", document) == []
    assert document["verdict"] == "regression"
    [flt] = document["filters"]
    assert (flt["filter"], flt["n"], flt["questions"], flt["repeats_clustered"]) == (
        "extract_abcd",
        100,
        50,
        True,
    )
    assert (flt["lost"], flt["gained"], flt["p_value"]) == (16, 0, 2 / 2**8)
    assert flt["design_effect"] > 1.9
    assert "repeats" in document["method"]

    result = cli("compare", str(tmp_path / "base"), str(tmp_path / "eight"), "--markdown")
    assert result.code == 1
    assert "- extract_abcd: 100 answers to 50 questions paired by (question, repeat)" in (
        result.out
    )

    page = tmp_path / "compare.html"
    result = cli("compare", str(tmp_path / "base"), str(tmp_path / "five"), "--html", str(page))
    assert result.code == 5
    html = page.read_text(encoding="utf-8")
    assert "100 answers, 50 questions" in html
    assert "over 100 paired answers to 50 questions, their repeats clustered" in html

    # The same runs as written before samples recorded the repeats: counted as independent
    # answers (p = 2/1024, a REGRESSION), with a warning that says so.
    for name in ("base", "five"):
        old = tmp_path / f"old-{name}"
        shutil.copytree(tmp_path / name, old)
        lines = (old / "samples.jsonl").read_text(encoding="utf-8").splitlines()
        stripped = []
        for line in lines:
            record = json.loads(line)
            del record["cluster"], record["repeat"]
            assert validation_errors("sample", record) == []
            stripped.append(json.dumps(record) + "\n")
        (old / "samples.jsonl").write_text("".join(stripped), encoding="utf-8")
    result = cli("compare", str(tmp_path / "old-base"), str(tmp_path / "old-five"))
    assert result.code == 1, result.text
    assert "10 lost, 0 gained: -10.00 points" in result.out
    assert "McNemar p = 0.002" in result.out
    assert (
        "warning: the baseline run asks 50 question(s) more than once but its samples do not "
        "record the repeats" in result.out
    )


# The sweep rule: Holm's adjustment over configs, one-sided tests, compare's rule per filter.


def sweep_table(n: int, lost: int, gained: int) -> PairedCounts:
    return PairedCounts(n - lost - gained, lost, gained, 0)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("p", "adjusted"),
    [
        ([], []),
        ([0.04], [0.04]),
        ([0.01, 0.04, 0.03], [0.03, 0.06, 0.06]),  # 0.01*3, max(0.03*2, 0.03), 0.04*1 -> 0.06
        ([0.5, 0.001, 0.2, 0.9], [1.0, 0.004, 0.6, 1.0]),
        ([0.02, 0.02], [0.04, 0.04]),
    ],
)
def test_holm(p, adjusted):
    assert holm(p) == pytest.approx(adjusted)


@pytest.mark.unit
def test_one_sided_p_is_half_the_two_sided_in_the_direction_seen_and_near_one_against_it():
    counts = sweep_table(1319, 40, 20)
    assert one_sided_p(counts, drop=True) == pytest.approx(mcnemar_exact_p(40, 20) / 2)
    assert one_sided_p(counts, drop=False) > 0.99
    assert one_sided_p(sweep_table(1319, 0, 0), drop=True) == 1.0


@pytest.mark.unit
def test_a_config_p_is_its_smallest_filter_times_its_filters():
    a, b = sweep_table(1319, 40, 20), sweep_table(1319, 30, 25)
    assert config_p({"x": a, "y": b}, drop=True) == pytest.approx(2 * one_sided_p(a, drop=True))
    assert config_p({}, drop=True) == 1.0


def _sweep(changed: PairedCounts, others: int) -> dict[str, dict[str, PairedCounts]]:
    pairs = {f"c{i}": {"strict-match": sweep_table(1319, 20, 20)} for i in range(others)}
    pairs["changed"] = {"strict-match": changed}
    return pairs


@pytest.mark.unit
def test_a_drop_compare_calls_a_regression_is_not_one_among_200_configs():
    drop = sweep_table(1319, 35, 17)  # -1.4 points, two-sided p = 0.018
    assert mcnemar_exact_p(35, 17) < 0.05
    alone = {c.key: c for c in judge_pairs(_sweep(drop, 0), 0.02)}
    assert alone["changed"].finding is Finding.REGRESSION
    among = {c.key: c for c in judge_pairs(_sweep(drop, 199), 0.02)}
    assert among["changed"].finding is Finding.INCONCLUSIVE
    assert among["changed"].adjusted_drop == pytest.approx(min(1.0, 200 * among["changed"].p_drop))


@pytest.mark.unit
def test_a_clear_drop_is_a_regression_among_200_and_named_by_its_filter():
    judged = {c.key: c for c in judge_pairs(_sweep(sweep_table(1319, 70, 15), 199), 0.02)}
    changed = judged["changed"]
    assert changed.finding is Finding.REGRESSION
    assert changed.deciding.filter == "strict-match"
    assert changed.adjusted_drop < 0.05
    assert {c.finding for k, c in judged.items() if k != "changed"} == {Finding.EQUIVALENT}


@pytest.mark.unit
def test_a_clear_gain_is_improved_and_unchanged_configs_stay_equivalent():
    judged = {c.key: c for c in judge_pairs(_sweep(sweep_table(1319, 15, 70), 49), 0.02)}
    assert judged["changed"].finding is Finding.IMPROVED
    assert judged["c0"].finding is Finding.EQUIVALENT


@pytest.mark.unit
def test_the_worst_filter_decides_a_config():
    pairs = {
        "k": {
            "strict-match": sweep_table(1319, 80, 10),
            "flexible-extract": sweep_table(1319, 20, 20),
        }
    }
    (config,) = judge_pairs(pairs, 0.02)
    assert config.finding is Finding.REGRESSION
    assert config.deciding.filter == "strict-match"
    assert [f.finding for f in config.filters] == [Finding.REGRESSION, Finding.EQUIVALENT]


# The operating characteristics the paired comparison promises, measured by seeded simulation
# (tests/simulation.py, no HTTP); BENCHMARKS.md and docs/compare.md record the same figures.


@pytest.mark.unit
def test_compare_no_change_is_equivalent_and_rarely_a_regression():
    rates = simulate_compare(0.0, runs=RUNS, seed=19)
    assert rates.equivalent >= 0.80
    assert rates.regression <= 0.05


@pytest.mark.unit
def test_compare_finds_a_true_two_point_drop():
    rates = simulate_compare(0.02, runs=RUNS, seed=20)
    assert rates.regression >= 0.80


@pytest.mark.unit
def test_the_compare_table_in_the_docs_is_what_the_simulation_gives():
    text = (ROOT / "docs" / "compare.md").read_text(encoding="utf-8")
    shown = text.split("<!-- compare-rates:start -->\n", 1)[1].split("<!-- compare-rates:end -->")[
        0
    ]
    assert shown == compare_table(compare_rates())


@pytest.mark.unit
def test_compare_clusters_repeated_questions_where_counting_answers_would_cry_regression():
    """GPQA-shaped runs (198 questions, each asked twice), no true change, 20% of the questions
    flipping and always in both repeats: the clustered rule keeps false REGRESSIONs within 5%,
    the naive one (every answer independent) does not."""
    rates = simulate_compare_repeats(1.0, runs=RUNS, seed=21)
    clustered, naive = rates.clustered.regression, rates.naive.regression
    print(f"false REGRESSION: clustered {clustered:.1%}, naive {naive:.1%}")
    assert clustered <= 0.05
    assert naive > 0.05
    assert naive > 2 * clustered


@pytest.mark.unit
def test_compare_clustering_independent_repeats_costs_next_to_nothing():
    """A flip that hits one repeat only: the clustered test is the naive one exactly, and the
    interval widens only by the small-sample correction of the cluster count."""
    rates = simulate_compare_repeats(0.0, runs=500, seed=22)
    assert rates.clustered.regression == rates.naive.regression
    assert abs(rates.clustered.equivalent - rates.naive.equivalent) <= 0.01


@pytest.mark.unit
def test_the_repeats_table_in_the_docs_is_what_the_simulation_gives():
    text = (ROOT / "docs" / "compare.md").read_text(encoding="utf-8")
    shown = text.split("<!-- repeat-rates:start -->\n", 1)[1].split("<!-- repeat-rates:end -->")[0]
    assert shown == repeat_table(repeat_rates())


@pytest.fixture(scope="module")
def simulated_sweeps() -> dict[float, SweepRates]:
    """The sweep table's simulations (2,000 seeded sweeps each, seed 1700 + its index), by true
    drop: run once for the table and the rates the tests below hold them to."""
    return {rates.drop: rates for rates in sweep_rates(RUNS)}


@pytest.mark.unit
def test_a_sweep_of_200_unchanged_configs_rarely_fails(simulated_sweeps):
    """Holm over 200 configs: a sweep with no true change reports any REGRESSION at most 5% of
    the time (2,000 seeded sweeps, 3% of answers flipping)."""
    assert simulated_sweeps[0.0].any_regression <= 0.05


@pytest.mark.unit
@pytest.mark.parametrize(("drop", "power"), [(0.03, 0.75), (0.04, 0.95)])
def test_a_sweep_finds_one_dropped_config_among_200(simulated_sweeps, drop, power):
    rates = simulated_sweeps[drop]
    assert rates.found >= power
    assert rates.false <= 0.05


@pytest.mark.unit
def test_the_sweep_table_in_the_docs_is_what_the_simulation_gives(simulated_sweeps):
    text = (ROOT / "docs" / "verify.md").read_text(encoding="utf-8")
    shown = text.split("<!-- sweep-rates:start -->\n", 1)[1].split("<!-- sweep-rates:end -->")[0]
    assert shown == simulated_sweep_table(list(simulated_sweeps.values()))
