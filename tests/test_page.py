"""evalgate.templates: the page's templates: scales and ticks, escaping, tables, the skeleton; and
the
browser tier's own check for network references (so that "no reference" is an assertion that
can fail)."""

from __future__ import annotations

import pytest

from evalgate import templates
from evalgate import templates as page
from evalgate._version import __version__
from evalgate.templates import Scale
from tests.browser import network_references

pytestmark = pytest.mark.unit


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


def charts(source: str, **context: object) -> str:
    """`source` rendered as a page's templates are, with charts.html's macros as `page`."""
    macros = '{% import "charts.html" as page %}'
    return templates.environment("html").from_string(macros + source).render(context)


def test_a_table_row_sorts_by_its_key_and_escapes_its_detail():
    text = charts(
        '{% call page.table(["a", "b"]) %}{% for x, key, more in rows %}<tbody><tr><td>{{ x }}'
        '</td><td data-sort="{{ key }}">{{ x }}</td></tr>{% call page.detail(2) %}{{ more }}'
        "{% endcall %}</tbody>{% endfor %}{% endcall %}",
        rows=[("x<y", 1.5, "<detail> & more"), ("z", 2, "")],
    )
    assert '<td data-sort="1.5">x&lt;y</td>' in text
    assert '<tr class="detail"><td colspan="2">&lt;detail&gt; &amp; more</td></tr>' in text
    assert text.count('class="detail"') == 1  # nothing to say: no line
    assert '<th scope="col" title="sort">a</th>' in text


def test_a_value_is_cleaned_then_escaped_and_the_pages_own_markup_kept():
    assert page.esc("<a & 'b'>\x1b[31m\x07") == "<a & 'b'>\\x07"  # escaped by the template
    text = charts("{{ page.badge(word, 'fail') }}", word="<b>\u202e")
    assert text == '<span class="badge tone-fail">&lt;b&gt;\\u202e</span>'


def test_the_page_names_its_inputs_and_version_and_fetches_nothing():
    text = templates.render_page(
        "page.html",
        title="t <1>",
        tone="fail",
        summary="s",
        counts=[("fail", 2, "fail"), ("pass", 0, "pass")],
    )
    assert "<title>t &lt;1&gt;</title>" in text
    assert '<li class="tone-fail"><b>2</b> fail</li>' in text and "</b> pass" not in text
    assert f"<dt>evalgate</dt><dd>{__version__}</dd>" in text
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
