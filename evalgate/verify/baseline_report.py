"""The comparison with the baseline (--baseline) in each form the verdict takes, every outside text
through the caller's evalgate.outside function (docs/verify.md, "Against the last good sweep").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from evalgate.compare.reason import points
from evalgate.verify.records import BaselineSummary, Entry, Versus
from evalgate.verify.waivers import describe

HEADER = ["VS BASELINE", "DIFF (95% CI)"]
LISTED = ("protocol", "early-stop", "new", "not compared")
"""Standings listed with their reason: the configs that were not compared."""


def difference(versus: Versus | None) -> str:
    """'-6.07 [-7.62, -4.70] strict-match', or '-' when not compared."""
    if versus is None or versus.difference is None or versus.low is None or versus.high is None:
        return "-"
    return (
        f"{points(versus.difference)} [{points(versus.low)}, {points(versus.high)}] {versus.filter}"
    )


def standing(versus: Versus | None) -> str:
    """'REGRESSION', 'REGRESSION (waived)', 'NEW', ... or '-' without a comparison."""
    if versus is None:
        return "-"
    return versus.standing.upper() + (" (waived)" if versus.waiver is not None else "")


def findings(
    entries: Iterable[Entry], summary: BaselineSummary, safe: Callable[[object], str]
) -> Iterator[str]:
    """The section's lines (no line ends): waived regressions, each config not compared and
    why, the warnings, the baseline's configs missing from the sweep, unused waivers."""
    paths = ", ".join(safe(p) for p in summary.paths)
    yield (
        f"Against the baseline {paths} ({summary.configs} results; margin "
        f"{summary.max_drop * 100:.1f} points; one-sided exact tests, Holm's adjustment over "
        "the configs):"
    )
    for entry in entries:
        versus = entry.versus
        if versus is None:
            continue
        name = safe(entry.key)
        if versus.waiver is not None:
            yield f"  WAIVED       {name}: {safe(versus.reason)}; {safe(describe(versus.waiver))}"
        elif versus.standing in LISTED:
            yield f"  {versus.standing.upper():<12} {name}: {safe(versus.reason)}"
        for warning in versus.warnings:
            yield f"  WARNING      {name}: {safe(warning)}"
    for base in summary.missing:
        yield (
            f"  MISSING      {safe(base.key)}: in the baseline ({safe(base.path)}), not in this "
            "sweep (fails only with --expect)"
        )
    for note in summary.unreadable:
        yield f"  UNREADABLE   {safe(note.reason)}"
    for waiver in summary.unused_waivers:
        yield f"  UNUSED       the waiver of {safe(waiver.config)} names no config of this sweep"


def junit_line(versus: Versus) -> str:
    """One line for a config's JUnit testcase (made XML-safe by the caller)."""
    waived = f" ({describe(versus.waiver)})" if versus.waiver is not None else ""
    return f"against the baseline: {versus.standing}{waived}: {versus.reason}"
