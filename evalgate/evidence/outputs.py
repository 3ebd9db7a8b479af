"""Which run a result file holds, and where a command may write its own files: never onto a file
the command reads, never onto evidence, and found before anything is written (RELIABILITY.md,
"Evidence is never an output").

``check_outputs`` is the one check every command makes of the paths it will write (a report, a
database, a fitted thresholds file, a page); ``write_output`` writes one of them whole (or
appends to it), its values scrubbed of the secrets as each was made safe for it
(evalgate.templates, scrub.json_text), never the text as a whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from evalgate.errors import ArtifactError
from evalgate.evidence.artifacts import EVIDENCE_NAMES, write_atomic
from evalgate.evidence.harness import is_results_file, samples_path
from evalgate.reader import decode, read_bytes

# A run's identity is what it holds, never where it lies: a copied, renamed or linked run folder
# is the same run, another run downloaded to the same path is another. Every place that pairs or
# matches runs keys them by run_identity (docs/verify.md, "How a config and a run are identified").
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


# Where a command may write.


def is_evidence(name: str) -> bool:
    """Whether a file of this name is a run's evidence (in either layout), which a later
    verify, compare or --resume reads: no output may take that name, wherever it is, in any
    case (on a file system that ignores case, Result.json is result.json)."""
    name = name.lower()
    harness_samples = name.startswith("samples") and name.endswith(".jsonl")
    return name in EVIDENCE_NAMES or is_results_file(name) or harness_samples


class Output(NamedTuple):
    """A file a command will write: what names it (a flag, a variable), where, and whether it
    is appended to (a job summary) rather than replaced."""

    label: str
    path: str
    append: bool = False


def check_outputs(outputs: Iterable[Output], reads: Sequence[str | Path] = ()) -> None:
    """Refuse (ArtifactError, exit 2) before anything is written: an output that cannot be
    written; one that is a file the command reads (`reads`: the files and folders it was
    given, a folder standing for the evidence under it), by any name; one named as evidence
    is (is_evidence), as given or where a link leads; two outputs onto one file."""
    outputs = list(outputs)
    read = _files_read(reads)
    taken: dict[str, str] = {}
    for output in outputs:
        _refuse_evidence(output, read)
        target = os.path.realpath(output.path)
        if _stream(output.path):  # /dev/stdout twice is two writes, not one file replaced
            continue
        if target in taken:
            raise ArtifactError(
                f"{output.label} {output.path} is the file {taken[target]} writes too: one "
                "report would replace the other. Give each its own path."
            )
        taken[target] = output.label
    for output in outputs:  # only then may a report's folder be made
        reason = _unwritable(output.path, append=output.append)
        if reason is not None:
            raise ArtifactError(
                f"Cannot write {output.path}: {reason} ({output.label}). Pass a writable path."
            )


def _refuse_evidence(output: Output, reads: Sequence[str | Path]) -> None:
    label, path = output.label, output.path
    names = {os.path.basename(os.path.normpath(path)), os.path.basename(os.path.realpath(path))}
    evidence = sorted(name for name in names if is_evidence(name))
    if evidence:
        raise ArtifactError(
            f"{label} {path} takes the name of a run's evidence ({evidence[0]}): writing it would "
            "destroy that evidence, or plant a file the next verify reads as a run. Give the "
            "report another name (e.g. verdict.json, report.html, junit.xml)."
        )
    if output.append and _other_names(path):
        raise ArtifactError(
            f"{label} {path} has other names (hard links): appending to it would change "
            "them too, and one may be a run's evidence. Point it at a file of its own."
        )
    read = next((r for r in reads if _same_file(path, r)), None)
    if read is not None:
        raise ArtifactError(
            f"{label} {path} is {read}, a file this command reads: writing it would destroy "
            "its input. Write the report elsewhere."
        )


def _files_read(reads: Sequence[str | Path]) -> list[str]:
    """The files given, with the evidence files beside each (a result's samples), and in each
    folder given the evidence files under it (through links, each folder once): a run's result
    or samples may be a link to a file of another name (a content store, a shared cache),
    which a report must not replace either."""
    found: list[str] = []
    seen: set[tuple[int, int]] = set()
    for read in map(str, reads):
        if not os.path.isdir(read):
            found.append(read)
            beside = os.path.dirname(read) or "."
            with contextlib.suppress(OSError):
                found += [os.path.join(beside, n) for n in os.listdir(beside) if is_evidence(n)]
            continue
        for folder, inside, names in os.walk(read, followlinks=True):
            info = os.stat(folder)
            if (info.st_dev, info.st_ino) in seen:  # a link back up: walked already
                inside.clear()
                continue
            seen.add((info.st_dev, info.st_ino))
            found += [os.path.join(folder, name) for name in names if is_evidence(name)]
    return found


def _same_file(path: str, read: str | Path) -> bool:
    """The same file: one path, a link to it, or another name of it (a hard link)."""
    if os.path.realpath(path) == os.path.realpath(read):
        return True
    try:
        return os.path.samefile(path, read)
    except OSError:  # either is not there yet
        return False


def _other_names(path: str) -> bool:
    """A regular file with more than one name: a file replaced whole leaves the others as they
    were, one appended to changes them all."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_nlink > 1


def _stream(path: str) -> bool:
    """A FIFO, a terminal, /dev/stdout: written as it is, never replaced by a file."""
    try:
        mode = os.stat(path).st_mode
    except OSError:  # nothing there yet (or a link to nothing): a new file
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _unwritable(path: str, *, append: bool) -> str | None:
    """Why the path cannot be written as write_output writes it, or None. A stream, or a file
    appended to, is written where it is; a file is replaced through one beside it (the folder
    made if need be: the one thing the check may leave)."""
    target = Path(os.path.realpath(path))
    exists = target.exists()
    if target.is_dir():
        return "it is a folder"
    if (append and exists) or _stream(path):
        return None if os.access(path, os.W_OK) else "Permission denied"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        return "a file is in the way of its folder"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    writable = (not exists or os.access(target, os.W_OK)) and os.access(
        target.parent, os.W_OK | os.X_OK
    )
    return None if writable else "Permission denied"


def write_output(path: str, text: str, *, append: bool = False, label: str = "") -> None:
    """Write an output whole, in one step (write_atomic), or append to it; an unwritable path
    is an ArtifactError (exit 2). The path was checked first (check_outputs). The text is not
    scrubbed here: its values were, as each was made safe for this output (a JSON
    document's own field names and schema id are no secret, whatever a key spells)."""
    try:
        if append or _stream(path):
            with open(path, "a" if append else "w", encoding="utf-8") as stream:
                stream.write(text)
        else:  # through a link to the file it names, as users point reports at shared places
            write_atomic(Path(os.path.realpath(path)), text)
    except OSError as exc:
        given = f" ({label})" if label else ""
        raise ArtifactError(
            f"Cannot write {path}: {exc.strerror}{given}. Pass a writable path."
        ) from exc
