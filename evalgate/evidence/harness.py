"""The benchmark harness's eval files: their names, its meta_env.json read back, and each file
written from what `evalgate hook` produced, so `evalgate verify` reads a harness sweep and the
harness's validator and collector read evalgate's eval as their own (docs/harness.md, "What
stays the same" and "What evalgate adds").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from evalgate.errors import FormatError
from evalgate.evidence import artifacts
from evalgate.evidence.model import Labels, Result, Sample
from evalgate.reader import read

TASK = "gsm8k"
"""The task name the harness's validator looks its threshold up by."""
EVALGATE_DIR = "evalgate"
"""Where evalgate's own folders go in a harness-layout staging folder (verify knows it too)."""


def is_results_file(name: str) -> bool:
    """Is `name` one of lm-eval's results files as the harness names them, results*.json (its
    workflow uploads that glob; verify reads them)?"""
    return name.startswith("results") and name.endswith(".json")


def samples_path(results: Path, task: str) -> Path:
    """results_<ts>[_conc<N>].json -> samples_<task>_<ts>[_conc<N>].jsonl beside it: the
    names lm-eval gives a run's two files."""
    stamp = results.name.removeprefix("results").removesuffix(".json")
    return results.with_name(f"samples_{task}{stamp}.jsonl")


UNKNOWN = ("", "unknown", "none", "null")
SIZES = {"pp": "PP_SIZE", "dcp_size": "DCP_SIZE", "pcp_size": "PCP_SIZE"}
"""The parallel sizes (1 by default), with the job's variable each is read from."""
_SINGLE = ("tp", "ep", "dp_attention", *SIZES)
_PHASES = tuple(
    f"{phase}_{key}"
    for phase in ("prefill", "decode")
    for key in ("tp", "ep", "dp_attention", "num_workers", *SIZES)
)


def _int(meta: Mapping[str, Any], key: str, bad: list[str]) -> int | None:
    value = meta.get(key)
    if value is None or (isinstance(value, str) and value.strip().lower() in UNKNOWN):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    bad.append(f"{key} is {value!r}, not an integer")
    return None


def meta_text(meta: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = meta.get(key)
        if isinstance(value, str) and value.strip().lower() not in UNKNOWN:
            return value.strip()
    return None


def _flag(value: Any) -> Any:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


def _concs(meta: Mapping[str, Any], key: str, bad: list[str]) -> list[int] | None:
    value = meta.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in value
    ):
        bad.append(f"{key} is {value!r}, not a list of positive integers")
        return None
    return value


def topology(meta: Mapping[str, Any], bad: list[str]) -> dict[str, Any] | None:
    multinode = _flag(meta.get("is_multinode")) is True
    topology: dict[str, Any] = {}
    for key in _PHASES if multinode else _SINGLE:
        short = key.split("_", 1)[1] if multinode else key
        if key not in meta:
            continue
        value = _flag(meta[key]) if "dp_attention" in key else _int(meta, key, bad)
        if value is None or (short in SIZES and value == 1):
            continue
        topology[key] = value
    spec = meta_text(meta, "spec_decoding")
    if spec is not None:
        topology["spec_decoding"] = spec
    return topology or None


def meta_labels(meta: Any) -> tuple[str | None, Labels, dict[str, Any]]:
    """(model, identity labels, batch fields) from a meta_env.json; FormatError if malformed."""
    if not isinstance(meta, dict):
        raise FormatError(f"is not a JSON object but {type(meta).__name__}")
    bad: list[str] = []
    labels = Labels(
        model_prefix=meta_text(meta, "model_prefix", "infmax_model_prefix"),
        hardware=meta_text(meta, "hardware", "hw"),
        framework=meta_text(meta, "framework"),
        precision=meta_text(meta, "precision"),
        kv_cache_dtype=meta_text(meta, "kv_cache_dtype"),
        isl=_int(meta, "isl", bad) or None,
        osl=_int(meta, "osl", bad) or None,
        concurrency=_int(meta, "conc", bad),
        topology=topology(meta, bad),
    )
    batch = {
        "eval_concs": _concs(meta, "eval_concs", bad),
        "completed": _concs(meta, "completed_eval_concs", bad),
        "failed": _concs(meta, "failed_eval_concs", bad),
        "exit_code": _int(meta, "eval_exit_code", bad),
    }
    model = meta_text(meta, "model")
    if model is None and labels.model_prefix is None:
        bad.append("neither model nor model_prefix (infmax_model_prefix) is set")
    if bad:
        raise FormatError("is not a valid benchmark meta_env.json: " + "; ".join(bad))
    return model, labels, batch


