"""`evalgate hook`: the node-0 post-benchmark call of a multi-node job."""

from __future__ import annotations

import argparse
import sys

from evalgate.cli.run import progress_printer

HELP = (
    "Post-benchmark hook for node 0: read the benchmark's environment, probe once, run the "
    "eval at each concurrency and stage every artifact (also on failure and SIGTERM)."
)


EXAMPLES = """\
# node 0 after the benchmark: every concurrency of the job, probed once, staged
evalgate hook --concurrency "4 8 16" --output-dir /workspace/eval
# the benchmark harness's own files (meta_env.json, results_*.json, samples_*.jsonl)
evalgate hook --layout harness --output-dir /workspace
"""


def command(args: argparse.Namespace) -> int:
    from evalgate.run import require_eval_extra

    require_eval_extra("evalgate hook")  # before the staging folder is touched
    from evalgate.cli import arguments
    from evalgate.hook import parse_concurrencies, run_hook
    from evalgate.templates import line

    settings = arguments.settings_from_args(args)
    asked = settings.eval
    concurrencies = (
        parse_concurrencies(asked.concurrency) if asked.concurrency else [asked.num_concurrent]
    )
    outcome = run_hook(
        settings, concurrencies, resume=settings.output.resume, progress=progress_printer()
    )
    for entry in outcome.summary.runs:
        said = line("conc {}: {}: {}", entry.concurrency, entry.status.upper(), entry.reason)
        verdict = entry.status in ("pass", "fail", "inconclusive")
        print(said, file=sys.stdout if verdict else sys.stderr)
    print(line("staged in {}", settings.output.output_dir), file=sys.stderr)
    return outcome.exit_code
