"""Finding a sweep's eval results on disk and reading each into one shape (the I/O edge of verify).

Two kinds of artifact are found under each path given:

- evalgate's ``result.json`` (checked against result.schema.json);
- the benchmark harness's plain lm-eval output: ``results*.json`` holding ``lm_eval_version``,
  with the run's ``meta_env.json`` in the same folder or the one above it (lm-eval nests its
  output under the model's name); harness_output.py turns each such set into its evals.

An ``evalgate hook`` summary (``hook.json``) adds the concurrencies it lists as "not run" as
skipped runs, labelled like their siblings. Nothing is dropped silently: a file that cannot be
read or breaks its format is a ``Note`` in ``malformed`` (path and reason); a ``results*.json``
that is not lm-eval's is listed as ``ignored``. lm-eval files and meta_env.json inside an
evalgate run's folder are that run's evidence and are not counted twice, nor are the harness's
files that ``evalgate hook --layout harness`` writes beside its own runs (in ``evalgate/``).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec
from msgspec import structs

from evalgate.errors import ArtifactError, UsageError
from evalgate.evidence.artifacts import (
    HOOK_NAME,
    META_NAME,
    RESULT_NAME,
    read_document,
    read_hook,
    read_result,
)
from evalgate.evidence.harness_layout import EVALGATE_DIR, FormatError, is_results_file
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
from evalgate.verify import harness_output, spool
from evalgate.verify.records import Entry, Found, Note

log = logging.getLogger(__name__)


class Collection(msgspec.Struct):
    """Everything found under the paths given."""

    found: list[Found] = msgspec.field(default_factory=list)
    malformed: list[Note] = msgspec.field(default_factory=list)
    ignored: list[Note] = msgspec.field(default_factory=list)
    empty: list[str] = msgspec.field(default_factory=list)
    entries: list[Entry] = msgspec.field(default_factory=list)
    """Runs judged where they were read (collect's `judge`); their keys are not yet told apart
    from other configs' of the same name."""


# -- reading -------------------------------------------------------------------------------------


_PLAIN = (str, int, bool, type(None))
"""A topology's values that can be shared safely (a float's -0.0 would turn into 0.0)."""


_SHARE_FROM = 20_000
"""From this many result.json in a tree on, their repeated values are kept once (_Shared): below
it, the copies cost a few MB and keeping them once costs a tenth of the reading time."""


class _Shared:
    """One copy of each value that repeats from result to result in a sweep: decoded, every
    result would hold its own copies of its labels, task, metric and filter names and of its
    topology, a kilobyte a result (10^5 results: 100 MB)."""

    def __init__(self) -> None:
        self._kept: dict[Any, Any] = {}

    def text(self, text: str) -> str:
        return self._kept.setdefault(text, text)  # type: ignore[no-any-return]

    def value(self, value: Any) -> Any:
        """A label's value: a string or an integer kept once (keyed by type, as 1 == True)."""
        kind = type(value)
        if kind is str:
            return self._kept.setdefault(value, value)
        if kind is int:
            return self._kept.setdefault((int, value), value)
        return value

    def labels(self, labels: dict[str, Any]) -> dict[str, Any]:
        """The labels, their values kept once; a topology is one dict shared by every result
        that has it (nothing writes into labels)."""
        keep = self._kept.setdefault
        for name, value in labels.items():
            kind = type(value)
            if kind is str:  # value() inlined: most labels are strings
                labels[name] = keep(value, value)
            elif kind is dict and all(type(x) in _PLAIN for x in value.values()):
                key = (dict, *((k, type(x), x) for k, x in value.items()))
                kept = self._kept.get(key)
                if kept is None:
                    kept = self._kept[key] = {self.text(k): self.value(x) for k, x in value.items()}
                labels[name] = kept
            else:
                labels[name] = self.value(value)
        return labels

    def found(self, found: Found) -> Found:
        """The run with its repeated values kept once."""
        text = self.text
        scores = tuple(
            structs.replace(
                s,
                task=text(s.task),
                metric=text(s.metric),
                filter=text(s.filter),
                n=self.value(s.n),
            )
            for s in found.scores
        )
        return structs.replace(
            found,
            model=None if found.model is None else text(found.model),
            labels=self.labels(dict(found.labels)),
            scores=scores,
            status=None if found.status is None else text(found.status),
            stage=None if found.stage is None else text(found.stage),
        )


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


def _evalgate(path: str) -> Found | Note:
    """What verify needs of one result.json (checked whole against its schema)."""
    try:
        result = read_result(path, _Run)
    except ArtifactError as exc:
        return Note(path, exc.message)
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
    )


