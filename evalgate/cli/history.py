"""`evalgate history`: each config's recent runs from a history `verify --record` kept, as a
table, a JSON document or a trend page; its curation (a run or sweep marked bad, a sweep
deleted); a thresholds file fitted from its runs (--fit-thresholds). Also the history's part
of `evalgate verify` (--record, a history as --baseline).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from evalgate import numbers, scrub
from evalgate.rules.floors import POLICIES
from evalgate.templates import line

if TYPE_CHECKING:
    from evalgate.fitted import RecordedRun
    from evalgate.history.look import CompletedRuns, ConfigHistory, HistoryRun
    from evalgate.history.store import Store
    from evalgate.verify.sweep import Report

HELP = (
    "Show the runs a history holds (an SQLite file, or a postgresql:// URL that verify "
    "--record wrote): per config its recent runs, the configs that dropped first; as a "
    "table, a JSON document (--json) or a trend page (--html); mark a run or sweep bad or "
    "delete a sweep; fit a thresholds file from its runs (--fit-thresholds)."
)
RECENT = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("history", metavar="HISTORY", help="an SQLite file or a postgresql:// URL")
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="LABEL=VALUE",
        help="only configs with this label (task, model, hardware, concurrency, ...); repeatable",
    )
    parser.add_argument(
        "--last",
        type=numbers.argument(numbers.whole, 0, numbers.COUNT_MAX),
        default=RECENT,
        metavar="N",
        help=f"runs shown per config in the table (default {RECENT}; 0: all)",
    )
    parser.add_argument(
        "--json", metavar="FILE", help="write every config's runs as one JSON document (-: stdout)"
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="write a trend page: per config its accuracy per sweep with the 95%% interval, "
        "the floor, regressions and fails marked",
    )
    curation = parser.add_mutually_exclusive_group()
    curation.add_argument("--mark-run", metavar="IDENTITY", help="mark one run bad (--reason)")
    curation.add_argument("--mark-sweep", metavar="SWEEP", help="mark a whole sweep bad (--reason)")
    curation.add_argument(
        "--delete-sweep", metavar="SWEEP", help="delete a sweep recorded by mistake (--reason)"
    )
    parser.add_argument(
        "--reason", metavar="TEXT", help="why the run or sweep is marked or deleted"
    )
    parser.add_argument(
        "--by", metavar="NAME", help="who curates (default: $GITHUB_ACTOR, else $USER)"
    )
    parser.add_argument(
        "--fit-thresholds",
        metavar="FILE",
        help="write a thresholds file fitted from the completed runs not marked bad (passing "
        "and failing), with a summary of each floor against the file in use",
    )
    parser.add_argument(
        "--policy",
        choices=POLICIES,
        help="with --fit-thresholds: how a floor is fitted (default beta-binomial: a lower "
        "prediction bound for the next run; ix: the benchmark harness's rule)",
    )
    parser.add_argument(
        "--thresholds",
        metavar="FILE",
        help="with --fit-thresholds: the file in use, carried over and compared with "
        "(default: $EVALGATE_THRESHOLDS, else the one evalgate ships)",
    )


def guard(*locations: str | None) -> None:
    """The history URLs' user info becomes a secret every output is scrubbed of (the command's
    other credentials kept)."""
    from evalgate.settings.environment import credentials_environment

    keys, urls = credentials_environment()
    scrub.configure(keys, [*urls, *(location for location in locations if location)])


def command(args: argparse.Namespace) -> int:
    from evalgate.errors import UsageError
    from evalgate.history import look
    from evalgate.history.store import open_history

    guard(args.history)
    where = look.parse_where(args.where)
    if args.last < 0:
        raise UsageError(f"--last {args.last} is negative; give 0 (all) or more.")
    curating = args.mark_run or args.mark_sweep or args.delete_sweep
    if curating and not args.reason:
        raise UsageError("--reason is required to mark or delete: say why.")
    if args.reason and not curating:
        raise UsageError("--reason goes with --mark-run, --mark-sweep or --delete-sweep.")
    if args.fit_thresholds and (curating or args.json or args.html):
        raise UsageError(
            "--fit-thresholds goes alone: not with curation, --json or --html; run them apart."
        )
    for flag, given in (("--policy", args.policy), ("--thresholds", args.thresholds)):
        if given and not args.fit_thresholds:
            raise UsageError(f"{flag} goes with --fit-thresholds FILE.")
    if args.fit_thresholds:
        return _fit(args, where)
    _check_outputs(args)
    with open_history(args.history, create=False) as store:
        if curating:
            return _curate(store, args)
        found = look.configs(store, where)
        _outputs(store, found, where, args)
    return 0


def _check_outputs(args: argparse.Namespace) -> None:
    """--json and --html checked before the history is read, never written onto the history."""
    from evalgate.evidence.outputs import Output, check_outputs

    given = (("--json", None if args.json == "-" else args.json), ("--html", args.html))
    check_outputs([Output(label, path, False) for label, path in given if path], [args.history])


def _fit(args: argparse.Namespace, where: dict[str, str]) -> int:
    """--fit-thresholds: the floors fitted from the history's completed unmarked runs, written
    whole, with a line per floor; the file in use is read and the output checked first."""
    from pathlib import Path

    from evalgate.evidence.outputs import Output, check_outputs, write_output
    from evalgate.fitted import fit_thresholds, summary
    from evalgate.history import look
    from evalgate.history.store import open_history
    from evalgate.rules.floors import DEFAULT_POLICY
    from evalgate.settings.environment import verify_environment
    from evalgate.thresholds import load_thresholds

    given = args.thresholds or verify_environment().thresholds
    in_use = load_thresholds(Path(given) if given else None)
    output = Output("--fit-thresholds", args.fit_thresholds, False)
    check_outputs([output], [args.history, in_use.path])
    with open_history(args.history, create=False) as store:
        runs = recorded_runs(look.completed_runs(store, where))
    policy = args.policy or DEFAULT_POLICY
    fitted = fit_thresholds(runs, in_use, policy)
    write_output(
        args.fit_thresholds,
        scrub.json_text(fitted.document, indent=2) + "\n",
        label="--fit-thresholds",
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
            args.fit_thresholds,
        )
    )
    return 0


def recorded_runs(found: list[CompletedRuns]) -> list[RecordedRun]:
    """The history's completed runs per config and filter as one RecordedRun per run (its
    filters joined by the run's identity), in the order first seen."""
    from evalgate.fitted import GROUP_LABELS, RecordedRun

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


