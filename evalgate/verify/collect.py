"""Finding a sweep's eval results on disk and reading each into one shape (the I/O edge of verify).

Two kinds of artifact are found under each path given:

- evalgate's ``result.json`` (checked against result.schema.json);
- the benchmark harness's plain lm-eval output: ``results*.json`` holding ``lm_eval_version``,
  with the run's ``meta_env.json`` in the same folder or the one above it (lm-eval nests its
  output under the model's name); harness_output.py turns each such set into its runs.

An ``evalgate hook`` summary (``hook.json``) adds the concurrencies it lists as "not run" as
skipped runs, labelled like their siblings. Nothing is dropped silently: a file that cannot be
read or breaks its format is a ``Note`` in ``malformed`` (path and reason); a ``results*.json``
that is not lm-eval's is listed as ``ignored``. lm-eval files and meta_env.json inside an
evalgate run's folder are that run's evidence and are not counted twice, nor are the harness's
files that ``evalgate hook --layout harness`` writes beside its own runs (in ``evalgate/``).

The walk follows symbolic links to folders. A folder met a second time (a link back up the tree,
or two ways to one folder) is searched once, and the other way is listed as ignored; so is a
link to nothing.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from evalgate.errors import ArtifactError, UsageError
from evalgate.evidence.artifacts import (
    HOOK_NAME,
    META_NAME,
    RESULT_NAME,
    read_document,
    read_hook,
    read_result,
)
from evalgate.evidence.harness_layout import EVALGATE_DIR, FormatError
from evalgate.evidence.model import (
    LABEL_NAMES,
    EarlyStopRecord,
    Labels,
    Score,
    Stage,
    Status,
    VerdictRecord,
    to_document,
)
from evalgate.verify import harness_output
from evalgate.verify.records import Found, Note


class Collection(msgspec.Struct):
    """Everything found under the paths given: the runs, and the paths that are not runs."""

    found: list[Found] = msgspec.field(default_factory=list)
    malformed: list[Note] = msgspec.field(default_factory=list)
    ignored: list[Note] = msgspec.field(default_factory=list)
    empty: list[str] = msgspec.field(default_factory=list)


# -- reading one file ----------------------------------------------------------------------------


def _read(path: str, reader: Any) -> Any:
    """`reader(path)`, or a Note saying why the file is not usable: a reader's error is about
    that one file, never the end of the sweep."""
    try:
        return reader(path)
    except ArtifactError as exc:
        return Note(path, exc.message)
    except RecursionError:  # a document nested deeper than any decoder goes
        return Note(path, f"{path} is not valid JSON: it is nested too deeply to read.")


class _Failure(msgspec.Struct):
    type: str


class _Check(msgspec.Struct):
    passed: bool


class _Eval(msgspec.Struct):
    early_stop: EarlyStopRecord | None = None


class _Run(msgspec.Struct, kw_only=True):
    """The part of a result.json that verify reads, typed as the evidence model types it."""

    status: Status
    stage: Stage
    reason: str
    error: _Failure | None = None
    model: str | None
    labels: Labels
    eval: _Eval | None = None
    scores: list[Score] = []
    checks: list[_Check] = []
    verdict: VerdictRecord | None = None


def _read_run(path: str) -> _Run:
    return read_result(path, _Run)


def _evalgate(path: str) -> Found | Note:
    """What verify needs of one result.json (checked whole against its schema)."""
    result = _read(path, _read_run)
    if isinstance(result, Note):
        return result
    running = result.status == "running"
    return Found(
        path=path,
        source="evalgate",
        model=result.model,
        labels=to_document(result.labels),
        scores=tuple(result.scores),
        status=result.status,
        stage=result.stage,
        reason=result.reason + (f" ({result.error.type})" if result.error else ""),
        failed_on_scores=any(not c.passed for c in result.checks),
        verdict=result.verdict,
        early_stop=result.eval.early_stop if result.eval else None,
        holder=_lock_holder(os.path.dirname(path)) if running else None,
    )


LOCK_NAME = ".evalgate.lock"
"""The lock a run holds on its output folder while it runs; the file holds its process id."""


def _lock_holder(folder: str) -> str | None:
    """The process id in the folder's lock file while that lock is held (the run is alive;
    "unknown" if the file names none); None if it is not held, or cannot be tested."""
    try:
        fd = os.open(os.path.join(folder, LOCK_NAME), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when fd is closed
        except BlockingIOError:
            pid = os.read(fd, 32).decode("ascii", "replace").strip()
            return pid if pid.isdigit() else "unknown"
        except OSError:  # a file system without flock: nothing to tell
            return None
        return None
    finally:
        os.close(fd)


def _lm_eval(path: str, notes: Collection) -> Any:
    """An lm-eval results file's document, or None (noted: unreadable, or not lm-eval's)."""
    doc = _read(path, read_document)
    if isinstance(doc, Note):
        notes.malformed.append(doc)
    elif not isinstance(doc, dict) or "lm_eval_version" not in doc:
        notes.ignored.append(Note(path, f"{path} is not an lm-eval result (no lm_eval_version)"))
    else:
        return doc
    return None


def _hook(path: str, sibling: Found | None, notes: Collection) -> list[Found]:
    """The runs an `evalgate hook` summary lists as "not run" (an earlier run stopped it),
    labelled like a run found beside it."""
    summary = _read(path, read_hook)
    if isinstance(summary, Note):
        notes.malformed.append(summary)
        return []
    labels = dict(sibling.labels) if sibling else dict.fromkeys(LABEL_NAMES)
    model = sibling.model if sibling else None
    return [
        Found(
            path,
            "evalgate",
            model,
            {**labels, "concurrency": run.concurrency},
            (),
            "skipped",
            None,
            run.reason or "not run",
        )
        for run in summary.runs
        if run.status == "not run"
    ]


def _harness_set(meta_path: str, paths: list[str], notes: Collection) -> list[Found]:
    """The runs one meta_env.json and its lm-eval results describe (read now, not before)."""
    files = [(path, doc) for path in paths if (doc := _lm_eval(path, notes)) is not None]
    meta = _read(meta_path, read_document)
    if not isinstance(meta, Note):
        try:
            runs, unusable = harness_output.runs(meta_path, meta, files)
        except FormatError as exc:
            meta = Note(meta_path, f"{meta_path} {exc}")
        else:
            notes.malformed += unusable
            return runs
    lost = f"; the {len(files)} lm-eval result(s) it describes go unchecked" if files else ""
    notes.malformed.append(Note(meta_path, meta.reason + lost))
    return []


# -- finding -------------------------------------------------------------------------------------


class _Tree(msgspec.Struct):
    """The files under one root that verify reads, in the order walked."""

    results: list[str] = msgspec.field(default_factory=list)
    metas: dict[str, str] = msgspec.field(default_factory=dict)
    """meta_env.json path by folder."""
    candidates: list[str] = msgspec.field(default_factory=list)
    hooks: list[str] = msgspec.field(default_factory=list)


def _folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # through a symbolic link too
    except OSError:  # a link into a folder that cannot be read: named below as unreachable
        return False


def _list(
    folder: str, tree: _Tree, seen: dict[tuple[int, int], str], notes: Collection
) -> list[str]:
    """The folders inside `folder` not met before; the files there that verify reads go to
    `tree`. Folders are known by device and inode, so a link back up ends the descent."""
    with os.scandir(folder) as listing:
        entries = sorted(listing, key=lambda entry: entry.name)
    inside = []
    for entry in entries:
        name, path = entry.name, entry.path
        if _folder(entry):
            info = entry.stat()
            first = seen.setdefault((info.st_dev, info.st_ino), path)
            if first == path:
                inside.append(path)
            else:
                again = f"{path} is the folder {first} again (a symbolic link): searched once"
                notes.ignored.append(Note(path, again))
        elif name == RESULT_NAME:
            tree.results.append(path)
        elif name == META_NAME:
            tree.metas[folder] = path
        elif name == HOOK_NAME:
            tree.hooks.append(path)
        elif name.startswith("results") and name.endswith(".json"):
            tree.candidates.append(path)
        elif entry.is_symlink() and not os.path.exists(path):
            nowhere = f"{path} is a symbolic link to {os.readlink(path)}, which cannot be reached"
            notes.ignored.append(Note(path, nowhere + ": not searched"))
    return inside


def _walk(root: str, notes: Collection) -> _Tree:
    """The files verify reads under the folder root, level by level; a folder that cannot be
    listed is malformed (the root itself: a UsageError)."""
    tree = _Tree()
    info = os.stat(root)
    seen = {(info.st_dev, info.st_ino): root}
    level = [root]
    while level:
        inside: list[str] = []
        for folder in level:
            try:
                inside += _list(folder, tree, seen, notes)
            except OSError as exc:
                if folder == root:
                    raise UsageError(f"Cannot list {folder}: {exc.strerror}.") from exc
                lost = f"Cannot list {folder}: {exc.strerror}; the results in it go unchecked"
                notes.malformed.append(Note(folder, lost))
        level = inside
    return tree


def _within_run(folder: str, root: str, run_dirs: set[str]) -> bool:
    """Whether `folder` is (inside) an evalgate run's output folder, looking no higher than root."""
    while True:
        if folder in run_dirs:
            return True
        parent = os.path.dirname(folder)
        if folder in (root, parent):
            return False
        folder = parent