# -- a wide tree: part of it walked and read by a second process ------------------------------

_SPLIT_AT = 2000
"""From this many folders side by side (at the first level of the tree that has as many), a
forked child walks, reads and judges the second half of them while this process does the first
(on a machine with a second core): each folder's results, hooks and harness sets are its own."""
Judge = Callable[[Found], Entry]
"""The verdict on one run, made by the process that read it (verify's gate)."""


def _as_read(found: Found) -> Found:
    return found


class _Sink:
    """Where the runs of a tree of about `results` result.json go: judged at once, when `judge`
    is given, below _SHARE_FROM results (their runs are then let go); else kept for later, their
    repeated values shared (with `shared`) from _SHARE_FROM on."""

    def __init__(self, results: int, judge: Judge | None, shared: _Shared | None) -> None:
        large = results >= _SHARE_FROM
        self.judge = None if large else judge
        self.keep = shared.found if large and shared is not None else _as_read

    def add(self, out: Collection, runs: list[Found]) -> None:
        """Runs already through `keep` into `out`: judged, or as they are."""
        if self.judge is not None:
            out.entries += map(self.judge, runs)
        else:
            out.found += runs


def _frontier(root: str) -> tuple[list[str], _Tree, bool]:
    """The walk of root down to its first level of _SPLIT_AT folders side by side: those folders
    (not yet listed), the files above them, and whether the folders can be split between two
    processes. They cannot if there is no such level (the walk then ends with the folders
    empty), or if a file above them belongs to the folders below (a result.json, meta_env.json
    or hook.json: a run's folder, an eval set's, a hook's): no part of the tree could then be
    judged on its own."""
    above = _Tree()
    level = [root]
    while len(level) < _SPLIT_AT:
        level = _level(level, above)
        if above.results or above.metas or above.hooks or not level:
            return level, above, False
    return level, above, True


def _spool(root: str, folders: list[str], judge: Judge | None, file: Any) -> None:
    """The child's work: scan `folders` and write what it found to the spool file."""
    part = Collection()
    tree = _files(folders)
    _scan_tree(root, tree, part, _Sink(len(tree.results) * 2, judge, None))
    spool.write(file, spool.Part(part.found, part.entries, part.malformed, part.ignored))


def _merge_spool(file: Any, out: Collection, sink: _Sink) -> None:
    """The child's findings, part by part, into `out` (its runs kept as `sink` keeps them)."""
    for part in spool.read(file):
        out.found += map(sink.keep, part.found)  # the child keeps its runs as it read them
        out.entries += part.entries
        out.malformed += part.malformed
        out.ignored += part.ignored


def _scan_split(
    root: str,
    frontier: list[str],
    above: _Tree,
    out: Collection,
    *,
    judge: Judge | None,
    shared: _Shared,
) -> None:
    """Scan a wide tree in two processes: a forked child takes the last half of the frontier's
    folders; this process the first half, with the files above them, and then merges the
    child's findings."""
    cut = len(frontier) // 2
    with tempfile.TemporaryFile() as file:
        child = os.fork()
        if child == 0:  # pragma: no cover (the child's coverage is never written)
            code = 1
            try:
                _spool(root, frontier[cut:], judge, file)
                code = 0
            finally:  # whatever happens, the child ends here, without any parent's clean-up
                os._exit(code)
        try:
            mine = _files(frontier[:cut], above)
            sink = _Sink(len(mine.results) * 2, judge, shared)
            _scan_tree(root, mine, out, sink)
        finally:
            _, status = os.waitpid(child, 0)
        if status == 0:
            _merge_spool(file, out, sink)
            return
    log.debug("the scanning process ended with status %d: scanning its part here", status)
    _scan_tree(root, _files(frontier[cut:]), out, sink)


# -- a harness eval set: its meta_env.json read here, its evals from harness_output.py -------