def _curate(store: Store, args: argparse.Namespace) -> int:
    from evalgate.history import record
    from evalgate.settings.environment import history_environment

    by = args.by or history_environment().who
    if args.delete_sweep:
        done = record.delete_sweep(store, args.delete_sweep, reason=args.reason, by=by)
    else:
        done = record.mark(
            store, run=args.mark_run, sweep=args.mark_sweep, reason=args.reason, by=by
        )
    print(f"{done.action}: {done.target} ({done.runs} run(s)) by {by}: {args.reason}")
    return 0


def _outputs(
    store: Store, found: list[ConfigHistory], where: dict[str, str], args: argparse.Namespace
) -> None:
    import msgspec

    from evalgate.evidence.outputs import write_output
    from evalgate.history import look

    if args.html:
        from evalgate.history import page

        write_output(args.html, page.render(store.location, found, where), label="--html")
    if args.json:
        text = scrub.json_text(msgspec.to_builtins(look.document(store, found, where)), indent=2)
        text += "\n"
        if args.json == "-":
            sys.stdout.write(text)
            return
        write_output(args.json, text, label="--json")
    for row in table(found, args.last or None):
        sys.stdout.write(row + "\n")


def table(found: list[ConfigHistory], last: int | None) -> list[str]:
    """The terminal table: per config its recent runs, the configs that dropped first."""
    from evalgate.history import look

    if not found:
        return ["The history holds no runs yet."]
    lines = []
    for history in found:
        flag = "  DROPPED" if history.dropped else ""
        lines.append(line("{}", f"{history.name} [{history.labels['task']}]{flag}"))
        lines += [line("  {}", _run_line(run)) for run in look.runs_in_order(history, last)]
    dropped = sum(1 for h in found if h.dropped)
    lines.append(f"{len(found)} configs, {dropped} dropped")
    return lines


def _run_line(run: HistoryRun) -> str:
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


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--record",
        metavar="HISTORY",
        help="keep every run gated in a history: an SQLite file (created if absent) or a "
        "postgresql:// URL (the [postgres] extra); default $EVALGATE_HISTORY",
    )
    parser.add_argument(
        "--sweep-id",
        metavar="ID",
        help="with --record: the sweep these runs belong to (default: $GITHUB_RUN_ID, else the "
        "time); several jobs may record their parts under one id",
    )


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
    from evalgate.settings.environment import history_environment

    return given or history_environment().run_id or now()


def record_report(store: Store, report: Report, sweep: str) -> str:
    """Record the report; the last line verify prints, whether or not it was written."""
    from evalgate.errors import EvalgateError
    from evalgate.history import record
    from evalgate.settings.environment import history_environment

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
