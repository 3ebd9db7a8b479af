"""The gate and its evidence: thresholds, the early stop, where results go, the baseline, and
the labels recorded in the result."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from evalgate.numbers import COUNT_MAX
from evalgate.settings.environment import DEFAULT_MAX_DROP
from evalgate.settings.fields import Group


class EvidenceSettings(Group):
    thresholds: Path | None = None
    """Thresholds file to gate on, YAML or JSON (the benchmark harness's thresholds.yaml as it
    is; default: the one evalgate ships)."""

    early_stop: Literal["off", "fail", "pass", "both"] = "off"
    """Stop asking questions as soon as an anytime-valid test is certain of the verdict: fail
    (once any filter is certainly below the threshold), pass (once every filter is certainly
    above), both, or off (every question, the benchmark harness's protocol). The questions are
    then sent in a seeded random order and read in that order."""

    alpha: float = Field(0.05, gt=0, lt=1)
    """With --early-stop: the most often a run at or below the threshold passes early (and one at
    or above it fails early)."""

    output_dir: Path = Path("evalgate-results")
    """Where result.json, samples.jsonl and lm-eval's raw results are written."""

    layout: Literal["evalgate", "harness"] = "evalgate"
    """`evalgate hook`: evalgate's own folders (conc-<N>/), or the benchmark harness's files in
    output_dir (meta_env.json, results_<ts>_conc<N>.json, samples_gsm8k_<ts>_conc<N>.jsonl)
    with evalgate's own results under evalgate/; harness also decides as the harness's
    validator does, on the point estimate (--min-samples 0), unless --min-samples is given."""

    overwrite: bool = False
    """Replace a result already in output_dir (otherwise that is an error)."""

    baseline: Path | None = None
    """An earlier run's folder: after the gate, compare this run with it question by question
    (the `evalgate compare` report is printed and saved as comparison.json)."""

    max_drop: float = Field(DEFAULT_MAX_DROP, ge=0, lt=1)
    """With --baseline: the accuracy drop (as a fraction) still called equivalent."""

    min_samples: int | None = Field(None, ge=0, le=COUNT_MAX)
    """Questions below which a score whose 95% interval straddles the threshold is
    inconclusive (exit 5) rather than decided on its point estimate (default: the full test
    set, 1319; 0 decides every score on its point estimate, as the benchmark harness does)."""

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

    @field_validator("baseline")
    @classmethod
    def _not_with_early_stop(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is not None and info.data.get("early_stop", "off") != "off":
            raise ValueError(
                f"a run stopped early cannot be compared with --baseline {value} (its questions "
                "were chosen by its own answers); use --early-stop off to compare, or drop "
                "--baseline"
            )
        return value
