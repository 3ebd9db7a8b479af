"""`evalgate history HISTORY --html FILE`, opened in headless Chromium (the browser tier): per
config its accuracy per sweep with the 95% interval, the floor, fails and regressions marked;
the configs that dropped first. The history is built through `verify --record`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.cli import main
from tests.conftest import isolated
from tests.verify.sweeps import THRESHOLDS, answers, evalgate_sweep

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
