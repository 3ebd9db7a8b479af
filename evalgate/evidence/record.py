"""The result document: filled in stage by stage, complete on every path.

A run that stops early still produces a result that validates against result.schema.json: the
stages it did not reach are null, and ``status``/``stage``/``reason`` say where and why it
stopped.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from evalgate._version import __version__
from evalgate.engine.urls import redact_url
from evalgate.gate.context import EvalContext, Limit
from evalgate.gate.verdict import Score, Verdict
from evalgate.settings import Settings


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _limit(limit: Limit | None) -> dict[str, Any] | None:
    return {"value": limit.value, "source": limit.source} if limit else None


def context_document(context: EvalContext) -> dict[str, Any]:
    """The context as the result (and `evalgate context --json`) records it."""
    return {
        "eval_max_model_len": context.eval_max_model_len,
        "max_tokens": context.max_tokens,
        "budget_policy": context.budget_policy,
        "requested": context.requested,
        "native": _limit(context.native),
        "served": [_limit(s) for s in context.served],
        "prompt_tokens": _limit(context.prompt_tokens),
        "steps": list(context.steps),
    }


def labels_document(settings: Settings, topology: dict[str, Any] | None = None) -> dict[str, Any]:
    """Benchmark labels, so `evalgate verify` can resolve thresholds and expected sets."""
    return {
        "model_prefix": settings.model_prefix,
        "hardware": settings.hardware,
        "framework": settings.framework,
        "precision": settings.precision,
        "kv_cache_dtype": settings.kv_cache_dtype,
        "isl": settings.isl,
        "osl": settings.osl,
        "concurrency": settings.num_concurrent,
        "topology": topology,
    }


@dataclass
class Evidence:
    """What a run has established so far."""

    settings: Settings
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started_at: str = field(default_factory=_now)
    started: float = field(default_factory=time.monotonic)
    stage: str = "settings"
    timings: dict[str, float] = field(default_factory=dict)
    endpoint: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    probe: dict[str, Any] | None = None
    eval: dict[str, Any] | None = None
    scores: list[Score] = field(default_factory=list)
    threshold: dict[str, Any] | None = None
    verdict: Verdict | None = None
    warnings: list[str] = field(default_factory=list)
    files: dict[str, str | None] = field(default_factory=dict)
    topology: dict[str, Any] | None = None
    _stage_started: float = field(default_factory=time.monotonic)

    def enter(self, stage: str) -> None:
        """Mark the start of a stage (and time the one before)."""
        self._close_stage()
        self.stage = stage
        self._stage_started = time.monotonic()

    def _close_stage(self) -> None:
        if self.stage not in ("settings", "done"):
            self.timings[self.stage] = round(time.monotonic() - self._stage_started, 3)

    def set_endpoint(self, owned_by: str | None, version: str | None) -> None:
        s = self.settings
        self.endpoint = {
            "base_url": redact_url(s.base_url) if s.base_url else None,
            "api": s.api,
            "worker_urls": [redact_url(u) for u in s.worker_urls],
            "engine": {"owned_by": owned_by, "version": version, "model_root": None},
        }

    def document(
        self, *, status: str, reason: str, exit_code: int, error: BaseException | None = None
    ) -> dict[str, Any]:
        """The result.json document for the run as it stands."""
        self._close_stage()
        self.timings["total"] = round(time.monotonic() - self.started, 3)
        return {
            "schema": "evalgate.result/1",
            "evalgate_version": __version__,
            "run_id": self.run_id,
            "status": status,
            "stage": self.stage,
            "reason": reason,
            "error": (
                {"type": type(error).__name__, "message": str(getattr(error, "message", error))}
                if error is not None
                else None
            ),
            "exit_code": exit_code,
            "started_at": self.started_at,
            "finished_at": None if status == "running" else _now(),
            "timings": dict(self.timings),
            "model": self.settings.model,
            "labels": labels_document(self.settings, self.topology),
            "endpoint": self.endpoint,
            "context": self.context,
            "probe": self.probe,
            "eval": self.eval,
            "scores": [
                {
                    "task": s.task,
                    "metric": s.metric,
                    "filter": s.filter,
                    "value": s.value,
                    "stderr": s.stderr,
                    "n": s.n,
                }
                for s in self.scores
            ],
            "threshold": self.threshold,
            "checks": [
                {
                    "metric": c.metric,
                    "filter": c.filter,
                    "value": c.value,
                    "threshold": c.threshold,
                    "passed": c.passed,
                }
                for c in (self.verdict.checks if self.verdict else ())
            ],
            "warnings": list(self.warnings),
            "files": dict(self.files),
        }
