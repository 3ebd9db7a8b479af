"""Self-contained HTML pages, opened offline as CI artifacts: what verify/html.py, compare/html.py
and history/page.py give their templates (templates/page.html, the skeleton; charts.html, the
tables and SVG interval charts): tones, scales, the words of a chart's row (docs/verify.md,
"Outputs").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from evalgate import outside, templates
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
"""Text (or a number) as a page shows it: scrubbed, its control characters made visible
(evalgate.outside); the page's template escapes it."""


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
    labels = labels or Labels()
    values = {"model": labels.model_prefix or model, **{k: getattr(labels, k) for k in GROUPS[1:]}}
    return {k: "(none)" if v is None else str(v) for k, v in values.items()}


def render(name: str, **context: object) -> str:
    """The page `name` (a template under evalgate/templates that extends page.html), with
    evalgate's version in its footer."""
    return templates.render(name, version=__version__, **context)
