"""`evalgate hook`: the node-0 post-benchmark call of a multi-node job."""

from __future__ import annotations

import argparse
import sys

from evalgate.cli.run import progress_printer

HELP = (
    "Post-benchmark hook for node 0: read the benchmark's environment, probe once, run the "
    "eval at each concurrency and stage every artifact (also on failure and SIGTERM)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue interrupted runs in the staging folder from their journals",
    )


def command(args: argparse.Namespace) -> int:
    from evalgate.gate.run import require_eval_extra

    require_eval_extra("evalgate hook")  # before the staging folder is touched
    from evalgate.cli import flags
    from evalgate.gate.hook import parse_concurrencies, run_hook
    from evalgate.templates import line

    settings = flags.settings_from_args(args)
    concurrencies = (
        parse_concurrencies(settings.concurrency)
        if settings.concurrency
        else [settings.num_concurrent]
    )
    outcome = run_hook(settings, concurrencies, resume=args.resume, progress=progress_printer())
    for entry in outcome.summary.runs:
        said = line("conc {}: {}: {}", entry.concurrency, entry.status.upper(), entry.reason)
        verdict = entry.status in ("pass", "fail", "inconclusive")
        print(said, file=sys.stdout if verdict else sys.stderr)
    print(line("staged in {}", settings.output_dir), file=sys.stderr)
    return outcome.exit_code
