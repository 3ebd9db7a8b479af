"""The run's protocol, stated once: it gives the resume fingerprint, the check --baseline and
`compare` apply, and result.json's eval record."""

from __future__ import annotations

import msgspec

from evalgate.evidence.fields import Api
from evalgate.evidence.model import DatasetRecord, EvalRecord, Protocol
from evalgate.evidence.request_counts import RequestCounts
from evalgate.settings.stages import EvalAsk
from evalgate.tasks.dataset import Dataset
from evalgate.tasks.spec import FEWSHOT_SEED, TaskSpec


def protocol(
    spec: TaskSpec, dataset: Dataset, *, api: Api, limit: int | None, max_tokens: int
) -> Protocol:
    """What decides which questions are asked and how."""
    return Protocol(
        task=spec.name,
        task_version=spec.version,
        task_sha256=spec.sha256,
        api=api,
        num_fewshot=spec.num_fewshot,
        fewshot_seed=FEWSHOT_SEED,
        max_tokens=max_tokens,
        temperature=spec.temperature,
        limit=limit,
        dataset=DatasetRecord(**dataset.describe()),
    )


def eval_record(agreed: Protocol, ask: EvalAsk, questions: int) -> EvalRecord:
    """The eval as result.json records it before any answer: the protocol and how it is sent."""
    return EvalRecord(
        **msgspec.structs.asdict(agreed),
        num_concurrent=ask.num_concurrent,
        chat_template_kwargs=ask.chat_template_kwargs,
        reasoning_effort=ask.reasoning_effort,
        questions=questions,
        requests=RequestCounts.zero(),
    )
