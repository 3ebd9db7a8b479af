"""`evalgate compare BASELINE CANDIDATE`: did a change cost accuracy? Arguments in, report out."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalgate import numbers
from evalgate.cli.verify import add_max_drop
from evalgate.compare import DEFAULT_FLIPS

HELP = (
    "pair two runs over the same questions and test whether the candidate lost accuracy "
    "(exit 0 equivalent, 1 regression, 5 inconclusive, 2 protocols differ)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("baseline", type=Path, help="the reference run: its folder or result.json")
    parser.add_argument("candidate", type=Path, help="the run after the change: folder or file")
    add_max_drop(parser, "the margin: ")
    parser.add_argument(
        "--allow-protocol-drift",
        action="store_true",
        help="compare even when the runs' protocols differ (dataset, task, prompt, few-shot, "
        "max_tokens, temperature, API, question set); the differences are listed in the report",
    )
    parser.add_argument(
        "--flips",
        type=numbers.argument(numbers.whole, 0, numbers.COUNT_MAX),
        default=DEFAULT_FLIPS,
        metavar="N",
        help=f"list the first N flipped questions per filter (default {DEFAULT_FLIPS}; 0: none)",
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also write a self-contained page: both scores, the paired difference and its "
        "interval against the margin, the protocol differences and every flipped question",
    )
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print the comparison as JSON")
    form.add_argument("--markdown", action="store_true", help="print the report as Markdown")


def command(args: argparse.Namespace) -> int:
    from evalgate.cli.program import print_json
    from evalgate.compare.comparison import compare_runs
    from evalgate.compare.document import comparison_document
    from evalgate.compare.report import render_markdown, render_text
    from evalgate.evidence.model import to_document
    from evalgate.evidence.outputs import Output, check_outputs, write_output

    if args.html:  # before the runs are read: never onto them, nothing written if refused
        check_outputs([Output("--html", args.html)], [args.baseline, args.candidate])
    comparison = compare_runs(
        args.baseline,
        args.candidate,
        max_drop=args.max_drop,
        allow_protocol_drift=args.allow_protocol_drift,
    )
    if args.json:
        print_json(to_document(comparison_document(comparison, flips=args.flips)))
    elif args.markdown:
        print(render_markdown(comparison, flips=args.flips), end="")
    else:
        print(render_text(comparison, flips=args.flips), end="")
    if args.html:
        from evalgate.compare import html

        write_output(args.html, html.render(comparison), label="--html")
    return int(comparison.exit_code)
