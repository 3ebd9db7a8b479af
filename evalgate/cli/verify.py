"""`evalgate verify`: the CI gate over a whole sweep's downloaded artifacts."""

from __future__ import annotations

import argparse
import itertools
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from evalgate import numbers, scrub
from evalgate.settings.environment import DEFAULT_MAX_DROP
from evalgate.templates import line

if TYPE_CHECKING:
    from evalgate.history.store import Store
    from evalgate.verify.against import BaselineRequest
    from evalgate.verify.sweep import Report

HELP = (
    "Gate a whole sweep: find every evalgate result.json and harness lm-eval result "
    "(with its meta_env.json) under RESULTS, gate each on its threshold with its 95% interval, "
    "and fail on malformed, errored, missing, duplicate or unexpected results, or none at all."
)
log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="RESULTS",
        help="folders to search (recursively) and/or evalgate result.json files",
    )
    parser.add_argument(
        "--thresholds",
        metavar="FILE",
        help="thresholds.json (default: $EVALGATE_THRESHOLDS, else the one evalgate ships)",
    )
    parser.add_argument(
        "--expect",
        metavar="N|FILE",
        help="the expected set: a number of configs, or a JSON manifest "
        '(README, "Gate a sweep in CI"); missing, duplicate and unexpected configs fail',
    )
    parser.add_argument(
        "--min-samples",
        type=numbers.argument(numbers.whole, 0, numbers.COUNT_MAX),
        default=None,
        metavar="N",
        help="questions a run needs before a score whose 95%% interval "
        "straddles its threshold is decided on its point estimate (default: "
        "what each evalgate run recorded, else the task's full test set, 1319 for GSM8K; "
        f"0: always decide; range 0 to {numbers.shown(numbers.COUNT_MAX)})",
    )
    parser.add_argument(
        "--github",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="append a markdown table to $GITHUB_STEP_SUMMARY and print "
        "::error annotations (default: on under GitHub Actions)",
    )
    parser.add_argument("--junit", metavar="FILE", help="write JUnit XML, one testcase per config")
    parser.add_argument(
        "--json", metavar="FILE", help="write the verdict document (verdict.schema.json)"
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="write a self-contained page: a chart per task of each config's score and 95%% "
        "interval against its threshold, the problems first, then the table",
    )
    _baseline_arguments(parser)
    from evalgate.cli.history import add_verify_arguments

    add_verify_arguments(parser)
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print only the problems and the verdict, not every result",
    )


def _baseline_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline",
        nargs="+",
        action="extend",
        metavar="BASELINE",
        help="an earlier sweep's artifacts (folders and/or result.json files, either layout), "
        "or a history (an SQLite file or postgresql:// URL verify --record wrote: each "
        "config's last passing run): pair every config with the same config there, question by "
        "question, and fail on a REGRESSION even over the floor",
    )
    add_max_drop(parser, "with --baseline: ")
    parser.add_argument(
        "--waivers",
        metavar="FILE",
        help="with --baseline: accepted regressions, YAML or JSON (config, reason, who, until); "
        "a waived REGRESSION does not fail, an expired waiver does",
    )


def add_max_drop(parser: argparse.ArgumentParser, prefix: str) -> None:
    """--max-drop, the margin of compare and of verify --baseline."""
    parser.add_argument(
        "--max-drop",
        type=numbers.argument(
            numbers.real
        ),  # its range is checked where it is used, with its meaning
        default=DEFAULT_MAX_DROP,
        metavar="FRACTION",
        help=f"{prefix}the largest drop in accuracy that still counts as equivalent, as a "
        f"fraction (default {DEFAULT_MAX_DROP}, i.e. {DEFAULT_MAX_DROP * 100:g} points; "
        "range 0 to less than 1)",
    )


def command(args: argparse.Namespace) -> int:
    from evalgate.settings.environment import verify_environment
    from evalgate.thresholds import load_thresholds
    from evalgate.verify import sweep
    from evalgate.verify.expect import load_expectation

    environment = verify_environment()
    thresholds_path = args.thresholds or environment.thresholds
    thresholds = load_thresholds(Path(thresholds_path) if thresholds_path else None)
    expectation = load_expectation(args.expect) if args.expect is not None else None
    github = args.github if args.github is not None else environment.github_actions
    summary = environment.step_summary if github else None
    _check_outputs(args, thresholds.path, summary)
    baseline = _baseline(args)
    recording, history = _histories(args, environment.history)
    if history is not None and baseline is not None:  # named as messages name it: no password
        from msgspec import structs

        baseline = structs.replace(baseline, paths=(history.location,))
    sweep_id = None
    if recording is not None or history is not None:
        from evalgate.cli.history import sweep_id as sweep_id_of

        sweep_id = sweep_id_of(args.sweep_id)
    try:
        result = sweep.verify(
            list(args.paths), thresholds, expectation=expectation, min_samples=args.min_samples
        )
        if baseline is not None:
            from evalgate.verify.against import judge_against

            rule = sweep.Rule(thresholds, args.min_samples)
            found = None
            if history is not None:  # paired before recording: the sweep against what came before
                from evalgate.history.look import baseline as history_baseline

                results = [e for e in result.entries if e.source is not None]
                found = history_baseline(history, results, sweep_id)
            result = judge_against(result, rule, baseline, found)
        _write(result, args, github=github, summary=summary)
        if recording is not None:
            from evalgate.cli.history import record_report

            print(record_report(recording, result, str(sweep_id)), file=sys.stderr)
    finally:
        for store in {id(s): s for s in (recording, history) if s is not None}.values():
            store.close()
    return result.exit_code


