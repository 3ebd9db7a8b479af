"""evalgate.templates: the page's templates: scales and ticks, escaping, tables, the skeleton; and
the
browser tier's own check for network references (so that "no reference" is an assertion that
can fail)."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

from evalgate import scrub, templates
from evalgate import templates as page
from evalgate._version import __version__
from evalgate.templates import Said, Scale, line
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


# evalgate.templates: each output's engine makes every value safe as it places it, and no other
# module does it by hand (the calls of evalgate.scrub are counted, and may not grow).

ROOT = Path(__file__).resolve().parent.parent


PACKAGE = ROOT / "evalgate"


HOSTILE = "a|b <i>x</i> & \"q\" 'p'\n::warning::y \x1b[31mred\x00"


def test_a_terminal_line_places_each_value_on_one_safe_line_and_formats_numbers():
    shown = line("{:<6}|{}|{:.2f}|{:>4}", "ab", HOSTILE, 0.5, 7)

    assert shown == ("ab    |a|b <i>x</i> & \"q\" 'p'\\n::warning::y red\\x00|0.50|   7")
    assert line("{}", "::stop-commands::x") == "\\x3a:stop-commands::x"


@pytest.mark.parametrize(
    ("kind", "shown"),
    [
        ("html", "a|b &lt;i&gt;x&lt;/i&gt; &amp; &#34;q&#34; &#39;p&#39;\n::warning::y red\\x00"),
        ("xml", "a|b &lt;i&gt;x&lt;/i&gt; &amp; \"q\" 'p'\n::warning::y red\\x00"),
        ("md", "a\\|b &lt;i&gt;x&lt;/i&gt; &amp; \"q\" 'p'\\\\n::warning::y red\\\\x00"),
    ],
)
def test_each_environment_makes_a_value_safe_for_its_output(kind, shown):
    environment = templates.environment(kind)

    assert environment.from_string("{{ value }}").render(value=HOSTILE) == shown
    assert environment.autoescape  # a macro's markup is kept, every other value made safe


def test_an_xml_attribute_escapes_quotes_and_line_ends_as_elementtree_does():
    template = templates.environment("xml").from_string('<a b="{{ value|attribute }}"/>')

    assert template.render(value='x"y\n\tz<') == '<a b="x&quot;y&#10;&#09;z&lt;"/>'


def test_every_attribute_of_the_junit_template_goes_through_the_attribute_filter():
    source = (PACKAGE / "templates" / "junit.xml").read_text(encoding="utf-8")
    placed = re.findall(r'="\{\{(.*?)\}\}"', source)

    assert placed and all("|attribute" in value for value in placed)


def test_a_line_said_in_several_outputs_is_made_safe_by_each():
    said = Said("  {:<8} {}: {:.1f} points", ("WAIVED", "x|<y>", 2.0))

    assert line(said.text, *said.values) == "  WAIVED   x|<y>: 2.0 points"
    markdown = templates.environment("md").from_string("{{ said|said }}")
    assert markdown.render(said=said) == "  WAIVED   x\\|&lt;y&gt;: 2.0 points"


def test_a_name_no_template_was_given_is_an_error_not_an_empty_cell():
    from jinja2 import UndefinedError

    with pytest.raises(UndefinedError):
        templates.environment("md").from_string("{{ missing }}").render()


def test_every_template_compiles():
    names = [
        p.name for p in (PACKAGE / "templates").iterdir() if p.suffix in (".html", ".xml", ".md")
    ]

    assert len(names) >= 8
    for name in names:
        templates.environment(name.rpartition(".")[2]).get_template(name)


NEUTRALISERS = frozenset(
    {"listed", "terminal", "terminal_block", "terminal_json", "workflow_data", "workflow_property"}
    | {"markdown", "markdown_code", "mermaid", "xml", "html"}
)


"""evalgate.scrub's functions that make outside text safe for one output (its secrets scrubbed
too); its scrubbing alone (text, values, capped, ...) is not counted."""


MOST = 14


"""Uses of the neutralisers outside evalgate.scrub: the environments' neutralisers (templates), the
terminal's line formatter, the log formatter, JSON on stdout, workflow commands, a listed
model list. A change that adds one makes an output safe by hand: let its template do it."""


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def outside_uses(sources: dict[str, str]) -> Counter[str]:
    """How often each module (by name) uses a neutraliser evalgate.scrub defines: a call, or the
    function handed on (a callback, a filter). Followed: `from evalgate import outside as o`,
    `from evalgate.scrub import f as g`, `import evalgate.scrub as o`, a name bound to such a
    function (`esc = outside.html`, in any scope) and such a name imported from the module that
    binds it. Binding a name is not a use; each use of the name is."""
    trees = {name: ast.parse(source) for name, source in sources.items()}
    defined = {
        node.name
        for node in trees["evalgate.scrub"].body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in NEUTRALISERS
    }
    functions = {name: set() for name in trees} | {"evalgate.scrub": defined}
    modules = {name: set() for name in trees}  # names bound to the outside module

    def scope(name: str, tree: ast.Module) -> tuple[set[str], set[str]]:
        mods, funcs = set(modules[name]), set(functions[name])
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    bound = alias.asname or alias.name
                    if f"{node.module}.{alias.name}" == "evalgate.scrub":
                        mods.add(bound)
                    elif alias.name in functions.get(node.module, ()):
                        funcs.add(bound)
                    elif alias.name in modules.get(node.module, ()):
                        mods.add(bound)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "evalgate.scrub":
                        mods.add(alias.asname or alias.name)
        return mods, funcs

    def is_use(node: ast.AST, mods: set[str], funcs: set[str]) -> bool:
        if isinstance(node, ast.Name):
            return node.id in funcs
        return (
            isinstance(node, ast.Attribute)
            and ast.unparse(node.value) in mods
            and (node.attr in defined)
        )

    changed = True
    while changed:  # bindings until none is new (a re-export of a re-export)
        changed = False
        for name, tree in trees.items():
            if name == "evalgate.scrub":
                continue
            mods, funcs = scope(name, tree)
            new = modules[name] | (mods - modules[name])
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and is_use(node.value, mods, funcs):
                    functions[name] |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            if new != modules[name] or functions[name] - funcs:
                modules[name] = new
                changed = True
    uses: Counter[str] = Counter()
    for name, tree in trees.items():
        if name == "evalgate.scrub":
            continue
        mods, funcs = scope(name, tree)
        bindings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)}
        uses[name] += sum(
            1
            for node in ast.walk(tree)
            if isinstance(node, ast.Name | ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and id(node) not in bindings
            and is_use(node, mods, funcs)
        )
    return +uses


def test_the_counter_follows_every_way_of_reaching_outside():
    sources = {
        "evalgate.scrub": "def terminal(x): ...\ndef markdown(x): ...\nLIMIT = 5",
        "evalgate.a": "from evalgate import scrub as o\no.terminal(1)\nmap(o.markdown, [])",
        "evalgate.b": "from evalgate.scrub import terminal as t\nt(1)\nf = t\nf(2)\nf(3)",
        "evalgate.c": "from evalgate.b import f\nf(4)\nimport evalgate.scrub\n",
        "evalgate.d": "import evalgate.scrub as eo\ndef g():\n    h = eo.markdown\n    h(5)",
        "evalgate.e": "from evalgate.a import o\no.terminal(6)\nfrom evalgate import scrub\n"
        "scrub.LIMIT",
    }

    assert outside_uses(sources) == {
        "evalgate.a": 2,
        "evalgate.b": 3,
        "evalgate.c": 1,
        "evalgate.d": 1,
        "evalgate.e": 1,
    }


def test_outputs_are_made_safe_by_their_templates_not_by_hand():
    sources = {
        _module(path, ROOT): path.read_text(encoding="utf-8") for path in PACKAGE.rglob("*.py")
    }
    uses = outside_uses(sources)

    assert set(dir(scrub)) >= NEUTRALISERS, NEUTRALISERS - set(dir(scrub))
    assert sum(uses.values()) <= MOST, f"{sum(uses.values())} uses of evalgate.scrub: {uses}"
