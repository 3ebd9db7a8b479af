"""The comparison with the baseline (--baseline) in each form the verdict takes: its lines are
evalgate's words with the outside values apart (templates.Said), each made safe by the output
that shows it (docs/verify.md, "Against the last good sweep").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from evalgate.compare.reason import points
from evalgate.templates import Said
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


def findings(entries: Iterable[Entry], summary: BaselineSummary) -> Iterator[Said]:
    """The section's lines (no line ends): waived regressions, each config not compared and
    why, the warnings, the baseline's configs missing from the sweep, unused waivers."""
    paths = ", ".join(["{}"] * len(summary.paths))
    yield Said(
        f"Against the baseline {paths} ({{}} results; margin {{:.1f}} points; one-sided exact "
        "tests, Holm's adjustment over the configs):",
        (*summary.paths, summary.configs, summary.max_drop * 100),
    )
    for entry in entries:
        versus = entry.versus
        if versus is None:
            continue
        if versus.waiver is not None:
            yield Said(
                "  WAIVED       {}: {}; {}", (entry.key, versus.reason, describe(versus.waiver))
            )
        elif versus.standing in LISTED:
            yield Said("  {:<12} {}: {}", (versus.standing.upper(), entry.key, versus.reason))
        for warning in versus.warnings:
            yield Said("  WARNING      {}: {}", (entry.key, warning))
    for base in summary.missing:
        yield Said(
            "  MISSING      {}: in the baseline ({}), not in this sweep (fails only with --expect)",
            (base.key, base.path),
        )
    for note in summary.unreadable:
        yield Said("  UNREADABLE   {}", (note.reason,))
    for waiver in summary.unused_waivers:
        yield Said(
            "  UNUSED       the waiver of {} names no config of this sweep", (waiver.config,)
        )


def junit_line(versus: Versus) -> str:
    """One line for a config's JUnit testcase (made XML-safe by the caller)."""
    waived = f" ({describe(versus.waiver)})" if versus.waiver is not None else ""
    return f"against the baseline: {versus.standing}{waived}: {versus.reason}"
