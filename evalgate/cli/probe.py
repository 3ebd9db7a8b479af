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


EXAMPLES = (
    (
        "will the eval's longest prompt and real budget be accepted? (seconds, not an eval)",
        "evalgate probe --base-url http://127.0.0.1:8000/v1 --model m --isl 1024 --osl 1024",
    ),
    (
        "the engine's answer as JSON, for a script",
        "evalgate probe --config evalgate.yaml --json",
    ),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No operands: every flag is a setting."""


def command(args: argparse.Namespace) -> int:
    from evalgate.cli import flags
    from evalgate.cli.program import print_json
    from evalgate.errors import EvalgateError

    settings = flags.settings_from_args(args)
    try:
        return _probe(settings)
    except EvalgateError as exc:
        if settings.output.print_json:  # as `run --json` prints its error: stdout never empty
            error = {"type": type(exc).__name__, "message": exc.message}
            document = {"outcome": "error", "exit_code": int(exc.exit_code), "error": error}
            print_json(document)
        raise


def _probe(settings: Settings) -> int:
    from evalgate.cli.program import print_json
    from evalgate.evidence.model import to_document
    from evalgate.gate.preflight import derive, probe
    from evalgate.gate.record import context_record
    from evalgate.tasks.prompts import build_prompts
    from evalgate.tasks.spec import load_data, load_task

    endpoint, asked = settings.endpoint, settings.eval
    endpoint.require()
    spec = load_task(endpoint.api, asked.task)
    dataset = load_data(asked.task, asked.dataset_dir, hub=asked.dataset_hub, spec=spec)
    prompts = build_prompts(spec, dataset.test, dataset.train, asked.limit)
    context, longest, _ = derive(settings.context, endpoint, prompts)
    sampling = spec.sampling | asked.request_fields()
    outcome = probe(endpoint, context, longest, spec.stop, sampling, strict=settings.context.strict)
    if settings.output.print_json:
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