def _histories(args: argparse.Namespace, default: str | None) -> tuple[Store | None, Store | None]:
    """--record (or $EVALGATE_HISTORY) and a history given as --baseline, opened now."""
    from evalgate.errors import UsageError

    record = args.record or default
    if not record and not args.baseline:
        found: tuple[Store | None, Store | None] = (None, None)
    else:
        from evalgate.cli.history import open_for_verify

        found = open_for_verify(record, args.baseline)
    if args.sweep_id is not None and found == (None, None):
        raise UsageError(
            "--sweep-id applies to --record, or to a history given as --baseline: pass the "
            "history too."
        )
    return found


def _check_outputs(args: argparse.Namespace, thresholds: str, summary: str | None) -> None:
    """Every report asked for, checked before any verdict is printed (found after it, a bad
    path would turn a printed PASS into exit 2), against every file verify reads."""
    from evalgate.evidence.outputs import Output, check_outputs

    outputs = [
        Output(label, path, append)
        for label, path, append in (
            ("--junit", args.junit, False),
            ("--json", args.json, False),
            ("--html", args.html, False),
            ("GITHUB_STEP_SUMMARY", summary, True),
        )
        if path
    ]
    given = [args.expect if args.expect and not args.expect.strip().isdigit() else None]
    reads = [*args.paths, *(args.baseline or []), thresholds, args.waivers, *given]
    check_outputs(outputs, [path for path in reads if path])


def _baseline(args: argparse.Namespace) -> BaselineRequest | None:
    """--baseline, --max-drop and --waivers as one request (the waivers read now: a bad file
    is a usage error before any result is read)."""
    from evalgate.errors import UsageError

    if not args.baseline:
        if args.waivers:
            raise UsageError("--waivers applies to --baseline: pass the baseline sweep too.")
        return None
    from evalgate.verify.against import BaselineRequest
    from evalgate.verify.waivers import load_waivers

    waivers = load_waivers(args.waivers) if args.waivers else None
    return BaselineRequest(tuple(args.baseline), args.max_drop, waivers)


def _write(result: Report, args: argparse.Namespace, *, github: bool, summary: str | None) -> None:
    """The verdict on stdout, and in each report asked for; the verdict line last, naming each
    report that could not be written (which leaves the verdict's exit code as it is)."""
    from evalgate.errors import ArtifactError
    from evalgate.evidence.outputs import write_output
    from evalgate.verify import report

    lines = report.terminal_lines(result, quiet=args.quiet)
    while chunk := "".join(itertools.islice(lines, 4096)):  # stdout may be unbuffered
        sys.stdout.write(chunk)
    unwritten: list[str] = []

    def attempt(label: str, path: str, render: Callable[[], str], append: bool = False) -> None:
        try:
            write_output(path, render(), append=append, label=label)
        except ArtifactError as exc:
            print(line("ArtifactError: {}", exc.message), file=sys.stderr)
            unwritten.append(f"{label} {path}")

    if github:
        if summary:
            attempt("GITHUB_STEP_SUMMARY", summary, lambda: report.markdown(result), append=True)
        else:
            log.warning("--github: GITHUB_STEP_SUMMARY is not set, so no job summary is written")
        sys.stdout.write(report.workflow_commands(result))
    if args.junit:
        from evalgate.verify.junit import junit

        attempt("--junit", args.junit, lambda: junit(result))
    if args.json:
        from evalgate.evidence.model import to_document
        from evalgate.verify.document import document

        attempt(
            "--json",
            args.json,
            lambda: scrub.json_text(to_document(document(result)), indent=2) + "\n",
        )
    if args.html:
        from evalgate.verify import html

        attempt("--html", args.html, lambda: html.render(result))
    sys.stdout.write(report.verdict_line(result, unwritten))
    sys.stdout.flush()