def _harness_set(meta_path: str, files: list[tuple[str, Any]]) -> list[Found | Note]:
    """The runs one meta_env.json and its lm-eval results describe."""
    try:
        evals, unusable = harness_output.evals(meta_path, read_document(meta_path), files)
    except (ArtifactError, FormatError) as exc:
        lost = f"; the {len(files)} lm-eval result(s) it describes go unchecked" if files else ""
        said = exc.message if isinstance(exc, ArtifactError) else f"{meta_path} {exc}"
        return [Note(meta_path, f"{said}{lost}")]
    items: list[Found | Note] = [Note(path, reason) for path, reason in unusable]
    for run in evals:
        failed = "error" if run.error else None
        stage = "eval" if run.error else None
        items.append(
            Found(run.path, "lm-eval", run.model, run.labels, run.scores, failed, stage, run.error)
        )
    return items


# -- finding -------------------------------------------------------------------------------------


def _within_run(folder: str, root: str, run_dirs: set[str]) -> bool:
    """Whether `folder` is (inside) an evalgate run's output folder, looking no higher than root."""
    while True:
        if folder in run_dirs:
            return True
        parent = os.path.dirname(folder)
        if folder in (root, parent):
            return False
        folder = parent


class _Tree(msgspec.Struct):
    """The files under one root that verify reads."""

    results: list[str] = msgspec.field(default_factory=list)
    metas: dict[str, str] = msgspec.field(default_factory=dict)
    """meta_env.json path by folder."""
    candidates: list[str] = msgspec.field(default_factory=list)
    hooks: list[str] = msgspec.field(default_factory=list)


def _level(folders: list[str], tree: _Tree) -> list[str]:
    """The folders inside `folders`; the files there that verify reads are added to `tree`."""
    inside: list[str] = []
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            raise UsageError(f"Cannot list {folder}: {exc.strerror}.") from exc
        for entry in entries:
            name = entry.name
            if entry.is_dir(follow_symlinks=False):
                inside.append(entry.path)
            elif name == RESULT_NAME:
                tree.results.append(entry.path)
            elif name == META_NAME:
                tree.metas[folder] = entry.path
            elif name == HOOK_NAME:
                tree.hooks.append(entry.path)
            elif is_results_file(name):
                tree.candidates.append(entry.path)
    return inside


def _files(folders: list[str], tree: _Tree | None = None) -> _Tree:
    """The files verify reads anywhere under `folders`, added to `tree`."""
    tree = _Tree() if tree is None else tree
    while folders:
        folders = _level(folders, tree)
    return tree


def _hook(path: str, found: Sequence[Found]) -> list[Found | Note]:
    """The runs an `evalgate hook` summary lists as "not run" (an earlier run stopped it)."""
    try:
        summary = read_hook(path)
    except ArtifactError as exc:
        return [Note(path, exc.message)]
    folder = os.path.dirname(path) + os.sep
    sibling = next((f for f in found if f.path.startswith(folder)), None)
    labels = dict(sibling.labels) if sibling else dict.fromkeys(LABEL_NAMES)
    return [
        Found(
            path,
            "evalgate",
            sibling.model if sibling else None,
            {**labels, "concurrency": run.concurrency},
            (),
            "skipped",
            None,
            run.reason or "not run",
        )
        for run in summary.runs
        if run.status == "not run"
    ]


_MIRROR = (
    "{path} is the benchmark harness's copy of the evalgate runs in evalgate/ beside it "
    "(evalgate hook --layout harness): each run is counted once, from its result.json"
)


def _mirrors_evalgate(folder: str) -> bool:
    """A harness-layout staging folder: its harness files repeat the evalgate runs below it."""
    return os.path.isfile(os.path.join(folder, EVALGATE_DIR, HOOK_NAME))


def _add(out: Collection, item: Found | Note) -> None:
    if isinstance(item, Note):
        out.malformed.append(item)
    else:
        out.found.append(item)


def _scan(root: str, out: Collection, judge: Judge | None, shared: _Shared) -> None:
    """Every run under the folder root; the files that are not usable ones in path order (the
    runs are in the order read: verify sorts its verdict lines, and 10^5 runs let go in the
    order they were made leave the memory they held to the verdict lines that follow)."""
    first = len(out.malformed), len(out.ignored)
    level, above, wide = _frontier(root)
    if wide and hasattr(os, "fork") and (os.cpu_count() or 1) > 1:
        _scan_split(root, level, above, out, judge=judge, shared=shared)
    else:
        tree = _files(level, above)
        _scan_tree(root, tree, out, _Sink(len(tree.results), judge, shared))
    malformed, ignored = first
    out.malformed[malformed:] = sorted(out.malformed[malformed:], key=_by_path)
    out.ignored[ignored:] = sorted(out.ignored[ignored:], key=_by_path)