# The files written: pure functions build each document; the I/O is ``stage_run`` and hook.py's
# ``write_meta``.

_RESULT_NAME = re.compile(r".*_([^_]+)_([^_]+)_tp")
"""RESULT_FILENAME as the harness reads precision and framework from it."""
_BEFORE_CONC = ("tp", *SIZES)
"""The topology keys the harness writes before `conc` (the rest follow the batch keys)."""
_TASK_KEYED = ("results", "configs", "versions", "n-shot", "higher_is_better", "n-samples")


class Job(Protocol):
    """The benchmark job's labels as the settings hold them (settings/gate.py's LabelsSettings,
    where each is stated), as the harness's files read them."""

    @property
    def model_prefix(self) -> str | None: ...
    @property
    def hardware(self) -> str | None: ...
    @property
    def framework(self) -> str | None: ...
    @property
    def precision(self) -> str | None: ...
    @property
    def spec_decoding(self) -> str | None: ...
    @property
    def is_multinode(self) -> bool: ...
    @property
    def result_filename(self) -> str | None: ...


def _true(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def _number(value: str) -> int | str:
    return int(value) if value.strip().isdigit() else value


def _first(env: Mapping[str, str], *names: str, default: str = "") -> str:
    return next((env[name] for name in names if env.get(name)), default)


def _phase(env: Mapping[str, str], phase: str, tp_default: str) -> dict[str, Any]:
    """One phase's topology as the harness bridges it, but where the phase says nothing the
    job's own EP_SIZE and DP_ATTENTION hold (docs/harness.md, the variables and (1))."""
    p = phase.upper()
    tp = _first(env, f"{p}_TP", f"{p}_TP_SIZE", default=tp_default)
    ep = _first(env, f"{p}_EP", "EP_SIZE", default="1")
    if ep == "1" and _true(_first(env, f"{p}_ENABLE_EP", default="false")):
        ep = _first(env, f"{p}_TP_SIZE", default=tp)
    workers = _first(env, f"{p}_NUM_WORKERS", "xP" if p == "PREFILL" else "yD", default="1")
    dp = _first(
        env,
        f"{p}_DP_ATTN",
        f"{p}_DP_ATTENTION",
        f"{p}_ENABLE_DP",
        "DP_ATTENTION",
        default="false",
    )
    fields: dict[str, Any] = {"tp": _number(tp)}
    for key, name in SIZES.items():
        fields[key] = _number(_first(env, f"{p}_{name}", name, default="1"))
    return fields | {"ep": _number(ep), "dp_attention": _true(dp), "num_workers": _number(workers)}


def job_fields(env: Mapping[str, str]) -> dict[str, Any]:
    """The topology keys of the harness's meta_env.json (tp, pp, dcp_size, pcp_size, ep,
    dp_attention, then prefill_* and decode_*), from the job's variables: both layouts write
    these, so one job has one config key whichever layout staged it."""
    prefill = _phase(env, "prefill", _first(env, "TP", default="1"))
    decode = _phase(env, "decode", str(prefill["tp"]))
    fields: dict[str, Any] = {"tp": prefill["tp"]}
    for key, name in SIZES.items():
        fields[key] = _number(_first(env, name, default="1"))
    fields |= {"ep": prefill["ep"], "dp_attention": prefill["dp_attention"]}
    for name, phase in (("prefill", prefill), ("decode", decode)):
        fields |= {f"{name}_{key}": value for key, value in phase.items()}
    return fields


def meta_env(
    job: Job,
    env: Mapping[str, str],
    concurrencies: Sequence[int],
    completed: Sequence[int],
    failed: Sequence[int],
    *,
    served_model: str | None,
    isl: int | None,
    osl: int | None,
) -> dict[str, Any]:
    """The harness's meta_env.json for a batch of concurrencies, from the job's labels, the
    model it served, ISL/OSL and the job's topology variables (`env`), key for key as its
    append_lm_eval_summary writes it."""
    framework, precision = job.framework, job.precision
    match = _RESULT_NAME.match(job.result_filename or "")
    if match is not None:  # unset labels are read from RESULT_FILENAME, as the harness does
        precision = precision or match.group(1)
        framework = framework or match.group(2)
    fields = job_fields(env)
    return {
        "is_multinode": job.is_multinode,
        "framework": framework or "unknown",
        "precision": precision or "unknown",
        "spec_decoding": job.spec_decoding or "",
        "recipe_fingerprint": env.get("RECIPE_FINGERPRINT", ""),
        **{key: fields[key] for key in _BEFORE_CONC},
        "conc": concurrencies[0],
        "eval_concs": list(concurrencies),
        "completed_eval_concs": list(completed),
        "failed_eval_concs": list(failed),
        **{key: value for key, value in fields.items() if key not in _BEFORE_CONC},
        "model": served_model or "",
        "infmax_model_prefix": job.model_prefix or "unknown",
        "hw": job.hardware or "unknown",
        "isl": str(isl or 0),  # the harness writes both as strings
        "osl": str(osl or 0),
    }


def job_topology(job: Job, env: Mapping[str, str]) -> dict[str, Any] | None:
    """The job's topology labels, read from its meta_env.json fields as `evalgate verify`
    reads them: result.json records the same in both layouts, so one job has one key."""
    fields = {
        "is_multinode": job.is_multinode,
        "spec_decoding": job.spec_decoding or "",
        **job_fields(env),
    }
    return topology(fields, [])  # built here, so well-formed: nothing to report


def completed(result: Result) -> bool:
    """Whether a run counts as a completed eval for the harness: scored, and either passed,
    undecided, or failed on its scores."""
    if result.status in ("pass", "inconclusive"):
        return True
    return result.status == "fail" and any(not c.passed for c in result.checks)


def results_document(raw: Mapping[str, Any], model: str | None) -> dict[str, Any]:
    """lm-eval's results with evalgate's task renamed gsm8k (the name the harness's validator
    resolves a threshold by) and the served model's name, as lm-eval's CLI records it."""
    document = dict(raw)
    for key in _TASK_KEYED:
        section = raw.get(key)
        if isinstance(section, dict) and len(section) == 1:
            ((_name, value),) = section.items()
            if isinstance(value, dict) and key in ("results", "configs"):
                value = value | ({"task": TASK} if key == "configs" else {"alias": TASK})
                value.pop("name", None)
            document[key] = {TASK: value}
    document["model_name"] = model
    return document


def sample_records(samples: Sequence[Sample]) -> list[dict[str, Any]]:
    """evalgate's samples.jsonl as lm-eval's log_samples lines: one per question and filter."""
    return [
        {
            "doc_id": sample.doc_id,
            "doc": {"question": sample.question},
            "target": sample.target,
            "resps": [[sample.response or ""]],
            "filtered_resps": [outcome.extracted],
            "filter": name,
            "metrics": ["exact_match"],
            "exact_match": 1.0 if outcome.correct else 0.0,
        }
        for sample in samples
        for name, outcome in sorted(sample.filters.items())
    ]


def timestamp() -> str:
    """lm-eval's file timestamp (local time, ISO 8601 with ':' as '-')."""
    return datetime.now().isoformat().replace(":", "-")


def stage_run(
    out_dir: Path,
    concurrency: int,
    run_dir: Path,
    result: Result,
    *,
    served_model: str | None,
    stamp: str,
) -> list[Path]:
    """Write one concurrency's results_<ts>_conc<N>.json and samples_gsm8k_<ts>_conc<N>.jsonl
    from its evalgate run folder; nothing when the run has no scores. An earlier hook's files
    for the same concurrency are removed first (the harness's collector takes the newest)."""
    for old in [
        *out_dir.glob(f"results_*_conc{concurrency}.json"),
        *out_dir.glob(f"samples_{TASK}_*_conc{concurrency}.jsonl"),
    ]:
        old.unlink()
    raw_path = run_dir / artifacts.RAW_NAME
    if not result.scores or not raw_path.is_file():
        return []
    raw = read(raw_path)
    if isinstance(raw, dict) and "lm_eval_version" not in raw:
        raw["lm_eval_version"] = result.eval.lm_eval_version if result.eval else None
    results = out_dir / f"results_{stamp}_conc{concurrency}.json"
    artifacts.write_json(results, results_document(raw, served_model))
    written = [results]
    own_samples = run_dir / artifacts.SAMPLES_NAME
    if own_samples.is_file():
        samples = samples_path(results, TASK)
        artifacts.write_jsonl(samples, sample_records(artifacts.read_samples(own_samples)))
        written.append(samples)
    return written
