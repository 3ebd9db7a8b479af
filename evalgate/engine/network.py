"""What every connection to an engine is given, as plain values: settings make it without
loading the HTTP client (engine/http.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Network:
    """Settings: connect_timeout, keepalive_*, max_response_bytes."""

    connect_timeout: float = 30.0
    keepalive_idle: float = 30.0
    keepalive_interval: float = 10.0
    keepalive_probes: int = 3
    max_response_bytes: int = 16 << 20

    @property
    def silence_limit(self) -> float:
        """Seconds a connection may go unanswered before the kernel drops it (TCP_USER_TIMEOUT):
        the idle time plus every keepalive probe."""
        return self.keepalive_idle + self.keepalive_interval * self.keepalive_probes
