"""A sweep's eval results found on disk, which files make which runs, nothing dropped silently:
verify's input edge (docs/verify.md, "What it finds"). Each file is read into what verify
judges: a run (Found), or why not (a Note).

evalgate's result.json is read whole into the evidence model, and verify keeps what the gate
rule needs. An ``evalgate hook`` summary gives the runs it lists as "not run"; a harness eval
set (a meta_env.json and its lm-eval results) gives its runs through harness_runs.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec
from msgspec import structs

from evalgate import reader as json_file
from evalgate.errors import ArtifactError, FormatError, UsageError
from evalgate.evidence.artifacts import HOOK_NAME, META_NAME, RESULT_NAME, read_hook, read_result
from evalgate.evidence.folder import holder
from evalgate.evidence.harness import EVALGATE_DIR, is_results_file
from evalgate.evidence.model import Labels, Result
from evalgate.verify import harness_runs
from evalgate.verify.records import Collection, Found, Note


def read(path: str, reader: Any, notes: Collection) -> Any:
    """`reader(path)`, or None with the reason the file is not usable noted as malformed: a
    reader's error is about that one file, never the end of the sweep."""
    try:
        return reader(path)
    except ArtifactError as exc:
        notes.malformed.append(Note(path, exc.message))
        return None


def result(path: str, notes: Collection) -> Found | None:
    """The run one result.json holds, as verify needs it (None: noted as malformed)."""
    run = read(path, read_result, notes)
    if run is None:
        return None
    return Found(
        path=path,
        source="evalgate",
        model=run.model,
        labels=run.labels,
        scores=tuple(run.scores),
        status=run.status,
        stage=run.stage,
        reason=run.reason + (f" ({run.error.type})" if run.error else ""),
        failed_on_scores=any(not c.passed for c in run.checks),
        verdict=run.verdict,
        early_stop=run.eval.early_stop if run.eval else None,
        holder=holder(os.path.dirname(path)) if run.status == "running" else None,
        task=task_of(run),
    )


def task_of(run: Result) -> str | None:
    """The task a result.json names; one written before results named it (before 0.2.0): its
    eval's task, and with no eval None (GSM8K), as it was read then."""
    if isinstance(run.task, str):
        return run.task
    return run.eval.task if run.eval else None


def lm_eval(path: str, notes: Collection) -> Any:
    """An lm-eval results file's document, or None (noted: unreadable, or not lm-eval's)."""
    doc = read(path, json_file.read, notes)
    if doc is not None and (not isinstance(doc, dict) or "lm_eval_version" not in doc):
        notes.ignored.append(Note(path, f"{path} is not an lm-eval result (no lm_eval_version)"))
        return None
    return doc


def hook(path: str, sibling: Found | None, notes: Collection) -> list[Found]:
    """The runs an `evalgate hook` summary lists as "not run" (an earlier run stopped it),
    labelled like a run found beside it."""
    summary = read(path, read_hook, notes)
    if summary is None:
        return []
    labels = sibling.labels if sibling else Labels()
    model = sibling.model if sibling else None
    return [
        Found(
            path,
            "evalgate",
            model,
            structs.replace(labels, concurrency=run.concurrency),
            (),
            "skipped",
            None,
            run.reason or "not run",
            task=sibling.task if sibling else None,
        )
        for run in summary.runs
        if run.status == "not run"
    ]


def harness_set(meta_path: str, paths: list[str], notes: Collection) -> list[Found]:
    """The runs one meta_env.json and its lm-eval results describe (read now, not before)."""
    files = [(path, doc) for path in paths if (doc := lm_eval(path, notes)) is not None]
    try:
        runs, unusable = harness_runs.runs(meta_path, json_file.read(meta_path), files)
    except ArtifactError as exc:  # the meta_env.json cannot be read
        reason = exc.message
    except FormatError as exc:
        reason = f"{meta_path} {exc}"
    else:
        notes.malformed += unusable
        return runs
    lost = f"; the {len(files)} lm-eval result(s) it describes go unchecked" if files else ""
    notes.malformed.append(Note(meta_path, reason + lost))
    return []


# -- the files under one folder ------------------------------------------------------------------


class Tree(msgspec.Struct):
    """The files under one root that verify reads, in the order walked."""

    results: list[str] = msgspec.field(default_factory=list)
    metas: dict[str, str] = msgspec.field(default_factory=dict)
    """meta_env.json path by folder."""
    candidates: list[str] = msgspec.field(default_factory=list)
    hooks: list[str] = msgspec.field(default_factory=list)


def _list(
    folder: str, tree: Tree, seen: dict[tuple[int, int], str], notes: Collection
) -> list[str]:
    """The folders inside `folder` not met before; the files there that verify reads go to
    `tree`."""
    inside = []
    with os.scandir(folder) as listing:
        for entry in listing:
            name, path = entry.name, entry.path
            try:
                folder_entry = entry.is_dir()  # through a symbolic link too
            except OSError:  # a link into a folder that cannot be read: named below as unreachable
                folder_entry = False
            if folder_entry:
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
            elif is_results_file(name):
                tree.candidates.append(path)
            elif entry.is_symlink() and not os.path.exists(path):
                nowhere = (
                    f"{path} is a symbolic link to {os.readlink(path)}, which cannot be reached"
                )
                notes.ignored.append(Note(path, nowhere + ": not searched"))
    return inside


def walk(root: str, notes: Collection) -> Tree:
    """The files verify reads under the folder root, level by level; a folder that cannot be
    listed is malformed (the root itself: a UsageError), a folder met again or a link to
    nothing is ignored, each with its reason in `notes`."""
    tree = Tree()
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


# -- the runs in one tree ------------------------------------------------------------------------


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


def _harness_runs(root: str, tree: Tree, notes: Collection) -> Iterator[Found]:
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
        elif lm_eval(path, notes) is not None:
            notes.malformed.append(Note(path, _NO_META.format(path=path)))
    for meta, paths in sets.items():
        yield from harness_set(meta, paths, notes)


def _tree_runs(root: str, notes: Collection) -> Iterator[Found]:
    """Every run under the folder root, each as it is read: the harness's eval sets (first:
    what they need to know of the tree is let go before the many results are read), the
    result.json files, then the runs the hook.json files list as not run."""
    tree = walk(root, notes)
    yield from _harness_runs(root, tree, notes)
    hooks = {os.path.dirname(path): path for path in tree.hooks}
    siblings: dict[str, Found] = {}  # a run under each hook's folder, to label its skipped runs
    for path in tree.results:
        run = result(path, notes)
        if run is None:
            continue
        folder = path
        while hooks and folder not in (root, os.path.dirname(folder)):
            folder = os.path.dirname(folder)
            if folder in hooks:
                siblings.setdefault(folder, run)
        yield run
    for folder, path in hooks.items():
        yield from hook(path, siblings.get(folder), notes)


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
        if not os.path.isdir(path) and (name == META_NAME or is_results_file(name)):
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
        elif (item := result(root, notes)) is not None:
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
