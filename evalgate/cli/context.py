"""`evalgate context`: EVAL_MAX_MODEL_LEN and the output budget, with their sources."""

from __future__ import annotations

import argparse

HELP = (
    "Derive EVAL_MAX_MODEL_LEN (ISL + OSL + margin, capped at the native maximum, clamped to "
    "the smallest served limit) and the output budget. "
    'Use as: eval "$(evalgate context --format env ...)"'
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=["env", "json", "text"],
        default="env",
        help="env: KEY=VALUE lines for eval; json: the full derivation; "
        "text: a readable summary (default: env)",
    )
    parser.add_argument(
        "--json", dest="format", action="store_const", const="json", help="same as --format json"
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="also print each step and its source (to stderr with --format env)",
    )


def command(args: argparse.Namespace) -> int:
    import sys

    from evalgate.cli import flags
    from evalgate.cli.program import print_json
    from evalgate.evidence.model import to_document
    from evalgate.gate.preflight import derive
    from evalgate.gate.record import context_record
    from evalgate.settings import stages
    from evalgate.tasks.prompts import build_prompts
    from evalgate.tasks.spec import load_data, load_task
    from evalgate.templates import line

    settings = flags.settings_from_args(args)
    spec = load_task(settings.api, settings.task)
    dataset = load_data(settings.task, settings.dataset_dir, hub=settings.dataset_hub, spec=spec)
    prompts = build_prompts(spec, dataset.test, dataset.train, settings.limit)
    context, _, _ = derive(stages.context_ask(settings), stages.endpoint(settings), prompts)
    document = to_document(context_record(context)) | {"warnings": list(context.warnings)}
    if args.format == "json":
        print_json(document)
    elif args.format == "env":
        print(context.as_env(), end="")
    else:
        print(f"EVAL_MAX_MODEL_LEN {context.eval_max_model_len}")
        print(f"max_tokens         {context.max_tokens} ({context.budget_policy})")
    if args.explain:
        out = sys.stdout if args.format == "text" else sys.stderr  # env and JSON stay parseable
        for number, step in enumerate(context.steps, start=1):
            print(line("  {}. {}", number, step), file=out)
    for warning in context.warnings:
        print(line("warning: {}", warning), file=sys.stderr)
    return 0
