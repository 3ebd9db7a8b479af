"""What `evalgate verify --record` keeps of each run it gated, and the one transaction that keeps
it (docs/history.md, "What `--record` keeps").

A run is kept under its identity (run_identity: by content, never by path), so recording the
same runs again adds nothing, and several CI jobs may each record their part of one sweep under
one sweep id. Its answers are kept per question and filter (right or not, the extracted answer)
beside its result document, so a later verify can pair a sweep with it question by question as
compare does (stored_run).
"""

from __future__ import annotations

import hashlib
import logging
import operator
import zlib
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timezone
from itertools import chain
from pathlib import Path
from typing import Any

import msgspec
from msgspec import structs

from evalgate._version import __version__
from evalgate.compare.runs import Run
from evalgate.errors import ArtifactError, UsageError
from evalgate.evidence.artifacts import RESULT_NAME, SAMPLES_NAME, read_result
from evalgate.evidence.model import Answer, Integer, Result, Sample
from evalgate.evidence.outputs import run_identity
from evalgate.history.store import Store
from evalgate.reader import Written, decode_lines, read_bytes
from evalgate.verify.baseline import load_entry
from evalgate.verify.expect import config_identity, config_key
from evalgate.verify.records import Entry
from evalgate.verify.sweep import Report

log = logging.getLogger(__name__)
UNRECORDED_STATUSES = frozenset({"skipped"})
"""Lines verify gates that are no run (a concurrency an `evalgate hook` never ran)."""


class StoredScore(msgspec.Struct, frozen=True):
    """One filter's score as verify judged it."""

    filter: str
    value: float
    n: int
    low: float
    high: float
    threshold: float
    outcome: str


class Answers(msgspec.Struct, array_like=True, frozen=True):
    """A run's questions in its order, and per filter whether each was right and the answer
    extracted (what compare's lost-question table shows). A question is kept as a digest of its
    text and target: enough to tell the same question from another, at a few bytes a question."""

    doc_ids: list[int]
    digests: list[str]
    repeats: list[int | None]
    clusters: list[int | None]
    correct: dict[str, str]
    """Per filter, one character per question: 1 right, 0 wrong, - not scored."""
    extracted: dict[str, list[str]]


class Mark(msgspec.Struct, frozen=True):
    """A run marked bad (itself, or its sweep): why, by whom, when (curation, below)."""

    reason: str
    by: str
    at: str
    sweep: bool = False
    """Marked with its whole sweep."""


_VALUE = operator.attrgetter("value")


class StoredRun(msgspec.Struct, frozen=True):
    """One run as the history keeps it: a row of `runs` as `--record` writes it (beside its
    config's columns, CONFIG_COLUMNS) and as `history` reads it back (field names are the
    --json document's); its answers are a row of `answers`."""

    identity: str
    sweep: str
    recorded_at: str
    started_at: str | None
    verdict: str
    reason: str
    floor: float | None
    floor_matched: str | None
    floor_file: str | None
    scores: tuple[StoredScore, ...]
    evalgate_version: str
    run_evalgate_version: str | None
    image: str | None
    harness_commit: str | None
    task_version: str | None
    question_order: str | None
    source: str
    path: str
    marked: Mark | None = None
    """Not a column: the curation that marked it, when read back."""

    @property
    def headline(self) -> StoredScore | None:
        """The score the trend follows: the lowest filter's (the one the floor bites first)."""
        return min(self.scores, key=_VALUE, default=None)


CONFIG_COLUMNS = ("config", "name", "task", "model", "labels")
"""The config a run belongs to, in each of its rows: the config as pairing tells configs apart
(task, model and labels) as JSON, its name, task, model, and labels (task and model among
them) as JSON."""
RUN_COLUMNS = tuple(f for f in StoredRun.__struct_fields__ if f != "marked")


def config_of(entry: Entry) -> tuple[str, dict[str, Any]]:
    """(the config's pairing key as JSON, its labels with task and model) for one gated line."""
    task = entry.task or "gsm8k"
    key = msgspec.json.encode(config_identity(entry.model, entry.labels, task)).decode()
    given = structs.asdict(entry.labels) if entry.labels is not None else {}
    labels = {k: v for k, v in given.items() if v is not None}
    return key, {"task": task, "model": entry.model, **labels}


class Digests(dict[tuple[str, str], str]):
    """Each question's digest, worked out once per record call (a sweep asks the same ones)."""

    def __missing__(self, key: tuple[str, str]) -> str:
        text = f"{key[0]}\0{key[1]}".encode("utf-8", "surrogatepass")
        value = self[key] = hashlib.blake2b(text, digest_size=6).hexdigest()
        return value


