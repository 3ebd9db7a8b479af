"""Self-contained HTML pages, opened offline as CI artifacts: the skeleton, tables and SVG interval
charts that verify/html.py and compare/html.py draw (docs/verify.md, "Outputs").
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from evalgate import outside
from evalgate._version import __version__
from evalgate.evidence.stage_records import Labels

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


esc = outside.html
"""Text (or a number) made safe for HTML content and attribute values (evalgate.outside)."""


def attrs(values: Mapping[str, object]) -> str:
    """` name="value"` pairs for an element's start tag; None values are left out."""
    return "".join(f' {name}="{esc(value)}"' for name, value in values.items() if value is not None)


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


def _rule(kind: str, x: float, top: str, bottom: str) -> str:
    """A vertical line at `x` percent of the width: a mark, an interval's cap, a tick."""
    return f'<line class="{kind}" x1="{x}%" x2="{x}%" y1="{top}" y2="{bottom}"/>'


def interval_svg(
    scale: Scale,
    *,
    point: float,
    low: float | None = None,
    high: float | None = None,
    marks: Sequence[Mark] = (),
    start: float | None = None,
    label: str,
) -> str:
    """One chart row's drawing: reference lines, the interval with its caps, the point; `start`
    draws a line from another value to the point instead (a baseline to a candidate)."""
    parts = [_rule(m.kind, scale.at(m.value), "0", "100%") for m in marks]
    if low is not None and high is not None:
        a, b = scale.at(low), scale.at(high)
        parts.append(f'<line class="ci" x1="{a}%" x2="{b}%" y1="50%" y2="50%"/>')
        parts += [_rule("cap", x, "28%", "72%") for x in (a, b)]
    if start is not None:
        s = scale.at(start)
        parts.append(f'<line class="move" x1="{s}%" x2="{scale.at(point)}%" y1="50%" y2="50%"/>')
        parts.append(f'<circle class="from" cx="{s}%" cy="50%" r="5"/>')
    parts.append(f'<circle class="point" cx="{scale.at(point)}%" cy="50%" r="5.5"/>')
    return (
        f'<svg class="bar" role="img" aria-label="{esc(label)}"><title>{esc(label)}</title>'
        + "".join(parts)
        + "</svg>"
    )


def axis_svg(scale: Scale, text: Mapping[float, str], marks: Sequence[Mark] = ()) -> str:
    """The chart's axis: tick labels (`text` maps a tick to its label) and named marks."""
    ticks = [
        _rule("tick", scale.at(t), "70%", "100%")
        + f'<text x="{scale.at(t)}%" y="58%">{esc(label)}</text>'
        for t, label in text.items()
    ]
    named = [_rule(m.kind, scale.at(m.value), "70%", "100%") for m in marks]
    return '<svg class="axis" aria-hidden="true">' + "".join(ticks + named) + "</svg>"


def badge(text: str, tone: Tone) -> str:
    """An outcome written in a coloured box (words, not colour alone, carry the meaning)."""
    return f'<span class="badge tone-{tone}">{esc(text)}</span>'


@dataclass(frozen=True)
class Line:
    """What a chart row says in words: its outcome (`mark`, in the `tone`'s colour), its name and
    a note; `data` become data-* attributes the script groups and orders rows by."""

    tone: Tone
    mark: str
    label: str
    note: str = ""
    data: Mapping[str, object] | None = None


def chart_row(line: Line, drawing: str, numbers: str) -> str:
    """One line of a chart; `drawing` and `numbers` are HTML."""
    extra = attrs({f"data-{k}": v for k, v in (line.data or {}).items()})
    small = f' <span class="note">{esc(line.note)}</span>' if line.note else ""
    return (
        f'<div class="row tone-{line.tone}"{extra}>{badge(line.mark, line.tone)}'
        f'<span class="label"><span class="name">{esc(line.label)}</span>{small}</span>'
        f'{drawing}<span class="numbers">{numbers}</span></div>'
    )


