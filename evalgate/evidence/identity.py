"""Which run a file holds: its identity is what it holds, never where it lies (docs/verify.md,
"How a config and a run are identified"). A copied, renamed or linked run folder is the same
run; another run downloaded to the same path is another. Every place that pairs or matches
runs (verify --baseline, compare, a history of runs) keys them by ``run_identity``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from evalgate.errors import ArtifactError
from evalgate.evidence.harness_layout import samples_path
from evalgate.evidence.read import decode, read_bytes

CONTENT = "sha256:"
"""How an identity drawn from a run's bytes begins (evalgate's own run ids are hex digits)."""


def run_identity(result_file: Path | str) -> str:
    """The identity of the run whose result file is `result_file`:

    - an evalgate result.json: the ``run_id`` evalgate wrote in it (a uuid4, hex), which its
      copies keep and a new run never shares;
    - an lm-eval results file (the benchmark harness's ``results_*.json``, which records no id):
      ``sha256:`` and the hex sha256 of its bytes followed by its samples file's
      (``samples_<task>_*.jsonl`` beside it, when there).

    An ArtifactError when the file cannot be read. A ``Run`` of compare holds the same value
    as its ``result.run_id``."""
    data = read_bytes(result_file)
    document = decode(data, where=str(result_file))
    if isinstance(document, dict):
        run_id = document.get("run_id")
        if str(document.get("schema", "")).startswith("evalgate.result/"):
            if isinstance(run_id, str) and run_id:
                return run_id
            raise ArtifactError(f"{result_file} is an evalgate result with no run_id.")
    digest = hashlib.sha256(data)
    tasks = document.get("results") if isinstance(document, dict) else None
    if isinstance(tasks, dict) and len(tasks) == 1:
        samples = samples_path(Path(result_file), str(next(iter(tasks))))
        if samples.is_file():
            digest.update(read_bytes(samples))
    return CONTENT + digest.hexdigest()