class Asked(msgspec.Struct, frozen=True):
    """The part of a line of samples.jsonl (evalgate.evidence.model.Sample) the history keeps,
    as it is read from lines not written as evalgate writes them (SAMPLES)."""

    doc_id: Integer
    question: str
    target: str
    filters: dict[str, Answer]
    cluster: Integer | None = None
    repeat: Integer | None = None


SAMPLES = Written(Sample)
"""samples.jsonl's lines as evalgate writes them (every key): read in one typed pass."""
PIECE = 64 * 1024
"""Bytes of samples.jsonl read at a time (a hundred lines or so, cut at a line's end): each
piece's samples become the run's answers and are dropped before the next piece is read, so a
run's thousands of samples are never all alive at once (nor gone over by the collector)."""


class _NotAsWritten(Exception):
    """A piece of samples.jsonl with a key absent or a rule broken (SAMPLES.read says None)."""


def _written(data: bytes) -> Iterator[list[Sample]]:
    """The samples of samples.jsonl as evalgate writes it, a piece at a time."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start + PIECE) + 1 or len(data)
        samples = SAMPLES.read(data[start:end])
        if samples is None:
            raise _NotAsWritten
        yield samples
        start = end


def read_answers(entry: Entry, digests: Digests) -> tuple[Result, Answers]:
    """A scored run's result and its answers (an ArtifactError when they cannot be read)."""
    if entry.source != "evalgate":
        run = load_entry(entry)
        result, answers = run.result, answers_of([list(run.samples.values())], digests)
        where: Path | str = run.path
    else:
        file = Path(str(entry.path))
        file = file / RESULT_NAME if file.is_dir() else file
        result = read_result(file)
        where = file.parent / SAMPLES_NAME
        data = read_bytes(where)
        try:
            answers = answers_of(_written(data), digests)
        except _NotAsWritten:  # a key absent, or a rule broken: read as ever, which says what
            asked = decode_lines(data, Asked, str(where), "is not a valid evalgate sample")
            answers = answers_of([asked], digests)
    if len(set(answers.doc_ids)) != len(answers.doc_ids):
        raise ArtifactError(f"{where} repeats a doc_id.")
    return result, answers


def answers_of(pieces: Iterable[Sequence[Asked | Sample]], digests: Digests) -> Answers:
    """A run's answers from its samples, a piece at a time: per filter, a mark and the answer
    extracted for each question (- and "" where the filter did not score it)."""
    doc_ids: list[int] = []
    questions: list[str] = []
    targets: list[str] = []
    repeats: list[int | None] = []
    clusters: list[int | None] = []
    marks: dict[str, list[str]] = {}
    extracted: dict[str, list[str]] = {}
    for samples in pieces:
        before = len(doc_ids)
        doc_ids += [s.doc_id for s in samples]
        questions += [s.question for s in samples]
        targets += [s.target for s in samples]
        repeats += [s.repeat for s in samples]
        clusters += [s.cluster for s in samples]
        answered = [s.filters for s in samples]
        # every filter so far, and the piece's new ones: each answer looked up once
        for f in dict.fromkeys(chain(marks, chain.from_iterable(answered))):
            found = [a.get(f) for a in answered]
            marks.setdefault(f, ["-"] * before).extend(
                ["-" if a is None else "1" if a.correct else "0" for a in found]
            )
            extracted.setdefault(f, [""] * before).extend(
                ["" if a is None else a.extracted for a in found]
            )
    return Answers(
        doc_ids=doc_ids,
        digests=[digests[pair] for pair in zip(questions, targets, strict=True)],
        repeats=repeats,
        clusters=clusters,
        correct={f: "".join(m) for f, m in marks.items()},
        extracted=extracted,
    )


def _order(doc_ids: list[int]) -> str:
    """The question order's digest: of the ids joined by commas, which is how msgspec writes
    a list of integers between its brackets (in C, not an int at a time)."""
    return hashlib.sha256(msgspec.json.encode(doc_ids)[1:-1]).hexdigest()[:16]


class Context(msgspec.Struct, frozen=True):
    """What a record call says about every run it keeps."""

    sweep: str
    recorded_at: str
    image: str | None = None
    harness_commit: str | None = None


