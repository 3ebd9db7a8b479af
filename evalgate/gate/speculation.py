"""Simulated speculative decoding: its answers are not the model's and evalgate cannot switch it
off, so it refuses (docs/harness.md, "Where evalgate differs on purpose" (6)).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from evalgate import numbers
from evalgate.errors import UsageError

SIMULATE_VARIABLE = "SGLANG_SIMULATE_ACC_LEN"
_ACCEPTANCE_FLAG = re.compile(r"--spec[-_]decode[-_]acceptance[-_]length(?:=|\s+|$)(\S*)")
_SHOWN = 40
"""Characters of a value repeated in a message (the rest is outside text of no use there)."""


def _off(value: str) -> bool:
    """Empty or zero (0, 0.0): SGLang simulates nothing."""
    text = value.strip()
    try:
        return not text or numbers.real(text) == 0
    except ValueError:  # not a number evalgate reads (ASCII digits): not off
        return False


def simulated_sources(
    simulate_acc_len: str | None, server_args: Sequence[tuple[str, str]]
) -> list[str]:
    """Where the job says acceptance is simulated, one phrase per source ([]: nowhere).
    `server_args` holds (server-argument string, where it came from) pairs."""
    found = []
    if simulate_acc_len is not None and not _off(simulate_acc_len):
        shown = simulate_acc_len.strip()[:_SHOWN]
        found.append(
            f"{SIMULATE_VARIABLE}={shown!r} in the gate's environment "
            "(or --sglang-simulate-acc-len)"
        )
    for args, source in server_args:
        found += [
            f"--spec-decode-acceptance-length {match.group(1)[:_SHOWN]!r} in {source}"
            for match in _ACCEPTANCE_FLAG.finditer(args)
        ]
    return found


def check_acceptance(sources: Sequence[str], *, allowed: bool) -> str | None:
    """None when nothing is simulated; the warning to record when it is and `allowed`; else
    a UsageError naming every source."""
    if not sources:
        return None
    listed = "; ".join(sources)
    if not allowed:
        raise UsageError(
            f"Speculative decoding's acceptance is simulated ({listed}): the engine accepts "
            "draft tokens at a fixed rate instead of checking them, so its answers are not the "
            "model's and no score of them means anything. Serve the eval without the "
            "simulation (the benchmark harness switches it off whenever it evaluates), or pass "
            "--allow-simulated-acceptance to gate anyway."
        )
    return (
        f"speculative acceptance is simulated ({listed}) and the gate ran anyway "
        "(--allow-simulated-acceptance): its scores say nothing about the model"
    )