_MIRROR = (
    "{path} is the benchmark harness's copy of the evalgate runs in evalgate/ beside it "
    "(evalgate hook --layout harness): each run is counted once, from its result.json"
)
_NO_META = (
    "{path} is an lm-eval result with no meta_env.json beside it (or one folder up): its config "
    "is unknown. Stage the run's meta_env.json with it."
)


def _harness_runs(root: str, tree: _Tree, notes: Collection) -> Iterator[Found]:
    """The benchmark harness's eval sets under root (meta_env.json and its lm-eval results)
    outside evalgate's own run folders, one set at a time."""
    metas = tree.metas
    run_dirs = {os.path.dirname(path) for path in tree.results}
    mirrors = {
        m
        for folder, m in metas.items()
        if os.path.isfile(os.path.join(folder, EVALGATE_DIR, HOOK_NAME))
    }
    notes.ignored += [Note(meta, _MIRROR.format(path=meta)) for meta in sorted(mirrors)]
    sets: dict[str, list[str]] = {
        meta: []
        for folder, meta in metas.items()
        if meta not in mirrors and not _within_run(folder, root, run_dirs)
    }
    for path in tree.candidates:
        folder = os.path.dirname(path)
        meta = metas.get(folder) or metas.get(os.path.dirname(folder))
        if _within_run(folder, root, run_dirs):
            continue  # the lm-eval output an evalgate run keeps as evidence
        if metas.get(folder) in mirrors:
            notes.ignored.append(Note(path, _MIRROR.format(path=path)))
        elif meta in sets:
            sets[meta].append(path)
        elif _lm_eval(path, notes) is not None:
            notes.malformed.append(Note(path, _NO_META.format(path=path)))
    for meta, paths in sets.items():
        yield from _harness_set(meta, paths, notes)