def build(
    entry: Entry, identity_: str, report: Report, context: Context, digests: Digests
) -> tuple[tuple[Any, ...], StoredRun, bytes, bytes]:
    """One gated line (its run's identity given) as the history keeps it: (its config's
    columns, the run, its result document and its answers, compressed)."""
    config, labels = config_of(entry)
    path = str(entry.path)
    result: Result | None = None
    answers = Answers([], [], [], [], {}, {})
    if entry.checks:  # scored: its answers are kept with it
        try:
            result, answers = read_answers(entry, digests)
        except ArtifactError as exc:  # its score is still history; pairing will say so
            log.warning("history: %s is recorded without its answers: %s", path, exc.message)
    if result is None:
        result = _result(entry)
    version = result.eval.task_version if result is not None and result.eval else None
    scores = msgspec.convert(entry.checks, tuple[StoredScore, ...], from_attributes=True)
    run = StoredRun(
        identity=identity_,
        started_at=(result.started_at or None) if result is not None else None,
        verdict=entry.outcome,
        reason=entry.reason,
        floor=entry.checks[0].threshold if entry.checks else None,
        floor_matched=entry.checks[0].matched if entry.checks else None,
        floor_file=report.thresholds_file,
        scores=scores,
        evalgate_version=__version__,
        run_evalgate_version=(result.evalgate_version or None) if result is not None else None,
        task_version=version if isinstance(version, str) else None,
        question_order=_order(answers.doc_ids) if answers.doc_ids else None,
        source=str(entry.source),
        path=path,
        **structs.asdict(context),  # its sweep, time, image and harness commit
    )
    name = config_key(entry.model, entry.labels)
    columns = (config, name, labels["task"], entry.model, msgspec.json.encode(labels).decode())
    document = msgspec.json.encode(result)  # null for a run with no result
    return (
        columns,
        run,
        zlib.compress(document, 1),
        zlib.compress(msgspec.json.encode(answers), 1),
    )


def _result(entry: Entry) -> Result | None:
    """An evalgate run that never evaluated: its result all the same (None for lm-eval's)."""
    if entry.source != "evalgate":
        return None
    try:
        file = Path(str(entry.path))
        return read_result(file / RESULT_NAME if file.is_dir() else file)
    except ArtifactError:
        return None


class Recorded(msgspec.Struct, frozen=True):
    """What one record call did: runs added, runs the history already held."""

    sweep: str
    added: int
    already: int


def record(store: Store, report: Report, context: Context) -> Recorded:
    """Every run `report` gated, kept in one transaction: all of them or, on any error, none.
    The runs are read before the transaction, so other recorders wait only for the writes."""
    digests = Digests()
    entries = [
        e
        for e in report.entries
        if e.source is not None and e.path and e.status not in UNRECORDED_STATUSES
    ]
    identities = [run_identity(str(e.path)) for e in entries]
    known = _known(store, identities)
    rows = [
        build(e, i, report, context, digests)
        for e, i in zip(entries, identities, strict=True)
        if i not in known
    ]
    runs = [
        (*columns, *(_column(getattr(run, name)) for name in RUN_COLUMNS))
        for columns, run, _, _ in rows
    ]
    names = (*CONFIG_COLUMNS, *RUN_COLUMNS)
    marks = ", ".join("?" for _ in names)
    with store.transaction(f"record sweep {context.sweep}") as cursor:
        store.executemany(
            cursor,
            f"INSERT INTO runs ({', '.join(names)}) VALUES ({marks}) "  # noqa: S608  # our names
            "ON CONFLICT (identity) DO NOTHING",
            runs,
        )
        added = max(cursor.rowcount, 0)  # the rows inserted: another recorder's are not counted
        store.executemany(
            cursor,
            "INSERT INTO answers (identity, result, questions) VALUES (?, ?, ?) "
            "ON CONFLICT (identity) DO NOTHING",
            [(run.identity, result, answers) for _, run, result, answers in rows],
        )
    return Recorded(context.sweep, added, len(entries) - added)


def _column(value: Any) -> Any:
    """A run's field as its column holds it: the scores as JSON."""
    return msgspec.json.encode(value).decode() if isinstance(value, tuple) else value


