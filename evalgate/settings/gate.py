"""The gate (thresholds, when a score is decided, what fails a run, the baseline) and the labels
a result records (the benchmark config it belongs to)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pydantic_core import PydanticCustomError

from evalgate.environment import DEFAULT_MAX_DROP, not_a_margin
from evalgate.numbers import COUNT_MAX
from evalgate.settings.fields import SAID, Flag, Group

MARGIN_COMMANDS = frozenset({"compare", "verify"})
"""The commands whose own margin --max-drop is: they refuse one out of range in the words they
always have (evalgate.environment.not_a_margin)."""


class GateSettings(Group):
    """What a score is held to, and what else fails a run or a sweep."""

    heading = "gate"

    thresholds: Annotated[Path | None, Flag(metavar="FILE")] = None
    """Thresholds file to gate on, YAML or JSON (the benchmark harness's thresholds.yaml as it
    is; default: the one evalgate ships); with history --fit-thresholds, the file in use,
    carried over and compared with."""

    min_samples: int | None = Field(None, ge=0, le=COUNT_MAX)
    """Questions below which a score whose 95% interval straddles the threshold is
    inconclusive (exit 5) rather than decided on its point estimate (default: the full test
    set, 1319 for GSM8K; verify: what each evalgate run recorded, else that; 0 decides every
    score on its point estimate, as the benchmark harness does)."""

    expect: Annotated[str | None, Flag(metavar="N|FILE")] = None
    """verify: the expected set, a number of configs or a JSON manifest (README, "Gate a sweep
    in CI"); missing, duplicate and unexpected configs fail."""

    max_truncated_rate: float = Field(1.0, ge=0, le=1)
    """Share of answers that may end by length or come back empty before the run fails
    (1.0: report only)."""

    baseline: Path | None = None
    """An earlier run's folder: after the gate, compare this run with it question by question
    (the `evalgate compare` report is printed and saved as comparison.json)."""

    baselines: Annotated[list[str], Flag("baseline", metavar="BASELINE")] = Field(
        default_factory=list
    )
    """verify: an earlier sweep's artifacts (folders and/or result.json files, either layout),
    or a history (an SQLite file or postgresql:// URL verify --record wrote: each config's last
    passing run): pair every config with the same config there, question by question, and fail
    on a REGRESSION even over the floor. One path a flag (repeat it for more: --baseline A
    --baseline B); one path in the environment."""

    max_drop: float = Field(DEFAULT_MAX_DROP, ge=0, lt=1)
    """The largest drop in accuracy that still counts as equivalent, as a fraction (0.02: two
    points): compare's margin, and run's and verify's with --baseline."""

    waivers: Annotated[str | None, Flag(metavar="FILE")] = None
    """verify, with --baseline: accepted regressions, YAML or JSON (config, reason, who, until);
    a waived REGRESSION does not fail, an expired waiver does."""

    allow_protocol_drift: bool = False
    """compare: compare even when the runs' protocols differ (dataset, task, prompt, few-shot,
    max_tokens, temperature, API, question set); the differences are listed in the report."""

    @field_validator("max_drop", mode="wrap")
    @classmethod
    def _margin(cls, value: Any, read: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        """Out of its range: the margin's own words for compare and verify, the range for the
        commands that only read it (the command is in `info.context`)."""
        try:
            return read(value)
        except ValidationError as exc:
            number = exc.errors()[0].get("input")
            command = (info.context or {}).get("command")
            refused = not_a_margin(number) if isinstance(number, float) else None
            if command in MARGIN_COMMANDS and refused is not None:
                raise PydanticCustomError(SAID, refused) from None
            raise

    @field_validator("baselines", mode="before")
    @classmethod
    def _one_path(cls, value: Any) -> Any:
        """In the environment, the variable holds one path."""
        return [value] if isinstance(value, str) else value


class LabelsSettings(Group):
    """The benchmark config a result belongs to, recorded in it (verify resolves thresholds and
    the expected set by them)."""

    heading = "labels"

    model_prefix: str | None = None
    """Model family key for thresholds (dsr1, gptoss, ...)."""

    hardware: str | None = None
    """Hardware label (b200, mi355x, ...)."""

    framework: str | None = None
    """Engine label (vllm, sglang, trt, ...)."""

    precision: str | None = None
    """Weight precision label (fp8, fp4, ...)."""

    kv_cache_dtype: str | None = None
    """KV-cache dtype label (auto, fp8, ...)."""

    spec_decoding: str | None = None
    """Speculative decoding label (mtp, eagle, ...): written to meta_env.json and part of the
    config's topology."""

    is_multinode: bool = False
    """A multi-node (disaggregated) job: its files then label it by its prefill and decode
    topology (PREFILL_*, DECODE_*), as the benchmark harness's do; a single-node job by TP,
    EP_SIZE and DP_ATTENTION."""

    result_filename: str | None = None
    """The benchmark job's result name; gives the precision and framework labels when they are
    not set (…_<precision>_<framework>_tp…, as the harness reads it)."""