def _tree_runs(root: str, notes: Collection) -> Iterator[Found]:
    """Every run under the folder root, each as it is read: its result.json files, the runs
    its hook.json files list as not run, then the harness's eval sets."""
    tree = _walk(root, notes)
    hooks = {os.path.dirname(path): path for path in tree.hooks}
    siblings: dict[str, Found] = {}  # a run under each hook's folder, to label its skipped runs
    for path in tree.results:
        run = _evalgate(path)
        if isinstance(run, Note):
            notes.malformed.append(run)
            continue
        folder = path
        while hooks and folder not in (root, os.path.dirname(folder)):
            folder = os.path.dirname(folder)
            if folder in hooks:
                siblings.setdefault(folder, run)
        yield run
    for folder, path in hooks.items():
        yield from _hook(path, siblings.get(folder), notes)
    yield from _harness_runs(root, tree, notes)


# -- the paths given -----------------------------------------------------------------------------


def _roots(paths: list[str]) -> list[str]:
    """The paths to search: each checked, and those inside another one given (or given twice)
    left out."""
    for path in paths:
        name = os.path.basename(path)
        if not os.path.exists(path):
            raise UsageError(
                f"{path} does not exist. Pass the folder the sweep's artifacts were downloaded "
                "to, or an evalgate result.json."
            )
        if not os.path.isdir(path) and (
            name == META_NAME or re.fullmatch(r"results.*\.json", name)
        ):
            raise UsageError(
                f"{path} is part of a benchmark harness eval: pass the folder that holds "
                f"meta_env.json and its lm-eval results, not the file."
            )
    full = [os.path.abspath(path) for path in paths]
    covered = {
        i
        for i, path in enumerate(full)
        for j, other in enumerate(full)
        if i != j and (path.startswith(other + os.sep) or (path == other and j < i))
    }
    return [path for i, path in enumerate(paths) if i not in covered]


def runs(paths: Iterable[str], notes: Collection) -> Iterator[Found]:
    """Every run under `paths` (folders, searched recursively, or evalgate result files), each
    as it is read; the paths that are not runs go to `notes` (malformed, ignored, empty)."""
    for root in _roots(list(paths)):
        before, count = len(notes.malformed), 0
        if os.path.isdir(root):
            for run in _tree_runs(os.path.normpath(root), notes):
                count += 1
                yield run
        elif isinstance(item := _evalgate(root), Note):
            notes.malformed.append(item)
        else:
            count += 1
            yield item
        if not count and len(notes.malformed) == before:
            notes.empty.append(root)
    notes.malformed.sort(key=lambda note: note.path)
    notes.ignored.sort(key=lambda note: note.path)


def collect(paths: Iterable[str]) -> Collection:
    """Every run under `paths`, read, with the paths that are not runs."""
    out = Collection()
    out.found = list(runs(paths, out))
    return out
