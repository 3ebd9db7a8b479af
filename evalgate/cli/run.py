"""`evalgate run`: the whole gate against a live endpoint."""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable

HELP = (
    "Derive the eval context, probe the real output budget, run GSM8K with lm-eval and gate "
    "the scores on thresholds.json; result.json is written on every path."
)


EXAMPLES = """\
# gate a served model: the context from ISL/OSL, the budget probed, GSM8K, the verdict
evalgate run --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-8B --isl 1024 --osl 1024
# the benchmark job's own variables (PORT, MODEL, ISL, OSL, ...) and a team's config file
evalgate run --config evalgate.yaml --output-dir results/conc64
# a smoke test: the first 50 questions, too few to gate on
evalgate run --base-url http://127.0.0.1:8000/v1 --model m --limit 50 --min-samples 0
"""


def progress_printer() -> Callable[[int, int], None]:
    """A bar on a terminal; a line per tenth otherwise (CI logs)."""
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=0, unit="q", desc="gsm8k", file=sys.stderr)

        def update(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()
            if done == total:
                bar.close()

        return update
    step = {"next": 0}

    def log_line(done: int, total: int) -> None:
        # done <= 1: a new eval (the hook runs several)
        if done <= 1 or done >= step["next"] or done == total:
            print(f"gsm8k: {done}/{total} answered", file=sys.stderr, flush=True)
            step["next"] = done + max(total // 10, 1)

    return log_line


def command(args: argparse.Namespace) -> int:
    from evalgate.run import own_folder, require_eval_extra, run_gate

    require_eval_extra("evalgate run")  # before the output folder is touched
    from evalgate import scrub
    from evalgate.cli import arguments
    from evalgate.errors import ArtifactError
    from evalgate.evidence.model import to_document
    from evalgate.templates import line

    loaded = arguments.load_from_args(args)
    settings = loaded.settings
    json_file, gate = settings.output.json_file, settings.gate
    # before the run: never onto what it reads
    arguments.check_reports([settings.output.output_dir, gate.baseline, gate.thresholds], json_file)
    if not loaded.named("output_dir"):
        settings = own_folder(settings)
        made = settings.output.output_dir
        print(line("output: {} (this run's own; --output-dir names one)", made), file=sys.stderr)
    outcome = run_gate(settings, progress=progress_printer(), resume=settings.output.resume)
    if json_file:
        try:
            arguments.put_json(json_file, to_document(outcome.result))
        except ArtifactError as exc:  # the verdict is recorded: its exit code stands
            print(line("ArtifactError: {}", exc.message), file=sys.stderr)
    if outcome.error is not None:
        if getattr(args, "verbose", 0):
            shown = "".join(traceback.format_exception(outcome.error))
            print(scrub.terminal_block(shown), file=sys.stderr)
        print(line("{}: {}", type(outcome.error).__name__, outcome.error.message), file=sys.stderr)
        print(f"stage: {outcome.result.stage}", file=sys.stderr)
    for warning in outcome.result.warnings:
        print(line("warning: {}", warning), file=sys.stderr)
    if json_file != arguments.STDOUT and outcome.error is None:  # an error was said above
        print(line("{}: {}", outcome.status.upper(), outcome.reason))
        if outcome.comparison:
            print(outcome.comparison)  # compare's report: its outside text made safe there
    if outcome.result_path is not None:
        print(line("result: {}", outcome.result_path), file=sys.stderr)
    return outcome.exit_code