def _known(store: Store, identities: Sequence[str]) -> set[str]:
    """The identities the history already holds: their runs are not read again."""
    found: set[str] = set()
    for start in range(0, len(identities), 500):
        chunk = identities[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        statement = f"SELECT identity FROM runs WHERE identity IN ({marks})"  # noqa: S608
        found.update(str(row[0]) for row in store.query(statement, chunk))
    return found


def now() -> str:
    """The time as the history writes it: UTC, to the second, sortable as text."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- a stored run as compare's Run ---------------------------------------------------------------


def _samples(answers: Answers) -> list[Sample]:
    found = []
    for index, doc_id in enumerate(answers.doc_ids):
        filters = {
            f: Answer(extracted=answers.extracted[f][index], correct=marks[index] == "1")
            for f, marks in answers.correct.items()
            if marks[index] != "-"
        }
        found.append(
            Sample(
                doc_id=doc_id,
                prompt_sha256="",
                response=None,
                finish_reason=None,
                error=None,
                question=answers.digests[index],
                target="",
                filters=filters,
                cluster=answers.clusters[index],
                repeat=answers.repeats[index],
            )
        )
    return found


def stored_run(store: Store, run_identity_: str, label: str) -> Run:
    """A recorded run read back as compare's Run (its questions as digests); `label` names it."""
    rows = store.query("SELECT result, questions FROM answers WHERE identity = ?", (run_identity_,))
    if not rows:
        raise ArtifactError(f"{label}: the history holds no answers for run {run_identity_}.")
    result = msgspec.json.decode(zlib.decompress(bytes(rows[0][0])), type=Result | None)
    answers = msgspec.json.decode(zlib.decompress(bytes(rows[0][1])), type=Answers)
    if result is None or result.eval is None:
        raise ArtifactError(f"{label}: run {run_identity_} has no answers to pair.")
    return Run(Path(label), result, result.eval, {s.doc_id: s for s in _samples(answers)})


def digested(run: Run) -> Run:
    """A run from files with its questions as the history keeps them, to pair with a stored
    run: the same question gives the same digest on both sides."""
    digests = Digests()
    samples = {
        doc_id: structs.replace(s, question=digests[(s.question, s.target)], target="")
        for doc_id, s in run.samples.items()
    }
    return structs.replace(run, samples=samples)


# -- curation ------------------------------------------------------------------------------------


class Curated(msgspec.Struct, frozen=True):
    """What one curation did: the action, what it named, how many runs it touched."""

    action: str
    target: str
    runs: int


def _runs_of(store: Store, cursor: Any, column: str, value: str) -> int:
    cursor.execute(store.sql(f"SELECT count(*) FROM runs WHERE {column} = ?"), (value,))  # noqa: S608  # column is ours
    return int(cursor.fetchone()[0])


def mark(
    store: Store, *, run: str | None = None, sweep: str | None = None, reason: str, by: str
) -> Curated:
    """Mark one run (by its identity, or an unambiguous start of it) or a whole sweep bad: kept
    and shown, left out of baselines and fits. A UsageError names what matches nothing."""
    if not reason.strip():
        raise UsageError("--reason is empty: say why the run or sweep is bad.")
    with store.transaction("mark a run or sweep bad") as cursor:
        if run is not None:
            first = "SELECT identity FROM runs WHERE identity >= ? ORDER BY identity LIMIT 2"
            cursor.execute(store.sql(first), (run,))
            found = [str(r[0]) for r in cursor.fetchall() if str(r[0]).startswith(run)]
            if found and found[0] == run:  # the whole identity, even if it starts another
                found = found[:1]
            if len(found) != 1:
                what = "no run" if not found else "more than one run"
                raise UsageError(
                    f"--mark-run {run}: {what} in {store.location} has that identity. Pass a "
                    "run's identity as `evalgate history HISTORY --json -` gives it."
                )
            target, column, count = found[0], "identity", 1
        else:
            target, column = str(sweep), "sweep"
            count = _runs_of(store, cursor, "sweep", target)
            if not count:
                raise UsageError(f"--mark-sweep {target}: {store.location} holds no such sweep.")
        cursor.execute(
            store.sql(
                f"INSERT INTO curation (action, {column}, reason, by_whom, at) "  # noqa: S608
                "VALUES ('mark', ?, ?, ?, ?)"
            ),
            (target, reason, by, now()),
        )
    return Curated("marked bad", target, count)


def delete_sweep(store: Store, sweep: str, *, reason: str, by: str) -> Curated:
    """Delete a sweep recorded by mistake: its runs and answers go, the deletion is kept (who,
    when, why, how many runs)."""
    if not reason.strip():
        raise UsageError("--reason is empty: say why the sweep is deleted.")
    with store.transaction(f"delete sweep {sweep}") as cursor:
        count = _runs_of(store, cursor, "sweep", sweep)
        if not count:
            raise UsageError(f"--delete-sweep {sweep}: {store.location} holds no such sweep.")
        cursor.execute(
            store.sql(
                "DELETE FROM answers WHERE identity IN (SELECT identity FROM runs WHERE sweep = ?)"
            ),
            (sweep,),
        )
        cursor.execute(store.sql("DELETE FROM runs WHERE sweep = ?"), (sweep,))
        cursor.execute(
            store.sql(
                "INSERT INTO curation (action, sweep, reason, by_whom, at) "
                "VALUES ('delete', ?, ?, ?, ?)"
            ),
            (sweep, f"{reason} ({count} runs)", by, now()),
        )
    return Curated("deleted", sweep, count)
