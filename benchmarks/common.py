"""What the benchmark scripts share: the checkout they time, the commit and time they say a
figure was measured at, and BENCHMARKS.md's sections, which each script rewrites on its own
(benchmarks/suite.py runs them all)."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def stamp() -> str:
    """Now, as BENCHMARKS.md dates a measurement."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def git_commit(root: Path, *, otherwise: str = "unknown") -> str:
    """The short commit checked out at `root` (`otherwise` where git cannot say)."""
    done = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or otherwise


def commit() -> str:
    """This checkout's commit, marked when evalgate/ differs from it."""
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", "evalgate"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return git_commit(ROOT) + (" (with uncommitted changes)" if dirty else "")


def section(name: str, body: str) -> str:
    return f"<!-- {name}:start -->\n{body}<!-- {name}:end -->\n"


def replace_section(text: str, name: str, body: str) -> str:
    """`text` with its `name` section replaced by `body` (appended when it has none)."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1].lstrip("\n")
        return before + section(name, body) + after
    return text.rstrip("\n") + "\n\n" + section(name, body)
