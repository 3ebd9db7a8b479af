"""`evalgate probe`: readiness, context and the pre-flight request, without the eval."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalgate.settings.values import Settings

HELP = (
    "Wait for the endpoint, derive the context and send one request at the real output "
    "budget with the longest eval prompt; fail in seconds with the engine's own message."
)


EXAMPLES = """\
# will the eval's longest prompt and real budget be accepted? (seconds, not an eval)
evalgate probe --base-url http://127.0.0.1:8000/v1 --model m --isl 1024 --osl 1024
# the engine's answer as JSON, for a script
evalgate probe --config evalgate.yaml --json -
"""


def command(args: argparse.Namespace) -> int:
    from evalgate.cli import arguments
    from evalgate.errors import EvalgateError

    settings = arguments.settings_from_args(args)
    json_file = settings.output.json_file
    arguments.check_reports([], json_file)
    try:
        document, said = _probe(settings)
    except EvalgateError as exc:
        if json_file:  # as `run --json` gives its error: the document is never missing
            error = {"type": type(exc).__name__, "message": exc.message}
            failed = {"outcome": "error", "exit_code": int(exc.exit_code), "error": error}
            arguments.put_json(json_file, failed)
        raise
    if json_file:
        arguments.put_json(json_file, document)
    if json_file != arguments.STDOUT:
        print(said)
    return 0


def _probe(settings: Settings) -> tuple[dict[str, Any], str]:
    """The probe's document and its line."""
    from evalgate.evidence.model import to_document
    from evalgate.gate.runlog import context_record
    from evalgate.probe.preflight import derive, probe
    from evalgate.tasks.spec import build_prompts, load_data, load_task

    endpoint, asked = settings.endpoint, settings.eval
    endpoint.require()
    spec = load_task(endpoint.api, asked.task)
    dataset = load_data(asked.task, asked.dataset_dir, hub=asked.dataset_hub, spec=spec)
    prompts = build_prompts(spec, dataset.test, dataset.train, asked.limit)
    context, longest, _ = derive(settings.context, endpoint, prompts)
    sampling = spec.sampling | asked.request_fields()
    outcome = probe(endpoint, context, longest, spec.stop, sampling, strict=settings.context.strict)
    document = {
        "outcome": outcome.outcome,
        "latency_s": outcome.latency_s,
        "max_tokens": outcome.max_tokens,
        "prompt_tokens": outcome.prompt_tokens,
        "context": to_document(context_record(context)),
    }
    said = (
        f"probe {outcome.outcome}: max_tokens {outcome.max_tokens} accepted with the "
        f"longest prompt ({outcome.prompt_tokens} tokens) in {outcome.latency_s:.2f} s"
    )
    return document, said
