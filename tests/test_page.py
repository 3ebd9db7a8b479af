"""page.py: scales and ticks, escaping, tables, the page's skeleton; and the browser tier's own
check for network references (so that "no reference" is an assertion that can fail)."""

from __future__ import annotations

import pytest

from evalgate import page
from evalgate._version import __version__
from evalgate.page import Scale
from tests.browser import network_references


@pytest.mark.parametrize(
    ("values", "floor", "low", "high", "ticks"),
    [
        ([0.5625, 0.809, 0.9, 1.0], 0.0, 0.5, 1.0, [0.5, 0.6, 0.7, 0.8, 0.9, 1.0]),
        ([0.93, 0.96, 0.91], 0.0, 0.9, 0.98, [0.9, 0.92, 0.94, 0.96, 0.98]),
        ([-0.4375, -0.191, -0.02, 0.0], -1.0, -0.5, 0.1, [-0.4, -0.2, 0.0]),
        ([0.9, 0.9], 0.0, 0.88, 0.92, [0.88, 0.89, 0.9, 0.91, 0.92]),
        ([], 0.0, 0.0, 1.0, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    ],
)
def test_a_scale_widens_to_round_ticks_within_its_bounds(values, floor, low, high, ticks):
    scale = Scale.around(values, floor=floor)
    assert (scale.low, scale.high) == pytest.approx((low, high))
    assert scale.ticks() == pytest.approx(ticks)
    assert all(0 <= scale.at(v) <= 100 for v in values)


def test_positions_are_percentages_clamped_to_the_chart():
    scale = Scale(0.5, 1.0)
    assert [scale.at(v) for v in (0.5, 0.75, 1.0, 0.2, 1.3)] == [0.0, 50.0, 100.0, 0.0, 100.0]


def test_a_table_row_sorts_by_its_key_and_escapes_its_detail():
    text = page.table(["a", "b"], [page.Row(["x<y", ("<b>1</b>", 1.5)], "<detail> & more")])
    assert '<td data-sort="1.5"><b>1</b></td>' in text
    assert '<tr class="detail"><td colspan="2"><detail> & more</td></tr>' in text  # HTML given
    assert page.esc("<a & 'b'>") == "&lt;a &amp; &#x27;b&#x27;&gt;"


def test_the_page_names_its_inputs_and_version_and_fetches_nothing():
    text = page.document(
        title="t <1>",
        tone="fail",
        summary="s",
        counts=[("fail", 2, "fail"), ("pass", 0, "pass")],
        body=[page.section("S", "<p>body</p>")],
        inputs=[("results", "<code>a</code>")],
    )
    assert "<title>t &lt;1&gt;</title>" in text
    assert '<li class="tone-fail"><b>2</b> fail</li>' in text and "</b> pass" not in text
    assert f"<dt>results</dt><dd><code>a</code></dd><dt>evalgate</dt><dd>{__version__}</dd>" in text
    assert network_references(text) == []


@pytest.mark.parametrize(
    "source",
    [
        '<img src="x.png">',
        '<link rel="stylesheet" href="a.css">',
        '<div style="background: url(a.png)">',
        "<style>@import 'a.css';</style>",
        "<script>fetch('/a')</script>",
        '<meta http-equiv="refresh" content="0; url=https://example.com">',
        '<svg><image xlink:href="a.png"/></svg>',
    ],
)
def test_the_reference_check_catches_each_way_a_page_can_fetch(source):
    assert network_references(f"<html><body>{source}</body></html>") != []


def test_text_that_shows_an_address_fetches_nothing():
    assert network_references("<p>served at http://127.0.0.1:8000/v1</p>") == []
