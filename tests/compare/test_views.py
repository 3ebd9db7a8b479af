"""`evalgate compare --html`: the page, and what Chromium shows of it.

The browser test compares two real loopback runs of the same 50 questions (conftest's
`loopback_sweep`: an engine answering all of them right, and one answering 70% right).
"""

from __future__ import annotations

import pytest

from evalgate.errors import ExitCode
from tests.browser import network_references
from tests.compare.run_files import paired_outcomes, write_run
from tests.conftest import run_subprocess


@pytest.fixture
def compare_html(cli, tmp_path):
    def run(*argv: str) -> tuple[int, str, str]:
        out = tmp_path / "page" / "compare.html"
        result = cli("compare", *argv, "--html", str(out))
        return result.code, out.read_text(encoding="utf-8"), result.out

    return run


@pytest.mark.unit
def test_the_page_shows_protocol_drift_and_left_out_questions(tmp_path, compare_html):
    base, cand = paired_outcomes(200, lost=3, gained=1)
    write_run(tmp_path / "a", base, max_tokens=1024)
    write_run(tmp_path / "b", cand, max_tokens=2048, failed=[150])
    code, page, out = compare_html(
        str(tmp_path / "a"), str(tmp_path / "b"), "--allow-protocol-drift"
    )
    assert code == ExitCode.INCONCLUSIVE
    assert out.startswith("evalgate compare: INCONCLUSIVE (exit 5)")  # stdout as without --html
    assert network_references(page) == []
    assert "The runs were not measured the same way" in page
    assert "<td>max_tokens</td><td>1024</td><td>2048</td>" in page
    assert "request failed in the candidate run: 1 (doc_id 150)" in page
    # the same flips in both filters are listed once
    assert "Flipped questions, strict-match: 3 lost, 1 gained" in page
    assert "<p>The same questions as strict-match.</p>" in page


@pytest.mark.unit
def test_identical_runs_say_nothing_flipped(tmp_path, compare_html):
    base, cand = paired_outcomes(1319)
    write_run(tmp_path / "a", base)
    write_run(tmp_path / "b", cand)
    code, page, _ = compare_html(str(tmp_path / "a"), str(tmp_path / "b"))
    assert code == ExitCode.PASS
    assert "evalgate compare: EQUIVALENT" in page
    assert "None: both runs were measured the same way." in page
    assert "None: every paired question was answered alike by both runs." in page


@pytest.mark.unit
def test_questions_are_escaped(tmp_path, compare_html):
    base, cand = paired_outcomes(20, lost=1)
    write_run(tmp_path / "a", base, question_edits={0: "Is 3 < 4 & <b>bold</b>?"})
    write_run(tmp_path / "b", cand, question_edits={0: "Is 3 < 4 & <b>bold</b>?"})
    _, page, _ = compare_html(str(tmp_path / "a"), str(tmp_path / "b"))
    assert "Is 3 &lt; 4 &amp; &lt;b&gt;bold&lt;/b&gt;?" in page


SCORES = "Array.from(document.querySelectorAll('figure.chart')).map(f => f.innerText)"


FLIPS = """Array.from(document.querySelectorAll('section')).filter(
  s => s.querySelector('h2').innerText.startsWith('Flipped questions, strict-match')
).map(s => Array.from(s.querySelectorAll('tbody')).map(b => b.innerText))[0]"""


@pytest.mark.browser
def test_the_browser_shows_the_difference_its_interval_and_the_flipped_questions(
    loopback_sweep, cli, tmp_path, shown
):
    runs = loopback_sweep.runs
    page_path = tmp_path / "compare.html"
    result = cli("compare", str(runs["pass"]), str(runs["fail"]), "--html", str(page_path))
    assert result.code == ExitCode.FAIL, result.text
    probes = {
        "title": "document.querySelector('h1').innerText",
        "charts": SCORES,
        "dots": "document.querySelectorAll('figure.chart svg.bar circle.point').length",
        "margins": "document.querySelectorAll('figure.chart svg.bar line.margin').length",
        "flips": FLIPS,
    }
    v = shown(page_path, "compare-report", probes).values
    assert v["title"] == "evalgate compare: REGRESSION"
    scores, difference = v["charts"]
    assert "REGRESSION\nstrict-match n=50\n100.00% → 70.00%" in scores
    assert "REGRESSION\nstrict-match 15 lost, 0 gained\n-30.00 [-43.75, -19.10] pts" in difference
    assert (v["dots"], v["margins"]) == (4, 2)  # both filters in both charts; a margin line each
    assert len(v["flips"]) == 15
    cells, question = v["flips"][0].split("\n", 1)
    _, change, target, before, after = cells.split("\t")
    assert change == "LOST" and before == target and after != target
    assert len(question) > 40  # the question's text, in full


@pytest.mark.loopback
def test_a_page_that_cannot_be_written_keeps_the_verdicts_exit_code(tmp_path):
    """The verdict is printed first: a page the disk refuses after it (/dev/full) keeps the
    verdict's exit code, and the last line says it and names the page. Before, the report said
    `INCONCLUSIVE (exit 5)` and the command exited 2."""
    base, cand = paired_outcomes(20, lost=1)
    write_run(tmp_path / "a", base)
    write_run(tmp_path / "b", cand)

    done = run_subprocess(
        "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--html", "/dev/full"
    )

    assert done.returncode == ExitCode.INCONCLUSIVE, done.stderr
    assert done.stdout.startswith("evalgate compare: INCONCLUSIVE (exit 5)")
    assert done.stderr.startswith("ArtifactError: Cannot write /dev/full: No space left on device")
    assert done.stderr.splitlines()[-1] == (
        "evalgate compare: INCONCLUSIVE (exit 5); not written (see above): --html /dev/full"
    )
