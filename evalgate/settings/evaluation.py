"""The eval: the task and its data, how many questions and how many in flight, what every
request carries, the early stop, what the answers' thinking looks like. The eval stage
receives this group, itself."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from evalgate.numbers import CONCURRENCY_MAX, COUNT_MAX, concurrencies
from evalgate.settings.fields import Group


class EvalSettings(Group):
    """How the eval's questions are asked and its answers read."""

    heading = "eval"

    task: str = "gsm8k"
    """The task to gate: gsm8k (the harness's GSM8K), gpqa_diamond_cot_n_shot (the harness's
    GPQA-diamond, its data in --dataset-dir), or the path of an lm-eval task YAML of
    generate_until type with {{field}} templates and local JSONL data files; the threshold is
    the one for this task (a file's: its task name). Loglikelihood tasks are refused."""

    limit: int | None = Field(None, ge=1, le=COUNT_MAX)
    """Evaluate only the first N questions (for smoke tests; too small to gate on)."""

    num_concurrent: int = Field(64, ge=1, le=CONCURRENCY_MAX)
    """Requests in flight during the eval."""

    concurrency: str | None = None
    """`evalgate hook`: the concurrencies to evaluate one after another on the same live engine
    (one probe), e.g. "4 8" or 16,64,256; each gets its own result. Default: --num-concurrent."""

    dataset_dir: Path | None = None
    """Folder with the task's data: GSM8K's test.jsonl and train.jsonl (instead of the copy
    evalgate ships), or GPQA-diamond's gpqa_diamond.csv (or .jsonl), which cannot ship."""

    dataset_hub: bool = False
    """Load openai/gsm8k from the Hugging Face hub instead of the shipped copy."""

    chat_template_kwargs: dict[str, Any] | None = None
    """A JSON object sent as chat_template_kwargs in every request, the probe's included, and
    recorded in the result (e.g. '{"enable_thinking": false}' to turn a model's thinking off)."""

    reasoning_effort: str | None = None
    """Sent as reasoning_effort in every request, the probe's included, and recorded (low,
    medium or high for models that take it, e.g. gpt-oss)."""

    early_stop: Literal["off", "fail", "pass", "both"] = "off"
    """Stop asking questions as soon as an anytime-valid test is certain of the verdict: fail
    (once any filter is certainly below the threshold), pass (once every filter is certainly
    above), both, or off (every question, the benchmark harness's protocol). The questions are
    then sent in a seeded random order and read in that order."""

    alpha: float = Field(0.05, gt=0, lt=1)
    """With --early-stop: the most often a run at or below the threshold passes early (and one at
    or above it fails early)."""

    max_failed_requests: int = Field(0, ge=0, le=COUNT_MAX)
    """Requests allowed to fail for good before the run is an error (0: any failure is)."""

    think_end_marker: str = "</think>"
    """The end of a reasoning model's thinking written into its answer (no reasoning parser):
    only the text after its last occurrence is scored. Empty: score the whole answer, as the
    benchmark harness does."""

    think_start_marker: str = "<think>"
    """The start of thinking written into the answer: an answer holding it but never reaching
    --think-end-marker was cut while thinking, and scores nothing. Empty: no such check."""

    sglang_simulate_acc_len: str | None = None
    """SGLang's simulated speculative acceptance length, as the job sets it: anything but empty
    or 0 means the engine fakes which draft tokens it accepts, and the gate refuses (exit 2).
    Give it when the engine's environment holds it but the gate's does not."""

    allow_simulated_acceptance: bool = False
    """Gate even when acceptance is simulated (SGLANG_SIMULATE_ACC_LEN, or
    --spec-decode-acceptance-length in the server arguments): the scores then say nothing about
    the model; the result's warnings record it."""

    eval_tasks_dir: Path | None = None
    """The benchmark harness's eval task file. evalgate runs its own copy of the harness's
    gsm8k task: `evalgate hook` warns when this names another file (other tasks are not run)."""

    def request_fields(self) -> dict[str, Any]:
        """What every generation request carries besides the task's settings."""
        fields: dict[str, Any] = {}
        if self.chat_template_kwargs is not None:
            fields["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        if self.reasoning_effort is not None:
            fields["reasoning_effort"] = self.reasoning_effort
        return fields

    @field_validator("limit", mode="before")
    @classmethod
    def _a_count(cls, value: Any) -> Any:
        """lm-eval's --limit 0.1 is a fraction of the questions; evalgate's is a count."""
        if isinstance(value, str) and re.fullmatch(r"0?\.\d+", value.strip()):
            from evalgate.tasks.dataset import GSM8K_TEST_SIZE

            share = float(value)
            if 0 < share < 1:
                count = math.ceil(GSM8K_TEST_SIZE * share)
                raise ValueError(
                    f"a number of questions, not a fraction as lm-eval's --limit takes: for "
                    f"{share:.0%} of GSM8K's {GSM8K_TEST_SIZE:,} questions, give --limit {count}"
                )
        return value

    @field_validator("concurrency")
    @classmethod
    def _concurrencies(cls, value: str | None) -> str | None:
        if value is not None:
            concurrencies(value)
        return value

    @field_validator("chat_template_kwargs", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        """Given as text (a flag, a variable), the value is a JSON object."""
        if not isinstance(value, str):
            return value
        if not value.strip():
            return None
        from evalgate.errors import ArtifactError
        from evalgate.reader import decode

        example = '{"enable_thinking": false}'
        try:  # the one reader: a repeated key, or an integer past what a float holds, refused
            parsed = decode(value, dict[str, Any], "the value", "is not a JSON object")
            json.dumps(parsed, allow_nan=False)  # each request body carries it: JSON, no NaN
        except ArtifactError as exc:
            raise ValueError(f"{exc.message.rstrip('.')}; give one such as '{example}'") from exc
        except ValueError as exc:
            raise ValueError(
                f"holds NaN or Infinity, which are not JSON; give e.g. '{example}'"
            ) from exc
        return parsed
