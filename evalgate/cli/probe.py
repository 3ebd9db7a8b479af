"""`evalgate probe`: readiness, context and the pre-flight request, without the eval."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalgate.settings.values import Settings

HELP = (
    "Wait for the endpoint, derive the context and send one request at the real output "
    "budget with the longest eval prompt; fail in seconds with the engine's own message."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")


def command(args: argparse.Namespace) -> int:
    from evalgate.cli import flags
    from evalgate.cli.program import print_json
    from evalgate.errors import EvalgateError

    settings = flags.settings_from_args(args)
    try:
        return _probe(args, settings)
    except EvalgateError as exc:
        if args.json:  # as `run --json` prints its error document: stdout is never empty
            error = {"type": type(exc).__name__, "message": exc.message}
            document = {"outcome": "error", "exit_code": int(exc.exit_code), "error": error}
            print_json(document)
        raise


def _probe(args: argparse.Namespace, settings: Settings) -> int:
    from evalgate.cli.program import print_json
    from evalgate.evidence.model import to_document
    from evalgate.gate.preflight import derive, probe
    from evalgate.gate.record import context_record
    from evalgate.settings import stages
    from evalgate.tasks.prompts import build_prompts
    from evalgate.tasks.spec import load_data, load_task

    stages.require(settings, "base_url", "model")
    spec = load_task(settings.api, settings.task)
    dataset = load_data(settings.task, settings.dataset_dir, hub=settings.dataset_hub, spec=spec)
    prompts = build_prompts(spec, dataset.test, dataset.train, settings.limit)
    endpoint = stages.endpoint(settings)
    context, longest, _ = derive(stages.context_ask(settings), endpoint, prompts)
    sampling = spec.sampling | stages.eval_ask(settings).request_fields()
    outcome = probe(endpoint, context, longest, spec.stop, sampling)
    if args.json:
        document = {
            "outcome": outcome.outcome,
            "latency_s": outcome.latency_s,
            "max_tokens": outcome.max_tokens,
            "prompt_tokens": outcome.prompt_tokens,
            "context": to_document(context_record(context)),
        }
        print_json(document)
    else:
        print(
            f"probe {outcome.outcome}: max_tokens {outcome.max_tokens} accepted with the "
            f"longest prompt ({outcome.prompt_tokens} tokens) in {outcome.latency_s:.2f} s"
        )
    return 0
