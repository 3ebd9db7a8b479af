"""`evalgate history`: each config's recent runs from a history `verify --record` kept, as a
table, a JSON document or a trend page; its curation (a run or sweep marked bad, a sweep
deleted); a thresholds file fitted from its runs (--fit-thresholds). Also the history's part
of `evalgate verify` (--record, a history as --baseline).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from evalgate import scrub
from evalgate.environment import history_environment
from evalgate.errors import EvalgateError, UsageError
from evalgate.templates import line

if TYPE_CHECKING:
    from evalgate.history.fit import RecordedRun
    from evalgate.history.look import CompletedRuns, ConfigHistory
    from evalgate.history.record import StoredRun
    from evalgate.history.store import Store
    from evalgate.settings.output import HistorySettings, OutputSettings
    from evalgate.verify.sweep import Report

HELP = (
    "Show the runs a history holds (an SQLite file, or a postgresql:// URL that verify "
    "--record wrote): per config its recent runs, the configs that dropped first; as a "
    "table, a JSON document (--json) or a trend page (--html); mark a run or sweep bad or "
    "delete a sweep; fit a thresholds file from its runs (--fit-thresholds)."
)
EXAMPLES = """\
# each config's last runs, the ones that dropped first
evalgate history history.db --where task=gsm8k --last 5
# a sweep recorded by mistake: marked bad, and why
evalgate history history.db --mark-sweep 8123456789 --reason "the router was down"
# fit the floors from the runs kept, beside the file in use
evalgate history history.db --fit-thresholds fitted.json --thresholds thresholds.yaml
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("history", metavar="HISTORY", help="an SQLite file or a postgresql:// URL")


def guard(*locations: str | None) -> None:
    """The history URLs' user info becomes a secret every output is scrubbed of (besides the
    command's other credentials)."""
    for location in locations:
        scrub.add_url(location, "the history's URL")


def command(args: argparse.Namespace) -> int:
    from evalgate.cli import arguments
    from evalgate.history import look
    from evalgate.history.store import open_history

    settings = arguments.settings_from_args(args)
    guard(args.history)
    asked, shown = settings.history, settings.output
    where = look.parse_where(asked.where)
    curating = asked.mark_run or asked.mark_sweep or asked.delete_sweep
    if curating and not asked.reason:
        raise UsageError("--reason is required to mark or delete: say why.")
    if asked.reason and not curating:
        raise UsageError("--reason goes with --mark-run, --mark-sweep or --delete-sweep.")
    if asked.fit_thresholds and (curating or shown.json_file or shown.html):
        raise UsageError(
            "--fit-thresholds goes alone: not with curation, --json or --html; run them apart."
        )
    for flag, given in (("--policy", asked.policy), ("--thresholds", settings.gate.thresholds)):
        if given and not asked.fit_thresholds:
            raise UsageError(f"{flag} goes with --fit-thresholds FILE.")
    if asked.fit_thresholds:
        return _fit(args.history, asked, settings.gate.thresholds, where)
    arguments.check_reports([args.history], shown.json_file, shown.html)
    with open_history(args.history, create=False) as store:
        if curating:
            return _curate(store, asked)
        found = look.configs(store, where)
        _outputs(store, found, where, shown, asked.last)
    return 0


def _fit(
    history: str, asked: HistorySettings, thresholds: Path | None, where: dict[str, str]
) -> int:
    """--fit-thresholds: the floors fitted from the history's completed unmarked runs, written
    whole, with a line per floor; the file in use is read and the output checked first."""
    from evalgate.evidence.outputs import Output, check_outputs, write_output
    from evalgate.history import look
    from evalgate.history.fit import DEFAULT_POLICY, fit_thresholds, summary
    from evalgate.history.store import open_history
    from evalgate.thresholds import load_thresholds

    target = str(asked.fit_thresholds)
    in_use = load_thresholds(thresholds)
    check_outputs([Output("--fit-thresholds", target, False)], [history, in_use.path])
    with open_history(history, create=False) as store:
        runs = recorded_runs(look.completed_runs(store, where))
    policy = asked.policy or DEFAULT_POLICY
    fitted = fit_thresholds(runs, in_use, policy)
    write_output(
        target, scrub.json_text(fitted.document, indent=2) + "\n", label="--fit-thresholds"
    )
    print(
        line(
            "{} completed unmarked run(s) fitted by {} against {}:", len(runs), policy, in_use.path
        )
    )
    for said in summary(fitted):
        print(line("  {}", said))
    print(
        line(
            "wrote {}: review it (docs/history.md) before it replaces the file in use",
            target,
        )
    )
    return 0


