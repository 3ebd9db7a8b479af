"""Defaults that commands other than `run` share with the Settings model (no pydantic here)."""

from __future__ import annotations

DEFAULT_MAX_DROP = 0.02
"""The default margin of `compare` and `run --baseline`: a drop of up to two points of
accuracy is tolerated."""
