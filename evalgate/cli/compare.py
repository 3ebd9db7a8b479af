"""`evalgate compare BASELINE CANDIDATE`: did a change cost accuracy? Arguments in, report out."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = (
    "pair two runs over the same questions and test whether the candidate lost accuracy "
    "(exit 0 equivalent, 1 regression, 5 inconclusive, 2 protocols differ)"
)
EXAMPLES = """\
# did the fp8 KV cache cost accuracy? Two runs of the same questions, paired
evalgate compare runs/auto runs/fp8
# a stricter margin (one point), the report as Markdown and a page beside it
evalgate compare runs/auto runs/fp8 --max-drop 0.01 --markdown --html compare.html
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("baseline", type=Path, help="the reference run: its folder or result.json")
    parser.add_argument("candidate", type=Path, help="the run after the change: folder or file")


def command(args: argparse.Namespace) -> int:
    from evalgate.cli import arguments
    from evalgate.compare.comparison import compare_runs
    from evalgate.compare.views import comparison_document, render_markdown, render_text
    from evalgate.errors import ArtifactError, UsageError
    from evalgate.evidence.model import to_document
    from evalgate.evidence.outputs import write_output
    from evalgate.templates import line

    loaded = arguments.load_from_args(args)
    settings = loaded.settings
    shown = settings.output
    if shown.json_file == arguments.STDOUT and shown.markdown:
        raise UsageError(
            f"--json - (set by {loaded.origin('json_file')}) and --markdown (set by "
            f"{loaded.origin('markdown')}) both print on stdout: give one of them, or write "
            "the document to a file with --json FILE."
        )
    # before the runs are read: never onto them, nothing written if refused
    arguments.check_reports([args.baseline, args.candidate], shown.json_file, shown.html)
    comparison = compare_runs(
        args.baseline,
        args.candidate,
        max_drop=settings.gate.max_drop,
        allow_protocol_drift=settings.gate.allow_protocol_drift,
    )
    if shown.json_file:
        arguments.put_json(
            shown.json_file, to_document(comparison_document(comparison, flips=shown.flips))
        )
    if shown.json_file != arguments.STDOUT:
        render = render_markdown if shown.markdown else render_text
        print(render(comparison, flips=shown.flips), end="")
    if shown.html:
        from evalgate.compare import views

        try:
            write_output(shown.html, views.render(comparison), label="--html")
        except ArtifactError as exc:  # the verdict stands, its exit code said last
            print(line("ArtifactError: {}", exc.message), file=sys.stderr)
            said = "evalgate compare: {} (exit {}); not written (see above): --html {}"
            finding, code = comparison.finding.name, int(comparison.exit_code)
            print(line(said, finding, code, shown.html), file=sys.stderr)
    return int(comparison.exit_code)