def recorded_runs(found: list[CompletedRuns]) -> list[RecordedRun]:
    """The history's completed runs per config and filter as one RecordedRun per run (its
    filters joined by the run's identity), in the order first seen."""
    from evalgate.history.fit import GROUP_LABELS, RecordedRun

    runs: dict[str, tuple[dict[str, object], dict[str, tuple[int, int]]]] = {}
    for config in found:
        for run in config.runs:
            _, scores = runs.setdefault(run.identity, (config.labels, {}))
            scores[config.filter] = (run.correct, run.n)

    def label(labels: dict[str, object], name: str) -> str | None:
        value = labels.get(name)
        return None if value is None or value == "" else str(value)

    return [
        RecordedRun(
            str(labels["task"]),
            scores,
            **{name: label(labels, name) for name in ("model", "model_prefix", *GROUP_LABELS)},
        )
        for labels, scores in runs.values()
    ]


def _curate(store: Store, asked: HistorySettings) -> int:
    from evalgate.history import record

    by = asked.by or history_environment().who
    reason = str(asked.reason)
    if asked.delete_sweep:
        done = record.delete_sweep(store, asked.delete_sweep, reason=reason, by=by)
    else:
        done = record.mark(store, run=asked.mark_run, sweep=asked.mark_sweep, reason=reason, by=by)
    print(f"{done.action}: {done.target} ({done.runs} run(s)) by {by}: {reason}")
    return 0


def _outputs(
    store: Store,
    found: list[ConfigHistory],
    where: dict[str, str],
    shown: OutputSettings,
    last: int,
) -> None:
    import msgspec

    from evalgate.cli import arguments
    from evalgate.evidence.outputs import write_output
    from evalgate.history import look

    json_file = shown.json_file
    if shown.html:
        write_output(shown.html, look.render(store.location, found, where), label="--html")
    if json_file:
        document = look.Document(look.DOCUMENT_SCHEMA, store.location, dict(where), found)
        arguments.put_json(json_file, msgspec.to_builtins(document))
        if json_file == arguments.STDOUT:
            return
    for row in table(found, last or None):
        sys.stdout.write(row + "\n")


def table(found: list[ConfigHistory], last: int | None) -> list[str]:
    """The terminal table: per config its recent runs, the configs that dropped first."""
    if not found:
        return ["The history holds no runs yet."]
    lines = []
    for history in found:
        flag = "  DROPPED" if history.dropped else ""
        lines.append(line("{}", f"{history.name} [{history.labels['task']}]{flag}"))
        runs = history.runs[-last:] if last else history.runs
        lines += [line("  {}", _run_line(run)) for run in runs]
    dropped = sum(1 for h in found if h.dropped)
    lines.append(f"{len(found)} configs, {dropped} dropped")
    return lines


def _run_line(run: StoredRun) -> str:
    score = run.headline
    shown = (
        f"{score.value:.3f} [{score.low:.3f}, {score.high:.3f}] n={score.n} {score.filter}"
        if score is not None
        else "no score"
    )
    floor = f"floor {run.floor:.3f} ({run.floor_matched})" if run.floor is not None else "no floor"
    marked = f"  MARKED BAD by {run.marked.by}: {run.marked.reason}" if run.marked else ""
    return f"{run.sweep:<20} {run.recorded_at}  {shown}  {run.verdict:<12} {floor}{marked}"


# -- the history's part of `evalgate verify` -----------------------------------------------------


def open_for_verify(
    record: str | None, baseline: list[str] | None
) -> tuple[Store | None, Store | None]:
    """(the history to record into, the history to take the baseline from): opened, and
    checked, before any result is read, so that a bad history is exit 2 before any verdict."""
    from evalgate.history.store import is_history, is_url, open_history

    history_baseline = baseline[0] if baseline and len(baseline) == 1 else None
    guard(record, history_baseline if history_baseline and is_url(history_baseline) else None)
    recording = open_history(record, create=True) if record else None
    if history_baseline is not None and not is_history(history_baseline):  # a new file is now one
        history_baseline = None
    if history_baseline is None:
        return recording, None
    if recording is not None and history_baseline == record:
        return recording, recording
    return recording, open_history(history_baseline, create=False)


def sweep_id(given: str | None) -> str:
    from evalgate.history.record import now

    return given or history_environment().run_id or now()


def record_report(store: Store, report: Report, sweep: str) -> str:
    """Record the report; the last line verify prints, whether or not it was written."""
    from evalgate.history import record

    environment = history_environment()
    context = record.Context(sweep, record.now(), environment.image, environment.commit)
    try:
        done = record.record(store, report, context)
    except EvalgateError as exc:
        return (
            f"{type(exc).__name__}: {exc.message} The history was not written; the verdict "
            "above stands."
        )
    already = f" ({done.already} already there)" if done.already else ""
    return f"history: {done.added} run(s) recorded in {store.location} as sweep {sweep}{already}"