def _by_path(item: Note) -> str:
    return item.path


def _scan_tree(root: str, tree: _Tree, out: Collection, sink: _Sink) -> None:
    """The runs in `tree` (its results, hooks and harness sets) into `out`, through `sink`."""
    harness = _harness_sets(root, tree)
    runs: list[Found] = []
    for path in tree.results:
        item = _evalgate(path)
        if isinstance(item, Note):
            out.malformed.append(item)
        else:
            runs.append(sink.keep(item))  # kept once now: 10^5 runs read are not held twice
    skipped: list[Found] = []
    for path in tree.hooks:
        for item in _hook(path, runs):
            if isinstance(item, Note):
                out.malformed.append(item)
            else:
                skipped.append(item)
    sink.add(out, runs)
    sink.add(out, skipped)
    sink.add(out, harness.found)
    out.malformed += harness.malformed
    out.ignored += harness.ignored


def _harness_sets(root: str, tree: _Tree) -> Collection:
    """The benchmark harness's eval sets under root (meta_env.json and its lm-eval results)
    outside evalgate's own run folders."""
    out = Collection()
    metas = tree.metas
    run_dirs = {os.path.dirname(path) for path in tree.results}
    mirrors = {meta for folder, meta in metas.items() if _mirrors_evalgate(folder)}
    out.ignored += [Note(meta, _MIRROR.format(path=meta)) for meta in sorted(mirrors)]
    sets: dict[str, list[tuple[str, Any]]] = {
        meta: []
        for folder, meta in metas.items()
        if not _within_run(folder, root, run_dirs) and meta not in mirrors
    }
    for path in tree.candidates:
        folder = os.path.dirname(path)
        if _within_run(folder, root, run_dirs):
            continue  # the lm-eval output an evalgate run keeps as evidence
        if metas.get(folder) in mirrors:
            out.ignored.append(Note(path, _MIRROR.format(path=path)))
            continue
        try:
            doc = read_document(path)
        except ArtifactError as exc:
            out.malformed.append(Note(path, exc.message))
            continue
        if not isinstance(doc, dict) or "lm_eval_version" not in doc:
            out.ignored.append(Note(path, f"{path} is not an lm-eval result (no lm_eval_version)"))
            continue
        meta = metas.get(folder) or metas.get(os.path.dirname(folder))
        if meta is None or meta not in sets:
            out.malformed.append(
                Note(
                    path,
                    (
                        f"{path} is an lm-eval result with no meta_env.json beside it (or one "
                        "folder up): its config is unknown. Stage the run's meta_env.json "
                        "with it."
                    ),
                )
            )
            continue
        sets[meta].append((path, doc))
    for meta, files in sets.items():
        for item in _harness_set(meta, files):
            _add(out, item)
    return out


def _covered(paths: list[str]) -> set[int]:
    """Indexes of paths already searched as (part of) another path given before or around it."""
    full = [os.path.abspath(path) for path in paths]
    return {
        i
        for i, path in enumerate(full)
        for j, other in enumerate(full)
        if i != j and (path.startswith(other + os.sep) or (path == other and j < i))
    }


def collect(paths: Iterable[str], judge: Judge | None = None) -> Collection:
    """Every result under `paths` (folders, searched recursively, or evalgate result files).

    A path inside another one given (or given twice) is searched once. With `judge`, the runs
    of a tree below _SHARE_FROM results are judged by the process that reads them (in
    `entries`, the rest in `found`): a wide tree's second process then judges its part too.
    """
    out = Collection()
    shared = _Shared()
    roots = list(paths)
    skip = _covered(roots) if len(roots) > 1 else set()
    for index, root in enumerate(roots):
        if not os.path.exists(root):
            raise UsageError(
                f"{root} does not exist. Pass the folder the sweep's artifacts were downloaded "
                "to, or an evalgate result.json."
            )
        if index in skip:
            continue
        before = len(out.found) + len(out.entries) + len(out.malformed)
        if os.path.isdir(root):
            _scan(os.path.normpath(root), out, judge, shared)
        elif os.path.basename(root) == META_NAME or is_results_file(os.path.basename(root)):
            raise UsageError(
                f"{root} is part of a benchmark harness eval: pass the folder that holds "
                f"meta_env.json and its lm-eval results, not the file."
            )
        else:
            _add(out, _evalgate(root))
        if len(out.found) + len(out.entries) + len(out.malformed) == before:
            out.empty.append(root)
    return out
