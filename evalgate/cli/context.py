"""`evalgate context`: EVAL_MAX_MODEL_LEN and the output budget, with their sources."""

from __future__ import annotations

import argparse

HELP = (
    "Derive EVAL_MAX_MODEL_LEN (ISL + OSL + margin, capped at the native maximum, clamped to "
    "the smallest served limit) and the output budget. "
    'Use as: eval "$(evalgate context --format env ...)"'
)


EXAMPLES = """\
# set EVAL_MAX_MODEL_LEN and the budget in a job script, before the engine starts
eval "$(evalgate context --isl 8192 --osl 1024 --model-config /models/dsr1)"
# ask the live engines, and say where each number came from
evalgate context --base-url http://127.0.0.1:8000/v1 --model m --isl 1k --osl 1k --format text \
--explain
"""


def command(args: argparse.Namespace) -> int:
    import sys

    from evalgate.cli import arguments
    from evalgate.errors import UsageError
    from evalgate.evidence.model import to_document
    from evalgate.gate.runlog import context_record
    from evalgate.probe.preflight import derive
    from evalgate.tasks.spec import build_prompts, load_data, load_task
    from evalgate.templates import line

    settings = arguments.settings_from_args(args)
    asked, shown = settings.eval, settings.output
    json_file = shown.json_file
    if json_file == arguments.STDOUT and shown.format == "text":
        raise UsageError(
            "--json - and --format text both print on stdout: give one of them, or write the "
            "document to a file with --json FILE."
        )
    arguments.check_reports([], json_file)
    spec = load_task(settings.endpoint.api, asked.task)
    dataset = load_data(asked.task, asked.dataset_dir, hub=asked.dataset_hub, spec=spec)
    prompts = build_prompts(spec, dataset.test, dataset.train, asked.limit)
    context, _, _ = derive(settings.context, settings.endpoint, prompts)
    document = to_document(context_record(context)) | {"warnings": list(context.warnings)}
    if json_file:
        arguments.put_json(json_file, document)
    if json_file != arguments.STDOUT:  # with --json -, the document alone is on stdout
        if shown.format == "json":
            arguments.put_json(arguments.STDOUT, document)
        elif shown.format == "env":
            print(context.as_env(), end="")
        else:
            print(f"EVAL_MAX_MODEL_LEN {context.eval_max_model_len}")
            print(f"max_tokens         {context.max_tokens} ({context.budget_policy})")
    if shown.explain:
        out = sys.stdout if shown.format == "text" else sys.stderr  # env and JSON stay parseable
        for number, step in enumerate(context.steps, start=1):
            print(line("  {}. {}", number, step), file=out)
    for warning in context.warnings:
        print(line("warning: {}", warning), file=sys.stderr)
    return 0
