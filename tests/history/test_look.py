"""`evalgate history HISTORY --html FILE`, opened in headless Chromium (the browser tier): per
config its accuracy per sweep with the 95% interval, the floor, fails and regressions marked;
the configs that dropped first. The history is built through `verify --record`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.cli import main
from tests.conftest import isolated
from tests.history.conftest import document, history_cli, last_line, verify
from tests.verify.sweeps import THRESHOLDS, answers, baseline_answers, evalgate_sweep

ROOT = Path(__file__).resolve().parents[2]


README_SHOT = ROOT / "docs" / "history-trend.png"


NIGHTS = 8


@pytest.fixture(scope="module")
def history_page(tmp_path_factory) -> Path:
    """Eight nightly sweeps of three configs: conc=4 regresses on the sixth night and stays down,
    conc=16 falls below its floor on the fourth, night three is marked bad."""
    root = tmp_path_factory.mktemp("history")
    history = str(root / "history.db")
    limits = root / "thresholds.json"
    limits.write_text(json.dumps(THRESHOLDS))
    with pytest.MonkeyPatch.context() as patch, isolated(patch):
        for night in range(1, NIGHTS + 1):
            four = answers(lost=80, seed=night % 4) if night >= 6 else answers(seed=night % 4)
            sixteen = answers(lost=200) if night == 4 else answers(seed=(night + 1) % 4)
            outcomes = {4: four, 8: answers(seed=(night + 2) % 4), 16: sixteen}
            sweep = evalgate_sweep(root / f"s{night}", f"night{night}", outcomes)
            args = ["verify", str(sweep), "--thresholds", str(limits), "--no-github", "-q"]
            args += ["--record", history, "--sweep-id", f"2026-05-{night:02d}"]
            if night > 1:
                args += ["--baseline", history]
            assert main(args) in (0, 1)
        marked = ["history", history, "--mark-sweep", "2026-05-03", "--reason", "driver bug"]
        assert main(marked) == 0
        page = root / "history.html"
        assert main(["history", history, "--html", str(page)]) == 0
    return page


TREND = {
    "captions": "[...document.querySelectorAll('figure.trend figcaption')].map(f => f.innerText)",
    "bands": "document.querySelectorAll('svg.trend path.band').length",
    "lines": "[...document.querySelectorAll('svg.trend polyline.trend')]"
    ".map(p => p.getAttribute('points').split(' ').length)",
    "floors": "document.querySelectorAll('svg.trend polyline.floor').length",
    "failed": "[...document.querySelectorAll('svg.trend circle.failed')].map(c => c.textContent)",
    "marked": "document.querySelectorAll('svg.trend circle.marked').length",
    "summary": "document.querySelector('header .summary').innerText",
    "width": "document.querySelector('svg.trend').getBoundingClientRect().width",
}


"""What the trend page shows, read in the browser."""


@pytest.mark.browser
def test_the_trend_page_shows_each_configs_accuracy_over_time_dropped_first(history_page, shown):
    v = shown(history_page, "history-trend", TREND, readme=(README_SHOT, 900)).values
    assert v["summary"] == "3 configs, 24 runs, 1 dropped"
    captions = v["captions"]
    assert captions[0].startswith("DROPPED qwen3 h100 vllm fp8 kv=bf16 isl=1024 osl=1024 conc=4")
    assert [c.split()[0] for c in captions[1:]] == ["PASS", "PASS"]
    assert "8 runs, 3 failed or regressed, 1 marked bad" in captions[0]
    assert (v["bands"], v["lines"], v["floors"]) == (3, [NIGHTS] * 3, 3)
    # conc=4's three regressions and conc=16's fail, each named on its dot
    assert sorted(v["failed"]) == [
        "2026-05-04: fail",
        "2026-05-06: regression",
        "2026-05-07: regression",
        "2026-05-08: regression",
    ]
    assert v["marked"] == 3  # night three, one dot per config
    assert v["width"] > 600


@pytest.mark.unit
def test_the_readme_shows_the_trend_page_the_browser_tier_draws():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/history-trend.png)" in readme
    assert README_SHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# The history through the CLI in its own process, on both stores (tests/history/conftest.py):
# `verify --record`, `history` (table, --where, --json, curation) and `verify --baseline HISTORY`,
# on sweeps of full GSM8K runs written by tests/verify/sweeps.py.


def test_history_shows_configs_that_dropped_first_and_filters_by_label(tmp_path, history):
    first = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers(), 8: baseline_answers()})
    assert verify(tmp_path, str(first), "--record", history, "--sweep-id", "n1").returncode == 0
    second = evalgate_sweep(tmp_path / "s2", "two", {4: answers(lost=80), 8: answers(seed=1)})
    done = verify(
        tmp_path, str(second), "--baseline", history, "--record", history, "--sweep-id", "n2"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REGRESSION" in done.stdout

    table = history_cli(history)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].endswith("conc=4 [gsm8k]  DROPPED")
    assert lines[1].split()[0] == "n1" and lines[2].split()[0] == "n2"
    assert " regression " in lines[2] and "floor 0.850 (default)" in lines[2]
    assert lines[-1] == "2 configs, 1 dropped"

    only = document(history, "--where", "concurrency=8", "--where", "hardware=h100")
    assert [c["labels"]["concurrency"] for c in only["configs"]] == [8]
    assert [r["sweep"] for r in only["configs"][0]["runs"]] == ["n1", "n2"]  # in time order

    unknown = history_cli(history, "--where", "gpu=b200")
    assert unknown.returncode == 2
    assert "--where gpu=b200: no run in" in unknown.stderr
    assert "has the label 'gpu'" in unknown.stderr
    none = history_cli(history, "--where", "concurrency=99")
    assert none.returncode == 2
    assert "no run in" in none.stderr and "has that value (it has: 4, 8)" in none.stderr


def test_the_baseline_is_each_configs_last_passing_unmarked_run_before_the_sweep(tmp_path, history):
    one = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers(), 8: baseline_answers()})
    assert verify(tmp_path, str(one), "--record", history, "--sweep-id", "n1").returncode == 0
    two = evalgate_sweep(tmp_path / "s2", "two", {4: answers(lost=80), 8: answers(seed=1)})
    assert verify(tmp_path, str(two), "--record", history, "--sweep-id", "n2").returncode == 0
    # n2's conc=4 lost 80 questions: marked bad, so the next sweep is paired with n1's
    assert history_cli(history, "--mark-run", "two-conc4", "--reason", "bad node").returncode == 0

    three = evalgate_sweep(
        tmp_path / "s3",
        "three",
        {4: answers(lost=80, seed=3), 8: answers(seed=2), 16: baseline_answers()},
    )
    verdict = tmp_path / "verdict.json"
    args = (str(three), "--baseline", history, "--json", str(verdict), "--sweep-id", "n3")
    done = verify(tmp_path, *args, "--record", history)
    assert done.returncode == 1, done.stdout + done.stderr
    found = {e["labels"]["concurrency"]: e for e in json.loads(verdict.read_text())["entries"]}
    assert found[4]["outcome"] == "regression"
    assert " sweep n1 run one-conc4 " in found[4]["versus"]["baseline_path"]
    assert found[8]["versus"]["standing"] == "equivalent"
    assert " sweep n2 run two-conc8 " in found[8]["versus"]["baseline_path"]
    assert found[16]["versus"]["standing"] == "new"
    assert last_line(done.stderr).startswith("history: 3 run(s) recorded")

    # again, now that the sweep is in the history: its own runs and sweep id are left out
    again = verify(tmp_path, *args)
    assert again.returncode == 1
    found = {e["labels"]["concurrency"]: e for e in json.loads(verdict.read_text())["entries"]}
    assert " sweep n1 run one-conc4 " in found[4]["versus"]["baseline_path"]
    assert found[16]["versus"]["standing"] == "new"


@pytest.mark.loopback
def test_a_where_that_is_not_label_equals_value_is_refused(tmp_path):
    history = tmp_path / "history.db"
    sweep = evalgate_sweep(tmp_path / "s1", "one", {4: baseline_answers()})
    assert verify(tmp_path, str(sweep), "--record", str(history)).returncode == 0
    done = history_cli(str(history), "--where", "concurrency")
    assert done.returncode == 2
    assert "--where 'concurrency' is not LABEL=VALUE" in done.stderr
    missing = history_cli(str(tmp_path / "nothing.db"))
    assert missing.returncode == 2
    assert "There is no history at " in missing.stderr
    assert not (tmp_path / "nothing.db").exists()


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-1", "-1 is out of range: give 0 to 2,147,483,647"),
        ("2147483648", "out of range"),
        ("ten", "not a whole number in ASCII digits"),
    ],
)
def test_a_last_out_of_range_is_refused_naming_the_range(tmp_path, value, message):
    done = history_cli(str(tmp_path / "history.db"), "--last", value)
    assert done.returncode == 2
    assert "argument --last: " in done.stderr
    assert message in done.stderr
    assert not (tmp_path / "history.db").exists()