def chart(title: str, axis: str, rows: Sequence[str], *, legend: str = "") -> str:
    """A chart: its title, the axis, then the rows (grouped and reordered by the script)."""
    return (
        f'<figure class="chart"><figcaption>{esc(title)}</figcaption>'
        f'<div class="row head"><span></span><span></span>{axis}<span></span></div>'
        f'<div class="rows">{"".join(rows)}</div>'
        + (f'<p class="legend">{legend}</p>' if legend else "")
        + "</figure>"
    )


GROUPS = ("model", "hardware", "framework", "precision", "concurrency")
"""The run labels a chart's rows can be grouped by (page.js regroups them by the chosen one)."""


def groups(labels: Labels | None, model: str | None) -> dict[str, str]:
    """A run's value of each of GROUPS, as its row's data-* attributes carry it: "(none)" when
    unset, the model_prefix label (else the model served) for the model."""
    labels = labels or Labels()
    values = {"model": labels.model_prefix or model, **{k: getattr(labels, k) for k in GROUPS[1:]}}
    return {k: "(none)" if v is None else str(v) for k, v in values.items()}


# -- tables and the page -------------------------------------------------------------------------

Cell = str | tuple[str, object]
"""A cell's HTML, or (HTML, sort key) when it should not sort by its text."""


@dataclass(frozen=True)
class Row:
    """A table row, and what is said about it on a full-width line of its own beneath."""

    cells: Sequence[Cell]
    detail: str = ""
    """HTML: a reason, a path, a question."""


def table(headers: Sequence[str], rows: Iterable[Row], *, caption: str = "") -> str:
    """A table whose rows (each with its detail line) sort when a column's header is clicked."""
    head = "".join(f'<th scope="col" title="sort">{esc(h)}</th>' for h in headers)
    body = []
    for row in rows:
        cells = []
        for cell in row.cells:
            content, key = cell if isinstance(cell, tuple) else (cell, None)
            cells.append(f"<td{attrs({'data-sort': key})}>{content}</td>")
        detail = (
            f'<tr class="detail"><td colspan="{len(headers)}">{row.detail}</td></tr>'
            if row.detail
            else ""
        )
        body.append(f"<tbody><tr>{''.join(cells)}</tr>{detail}</tbody>")
    title = f"<caption>{esc(caption)}</caption>" if caption else ""
    return (
        f'<div class="scroll"><table class="sortable">{title}<thead><tr>{head}</tr></thead>'
        f"{''.join(body)}</table></div>"
    )


def section(title: str, content: str) -> str:
    return f"<section><h2>{esc(title)}</h2>{content}</section>"


@functools.cache
def _asset(name: str) -> str:
    """page.css or page.js, shipped beside this module and inlined into every page."""
    return (Path(__file__).parent / name).read_text(encoding="utf-8")


def document(
    *,
    title: str,
    tone: Tone,
    summary: str,
    counts: Sequence[tuple[str, int, Tone]] = (),
    body: Sequence[str],
    inputs: Sequence[tuple[str, str]],
) -> str:
    """The whole page: the verdict header, the sections, and a footer naming every input and
    evalgate's version."""
    chips = "".join(
        f'<li class="tone-{t}"><b>{n}</b> {esc(name)}</li>' for name, n, t in counts if n
    )
    footer = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in inputs)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
        f"<title>{esc(title)}</title><style>{_asset('page.css')}</style></head>\n<body>"
        f'<header class="verdict tone-{tone}"><h1>{esc(title)}</h1>'
        f'<p class="summary">{esc(summary)}</p>'
        + (f'<ul class="counts">{chips}</ul>' if chips else "")
        + "</header>\n<main>"
        + "\n".join(body)
        + f"</main>\n<footer><dl>{footer}<dt>evalgate</dt><dd>{esc(__version__)}</dd></dl>"
        f"</footer>\n<script>{_asset('page.js')}</script></body></html>\n"
    )
