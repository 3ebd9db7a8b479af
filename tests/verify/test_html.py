"""`evalgate verify --html`: the page's content, and what a person sees when Chromium opens it.

The browser tests open the page made from a sweep of real loopback runs (conftest's
`loopback_sweep`: passing, inconclusive, failing and errored runs, a malformed result and a
missing config) in headless Chromium, read the rendered DOM, click the controls, and keep
screenshots (their folder is printed at the end of the session).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from evalgate._version import __version__
from evalgate.errors import ExitCode
from evalgate.evidence.model import Labels, Score
from evalgate.thresholds import parse_thresholds
from evalgate.verify import html, sweep
from evalgate.verify.collect import Collection, Found, Note
from tests.browser import look, network_references
from tests.conftest import ROOT, isolated

FILTERS = ("strict-match", "flexible-extract")


THRESHOLDS = parse_thresholds({"default": {"gsm8k": 0.90}}, "t.json")


README_SHOT = ROOT / "docs" / "verify-report.png"


def found(conc: int, *scores: tuple[str, float], hardware: str = "b200", **extra: Any) -> Found:
    labels = Labels(model_prefix="dsr1", hardware=hardware, concurrency=conc)
    rows = tuple(
        Score(task=task, metric="exact_match", filter=name, value=v, stderr=None, n=1319)
        for task, v in scores
        for name in (FILTERS if task.startswith("gsm8k") else FILTERS[:1])
    )
    return Found(f"a/{conc}/result.json", "evalgate", "m", labels, rows, **extra)


def page_of(*items: Found, malformed: tuple[Note, ...] = ()) -> str:
    collection = Collection(list(items), list(malformed), [], [])
    return html.render(sweep.judge_sweep(collection, sweep.Rule(THRESHOLDS), paths=["a"]))


def chart_rows(page: str) -> list[list[str]]:
    """Per chart, each row's (mark, label) in the page's own order."""
    charts = page.split('<figure class="chart">')[1:]
    return [
        [
            f"{m} {n}"
            for m, n in re.findall(r'<span class="badge[^"]*">([A-Z]+)</span><span class="label">'
            r'<span class="name">([^<]*)</span>', chart)
        ]
        for chart in charts
    ]  # fmt: skip


@pytest.mark.unit
def test_problems_come_first_in_each_task_chart_and_unscored_rows_in_the_first():
    page = page_of(
        found(4, ("gsm8k", 0.95), ("gsm8k_cot", 0.80)),
        found(8, ("gsm8k", 0.85), ("gsm8k_cot", 0.95)),
        found(16, status="error", stage="probe", reason="HTTP 400"),
        malformed=(Note("a/32/result.json", "a/32/result.json is not valid JSON"),),
    )
    assert chart_rows(page) == [
        ["FAIL conc=8", "ERROR conc=16", "MALFORMED 32/result.json", "PASS conc=4"],
        ["FAIL conc=4", "PASS conc=8"],
    ]
    assert "gsm8k: dsr1 b200: exact_match of 4 configs (3 with a problem, listed first)" in page
    assert "error: run error in stage probe: HTTP 400" in page
    # the table lists every config once, by its own outcome, problems first
    table = page.split('<table class="sortable">')[1]
    assert re.findall(r'<span class="badge[^"]*">([A-Z]+)</span></td><td[^>]*>([^<]*)<', table) == [
        ("FAIL", "dsr1 b200 conc=4"),
        ("FAIL", "dsr1 b200 conc=8"),
        ("ERROR", "dsr1 b200 conc=16"),
        ("MALFORMED", "a/32/result.json"),
    ]


@pytest.mark.unit
def test_the_page_references_nothing_outside_itself_and_escapes_what_it_shows():
    hostile = '<img src="https://example.com/x.png" onerror="alert(1)">'
    page = page_of(found(4, ("gsm8k", 0.95), hardware=hostile))
    assert network_references(page) == []
    assert "<img" not in page
    assert "hardware=&lt;img src=&#34;https://example.com/x.png&#34;" not in page
    assert "&lt;img src=&#34;https://example.com/x.png&#34; onerror=&#34;alert(1)&#34;&gt;" in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert page.startswith("<!DOCTYPE html>")


@pytest.mark.unit
def test_a_sweep_with_no_score_at_all_still_draws_its_rows():
    page = page_of(found(16, status="error", stage="eval", reason="engine died"))
    assert chart_rows(page) == [["ERROR dsr1 b200 conc=16"]]
    assert "1 config without a score" in page


@pytest.mark.loopback
def test_cli_writes_the_page_and_keeps_its_exit_code(loopback_sweep, cli, tmp_path):
    sweep, out = loopback_sweep, tmp_path / "report" / "verify.html"
    result = cli("verify", sweep.root, "--expect", sweep.manifest, "--thresholds", sweep.thresholds,
                 "--html", out)  # fmt: skip
    assert result.code == ExitCode.FAIL, result.text
    page = out.read_text(encoding="utf-8")
    assert network_references(page) == []
    assert "evalgate verify: FAIL" in page
    assert str(loopback_sweep.thresholds) in page  # the inputs, in the footer


@pytest.mark.loopback
def test_an_unwritable_html_path_is_a_usage_error(loopback_sweep, cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    sweep = loopback_sweep
    result = cli("verify", sweep.root, "--expect", sweep.manifest, "--thresholds", sweep.thresholds,
                 "--html", blocker / "verify.html")  # fmt: skip
    assert result.code == ExitCode.USAGE
    assert f"ArtifactError: Cannot write {blocker / 'verify.html'}: " in result.err
    assert "Pass a writable path." in result.err


FIRST_ROW = "document.querySelector('.chart .rows .row').innerText"


ROWS = "Array.from(document.querySelectorAll('.chart .rows > *')).map(e => e.innerText)"


CLICK_SCORE = """(() => {
  Array.from(document.querySelectorAll('th')).find(th => th.textContent === 'Score').click();
  return Array.from(document.querySelectorAll('table tbody')).map(
    body => body.rows[0].cells[1].textContent + ' | ' + body.rows[0].cells[8].textContent);
})()"""


GROUP_BY_HARDWARE = """(() => {
  const select = document.getElementById('group-by');
  select.value = 'hardware';
  select.dispatchEvent(new Event('change'));
  return Array.from(document.querySelectorAll('.chart .rows > *')).map(e => e.innerText);
})()"""


@pytest.fixture(scope="module")
def verify_page(loopback_sweep, tmp_path_factory) -> Path:
    from evalgate.cli import main

    out = tmp_path_factory.mktemp("html") / "verify.html"
    relative = ["eval-artifacts", "--expect", "expected-evals.json", "--thresholds"]
    with pytest.MonkeyPatch.context() as patch, isolated(patch):
        patch.chdir(loopback_sweep.root.parent)  # paths as CI gives them: relative
        code = main(["verify", *relative, "thresholds.json", "--html", str(out)])
    assert code == ExitCode.FAIL
    return out


REPORT = {
    "title": "document.querySelector('figcaption').innerText",
    "first": FIRST_ROW,
    "rows": ROWS,
    "dots": "document.querySelectorAll('.chart svg.bar circle.point').length",
    "intervals": "document.querySelectorAll('.chart svg.bar line.ci').length",
    "thresholds": "document.querySelectorAll('.chart svg.bar line.threshold').length",
    "table": "document.querySelector('table tbody').innerText",
    "footer": "document.querySelector('footer').innerText",
    "text": "document.body.innerText",
}


"""What the verify page shows, read in the browser."""


@pytest.mark.browser
def test_the_browser_shows_the_failing_config_first_with_its_score_and_threshold(
    verify_page, shown
):
    v = shown(verify_page, "verify-report", REPORT, readme=(README_SHOT, 1150)).values
    assert v["title"] == (
        "gsm8k: fake vllm fp8 isl=1024 osl=512: exact_match of 10 configs "
        "(6 with a problem, listed first)"
    )
    assert v["first"].split("\n") == ["FAIL", "b200 conc=32", "0.7000 [0.5625, 0.8090] thr 0.9000"]
    assert [row.split("\n")[:2] for row in v["rows"]] == [
        ["FAIL", "b200 conc=32"],
        ["ERROR", "b200 conc=64"],
        ["MALFORMED", "eval_fake_h100_conc16/result.json"],
        ["MISSING", "b200 conc=128"],
        ["MISSING", "h100 conc=16"],
        ["INCONCLUSIVE", "b200 conc=16"],
        ["PASS", "b200 conc=4"],
        ["PASS", "b200 conc=8"],
        ["PASS", "h100 conc=4"],
        ["PASS", "h100 conc=8"],
    ]
    # the chart is drawn: a dot, an interval and a threshold line for each of the six scores
    assert (v["dots"], v["intervals"], v["thresholds"]) == (6, 6, 6)
    assert "run error in stage probe: The engine rejected the pre-flight request" in v["text"]
    assert v["table"].startswith("FAIL\tfake b200 vllm fp8 isl=1024 osl=512 conc=32\t")
    assert "0.7000\t0.5625\u20130.8090\t50\t0.9000 default" in v["table"]  # an en dash
    assert v["footer"].startswith(
        "results\neval-artifacts\nthresholds\nthresholds.json\n"
        "expected set\n--expect expected-evals.json: 9 configs\nmin samples\nas each run recorded\n"
    )
    assert v["footer"].endswith(f"evalgate\n{__version__}")


def pathlike(text: str, name: str) -> str:
    """The path in `text` that ends with `name`."""
    [path] = re.findall(rf"\S*{re.escape(name)}", text)
    return path


@pytest.mark.browser
def test_the_browser_groups_by_hardware_and_sorts_the_table(verify_page, chromium, screenshot):
    shot = screenshot("verify-report-grouped")
    seen = look(
        chromium,
        verify_page,
        {"grouped": GROUP_BY_HARDWARE, "sorted": CLICK_SCORE},
        screenshot=shot,
    )
    assert seen.errors == []
    grouped = [row.split("\n")[:2] for row in seen.values["grouped"]]
    assert grouped == [
        ["hardware (none): 1 config, 1 with a problem"],
        ["MALFORMED", "eval_fake_h100_conc16/result.json"],
        ["hardware b200: 6 configs, 4 with a problem"],
        ["FAIL", "b200 conc=32"],
        ["ERROR", "b200 conc=64"],
        ["MISSING", "b200 conc=128"],
        ["INCONCLUSIVE", "b200 conc=16"],
        ["PASS", "b200 conc=4"],
        ["PASS", "b200 conc=8"],
        ["hardware h100: 3 configs, 1 with a problem"],
        ["MISSING", "h100 conc=16"],
        ["PASS", "h100 conc=4"],
        ["PASS", "h100 conc=8"],
    ]
    scores = [row.split(" | ")[1] for row in seen.values["sorted"]]
    assert scores == ["-"] * 4 + ["0.7000", "0.9600"] + ["1.0000"] * 4


@pytest.mark.unit
def test_the_readme_shows_the_screenshot_the_browser_tier_makes():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/verify-report.png)" in readme
    assert README_SHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.unit
def test_a_big_sweep_draws_its_problems_and_the_closest_passes_and_tables_every_config():
    items = [found(c, ("gsm8k", 0.95 + c / 1e7)) for c in range(1, 2001)]
    items += [found(c, ("gsm8k", 0.5)) for c in range(5001, 5004)]
    page = page_of(*items)
    [rows] = chart_rows(page)
    assert len(rows) == html.MAX_CHART_ROWS
    assert rows[:3] == ["FAIL conc=5001", "FAIL conc=5002", "FAIL conc=5003"]
    drawn = sorted(int(row.split("conc=")[1]) for row in rows[3:])
    assert drawn == list(range(1, html.MAX_CHART_ROWS - 2))  # the passes nearest the threshold
    assert "Drawn: 500 of the 2003 configs, the problems first" in page
    assert "exact_match of 2003 configs (3 with a problem, listed first)" in page
    assert page.count("<tbody>") == 2003
