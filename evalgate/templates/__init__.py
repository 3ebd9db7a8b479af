"""The reports' templates, and what fills them: every value a template is given reaches its
output through that output's neutraliser (evalgate.outside), so no report module makes outside
text safe itself (docs/architecture.md, "Rules that hold everywhere").

- HTML (verify's, compare's and history's pages) and JUnit XML: jinja2 with autoescaping. A
  value is cleaned for its output first (secrets scrubbed, control characters made visible:
  outside.html, outside.xml); jinja2 escapes a page's text, and JUnit's is escaped as
  ElementTree escapes it (text: & < >; an attribute's also quotes and line ends), so the file
  reads as it always has.
- Markdown (verify's job summary, compare --markdown): jinja2, each value one cell
  (outside.markdown); the filters `code` (inline code) and `mermaid` (a chart's label).
- The terminal: str.format strings (`line`), each value one safe line (outside.terminal).

Evalgate's own markup (a macro's output) is Markup and passes as it is. jinja2 is imported when
a template is first rendered: verify's terminal report starts without it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from evalgate import outside

if TYPE_CHECKING:
    from jinja2 import Environment

_ATTRIBUTE = {'"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#09;"}
"""What an XML attribute's value escapes beyond & < > (as ElementTree writes it)."""


class Said(NamedTuple):
    """A line for several outputs: evalgate's words as a str.format string, and the outside
    values it places, each made safe by the output that shows it (`line`, the `said` filter)."""

    text: str
    values: tuple[object, ...] = ()


def _placed(values: tuple[object, ...], neutralise: Callable[[object], object]) -> list[object]:
    """`values` as a format string places them: a number as it is (evalgate formats it), any
    other value made safe for its output first (a width then pads what is shown)."""
    return [v if isinstance(v, int | float) else neutralise(v) for v in values]


def line(text: str, *values: object) -> str:
    """`text` (evalgate's words, a str.format string) with `values` placed, each made one safe
    line for the terminal first."""
    return text.format(*_placed(values, outside.terminal))


@functools.cache
def environment(kind: str) -> Environment:
    """The environment of one output: "html", "xml" or "md", a template's suffix."""
    from xml.sax.saxutils import escape  # urllib.request with it: not at start-up

    from jinja2 import Environment, FileSystemLoader, StrictUndefined
    from markupsafe import Markup

    from evalgate.page import esc

    def xml(value: object, entities: dict[str, str] | None = None) -> Markup:
        return Markup(escape(outside.xml(value), entities or {}))

    neutralisers: dict[str, Callable[[object], object]] = {
        "html": esc,  # a str: autoescaping escapes it
        "xml": xml,
        "md": lambda value: Markup(outside.markdown(value)),
    }
    neutralise = neutralisers[kind]

    def finalize(value: object) -> object:
        if isinstance(value, Markup | int | float):  # evalgate's own markup, or a number
            return value
        return neutralise(value)

    def said(found: Said) -> Markup:
        return Markup(found.text.format(*_placed(found.values, finalize)))

    environment = Environment(
        loader=FileSystemLoader(Path(__file__).parent),
        autoescape=True,
        finalize=finalize,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,
    )
    environment.filters |= {
        "said": said,
        "attribute": lambda value: value if isinstance(value, Markup) else xml(value, _ATTRIBUTE),
        "code": lambda text: Markup(outside.markdown_code(text)),
        "mermaid": lambda text: Markup(outside.mermaid(text)),
    }
    return environment


def render(name: str, **context: object) -> str:
    """The template `name` (under evalgate/templates) filled with `context`."""
    return environment(name.rpartition(".")[2]).get_template(name).render(context)
