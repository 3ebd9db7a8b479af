"""The reports' templates, and what fills them, the pages' tones and scales included: every value
a template is given reaches its output through that output's neutraliser (evalgate.scrub), so no
report module makes outside text safe itself (docs/architecture.md, "Rules that hold everywhere").

- HTML (verify's, compare's and history's pages) and JUnit XML: jinja2 with autoescaping. A
  value is cleaned for its output first (secrets scrubbed, control characters made visible:
  scrub.html, scrub.xml); jinja2 escapes a page's text, and JUnit's is escaped as
  ElementTree escapes it (text: & < >; an attribute's also quotes and line ends), so the file
  reads as it always has.
- Markdown (verify's job summary, compare --markdown): jinja2, each value one cell
  (scrub.markdown); the filters `code` (inline code) and `mermaid` (a chart's label).
- The terminal: str.format strings (`line`), each value one safe line (scrub.terminal).

Evalgate's own markup (a macro's output) is Markup and passes as it is. jinja2 is imported when
a template is first rendered: verify's terminal report starts without it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

from evalgate import scrub
from evalgate._version import __version__

if TYPE_CHECKING:
    from jinja2 import Environment

    from evalgate.evidence.model import Labels

_ATTRIBUTE = {'"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#09;"}
"""What an XML attribute's value escapes beyond & < > (as ElementTree writes it)."""


class Said(NamedTuple):
    """A line for several outputs: evalgate's words as a str.format string, and the outside
    values it places, each made safe by the output that shows it (`line`, the `said` filter)."""

    text: str
    values: tuple[object, ...] = ()


def line(text: str, *values: object) -> str:
    """`text` (evalgate's words, a str.format string) with `values` placed: a number as it is
    (evalgate formats it), any other value made one safe line for the terminal first (a width
    then pads what is shown)."""
    return text.format(*(v if isinstance(v, int | float) else scrub.terminal(v) for v in values))


@functools.cache
def environment(kind: str) -> Environment:
    """The environment of one output: "html", "xml" or "md", a template's suffix."""
    from xml.sax.saxutils import escape  # urllib.request with it: not at start-up

    from jinja2 import Environment, FileSystemLoader, StrictUndefined
    from markupsafe import Markup

    def xml(value: object, entities: dict[str, str] | None = None) -> Markup:
        return Markup(escape(scrub.xml(value), entities or {}))

    neutralisers: dict[str, Callable[[object], object]] = {
        "html": esc,  # a str: autoescaping escapes it
        "xml": xml,
        "md": lambda value: Markup(scrub.markdown(value)),
    }
    neutralise = neutralisers[kind]

    def finalize(value: object) -> object:
        if isinstance(value, Markup | int | float):  # evalgate's own markup, or a number
            return value
        return neutralise(value)

    def said(found: Said) -> Markup:
        return Markup(found.text.format(*map(finalize, found.values)))  # a number as it is

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
        "code": lambda text: Markup(scrub.markdown_code(text)),
        "mermaid": lambda text: Markup(scrub.mermaid(text)),
    }
    return environment


def render(name: str, **context: object) -> str:
    """The template `name` (under evalgate/templates) filled with `context`."""
    return environment(name.rpartition(".")[2]).get_template(name).render(context)


# The HTML pages, self-contained so they open offline as CI artifacts: what verify/html.py,
# compare/views.py and history/look.py give page.html (the skeleton) and charts.html (the tables
# and SVG interval charts).

Tone = Literal["pass", "warn", "fail", "broken", "info"]
"""A colour family; "broken": there was no score to judge."""
TONES: Mapping[str, Tone] = {
    "pass": "pass",
    "improved": "pass",
    "equivalent": "pass",
    "inconclusive": "warn",
    "fail": "fail",
    "regression": "fail",
}
"""The outcomes (verify's) and findings (compare's) with a score to judge."""


def tone(outcome: str) -> Tone:
    """The colour of an outcome or finding: "broken" for one with no score to judge (errored,
    malformed, missing, ...)."""
    return TONES.get(outcome, "broken")


esc = scrub.html
"""Text (or a number) as a page shows it: scrubbed, its control characters made visible
(evalgate.scrub); the page's template escapes it."""


# -- charts --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    """A horizontal value range drawn as 0-100% of a chart's width."""

    low: float
    high: float

    @classmethod
    def around(cls, values: Iterable[float], *, floor: float = 0.0, ceiling: float = 1.0) -> Scale:
        """The range of `values` widened to round ticks, within [floor, ceiling]."""
        seen = [v for v in values if math.isfinite(v)] or [floor, ceiling]
        low, high = min(seen), max(seen)
        step = _step(max(high - low, (ceiling - floor) / 10))
        low = max(floor, math.floor(low / step - 0.5) * step)
        high = min(ceiling, math.ceil(high / step + 0.5) * step)
        return cls(low, high if high > low else low + step)

    def at(self, value: float) -> float:
        """Where `value` falls, in percent of the width (clamped to the chart)."""
        return round(min(100.0, max(0.0, (value - self.low) / (self.high - self.low) * 100)), 3)

    def ticks(self) -> list[float]:
        """About five round values across the range."""
        step = _step(self.high - self.low)
        first = math.ceil(self.low / step - 1e-9)
        count = math.floor(self.high / step + 1e-9) - first + 1
        return [round((first + i) * step, 10) for i in range(count)]


def _step(span: float) -> float:
    """A round tick spacing (1, 2 or 5 times a power of ten) giving about five ticks."""
    raw = span / 5
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


@dataclass(frozen=True)
class Mark:
    """A vertical reference line across a chart row: a threshold, a margin, zero."""

    value: float
    kind: str
    """CSS class: "threshold", "margin" or "zero"."""


@dataclass(frozen=True)
class Line:
    """What a chart row says in words: its outcome (`mark`, in the `tone`'s colour), its name and
    a note; `data` become data-* attributes the script groups and orders rows by."""

    tone: Tone
    mark: str
    label: str
    note: str = ""
    data: Mapping[str, object] | None = None


GROUPS = ("model", "hardware", "framework", "precision", "concurrency")
"""The run labels a chart's rows can be grouped by (page.js regroups them by the chosen one)."""


def groups(labels: Labels | None, model: str | None) -> dict[str, str]:
    """A run's value of each of GROUPS, as its row's data-* attributes carry it: "(none)" when
    unset, the model_prefix label (else the model served) for the model."""
    given = {k: getattr(labels, k) for k in ("model_prefix", *GROUPS[1:])} if labels else {}
    values = {"model": given.get("model_prefix") or model, **{k: given.get(k) for k in GROUPS[1:]}}
    return {k: "(none)" if v is None else str(v) for k, v in values.items()}


def render_page(name: str, **context: object) -> str:
    """The page `name` (a template under evalgate/templates that extends page.html), with
    evalgate's version in its footer."""
    return render(name, version=__version__, **context)
