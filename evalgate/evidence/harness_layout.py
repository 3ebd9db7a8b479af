"""The benchmark harness's eval files: their names, and its meta_env.json read back, so
`evalgate verify` reads a harness sweep and `hook --layout harness` writes what the harness's
workflow takes (docs/harness.md, "What stays the same" and "What evalgate adds").
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalgate.errors import FormatError
from evalgate.evidence.stage_records import Labels

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
