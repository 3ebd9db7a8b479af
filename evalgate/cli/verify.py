"""`evalgate verify`: the CI gate over a whole sweep's downloaded artifacts."""

from __future__ import annotations

import argparse
import itertools
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from evalgate import scrub
from evalgate.cli.history import open_for_verify, record_report
from evalgate.cli.history import sweep_id as sweep_id_of
from evalgate.environment import ci_environment
from evalgate.errors import ArtifactError, UsageError
from evalgate.templates import line

if TYPE_CHECKING:
    from evalgate.history.store import Store
    from evalgate.settings.values import Settings
    from evalgate.verify.baseline import BaselineRequest
    from evalgate.verify.sweep import Report

HELP = (
    "Gate a whole sweep: find every evalgate result.json and harness lm-eval result "
    "(with its meta_env.json) under RESULTS, gate each on its threshold with its 95% interval, "
    "and fail on malformed, errored, missing, duplicate or unexpected results, or none at all."
)
log = logging.getLogger(__name__)


EXAMPLES = """\
# gate a sweep's downloaded artifacts in CI, every report written
evalgate verify eval-artifacts/ --expect expected.json --junit junit.xml --json verdict.json \
--html verdict.html
# also against last week's sweep, question by question, with accepted regressions
evalgate verify eval-artifacts/ --baseline last-week/ --waivers waivers.yaml
# gate against the history's last passing runs, and record this sweep in it
evalgate verify eval-artifacts/ --baseline history.db --record history.db
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="RESULTS",
        help="folders to search (recursively) and/or evalgate result.json files",
    )


def command(args: argparse.Namespace) -> int:
    from evalgate.cli import arguments
    from evalgate.thresholds import load_thresholds
    from evalgate.verify import sweep
    from evalgate.verify.expect import load_expectation

    settings = arguments.settings_from_args(args)
    gate, shown = settings.gate, settings.output
    environment = ci_environment()
    thresholds = load_thresholds(gate.thresholds)
    expectation = load_expectation(gate.expect) if gate.expect is not None else None
    github = shown.github if shown.github is not None else environment.github_actions
    summary = environment.step_summary if github else None
    _check_outputs(args.paths, settings, thresholds.path, summary)
    baseline = _baseline(settings)
    recording, history = _histories(settings)
    if history is not None and baseline is not None:  # named as messages name it: no password
        from msgspec import structs

        baseline = structs.replace(baseline, paths=(history.location,))
    sweep_id = None
    if recording is not None or history is not None:
        sweep_id = sweep_id_of(settings.history.sweep_id)
    try:
        result = sweep.verify(
            list(args.paths), thresholds, expectation=expectation, min_samples=gate.min_samples
        )
        if baseline is not None:
            from evalgate.verify.baseline import judge_against

            rule = sweep.Rule(thresholds, gate.min_samples)
            found = None
            if history is not None:  # paired before recording: the sweep against what came before
                from evalgate.history.look import baseline as history_baseline

                results = [e for e in result.entries if e.source is not None]
                found = history_baseline(history, results, sweep_id)
            result = judge_against(result, rule, baseline, found)
        _write(result, settings, github=github, summary=summary)
        if recording is not None:
            print(record_report(recording, result, str(sweep_id)), file=sys.stderr)
    finally:
        for store in {id(s): s for s in (recording, history) if s is not None}.values():
            store.close()
    return result.exit_code


def _histories(settings: Settings) -> tuple[Store | None, Store | None]:
    """--record and a history given as --baseline, opened now."""
    record, baselines = settings.history.record, settings.gate.baselines
    if not record and not baselines:
        found: tuple[Store | None, Store | None] = (None, None)
    else:
        found = open_for_verify(record, baselines)
    if settings.history.sweep_id is not None and found == (None, None):
        raise UsageError(
            "--sweep-id applies to --record, or to a history given as --baseline: pass the "
            "history too."
        )
    return found


def _check_outputs(
    paths: list[str], settings: Settings, thresholds: str, summary: str | None
) -> None:
    """Every report asked for, checked before any verdict is printed (found after it, a bad
    path would turn a printed PASS into exit 2), against every file verify reads."""
    from evalgate.cli import arguments
    from evalgate.evidence.outputs import Output, check_outputs

    shown, gate = settings.output, settings.gate
    json_file = None if shown.json_file == arguments.STDOUT else shown.json_file
    outputs = [
        Output(label, path, append)
        for label, path, append in (
            ("--junit", shown.junit, False),
            ("--json", json_file, False),
            ("--html", shown.html, False),
            ("GITHUB_STEP_SUMMARY", summary, True),
        )
        if path
    ]
    given = [gate.expect if gate.expect and not gate.expect.strip().isdigit() else None]
    reads = [*paths, *gate.baselines, thresholds, gate.waivers, *given]
    check_outputs(outputs, [path for path in reads if path])


def _baseline(settings: Settings) -> BaselineRequest | None:
    """--baseline, --max-drop and --waivers as one request (the waivers read now: a bad file
    is a usage error before any result is read)."""
    gate = settings.gate
    if not gate.baselines:
        if gate.waivers:
            raise UsageError("--waivers applies to --baseline: pass the baseline sweep too.")
        return None
    from evalgate.verify.baseline import BaselineRequest
    from evalgate.verify.waivers import load_waivers

    waivers = load_waivers(gate.waivers) if gate.waivers else None
    return BaselineRequest(tuple(gate.baselines), gate.max_drop, waivers)


def _write(result: Report, settings: Settings, *, github: bool, summary: str | None) -> None:
    """The verdict on stdout, and in each report asked for; the verdict line last, naming each
    report that could not be written (which leaves the verdict's exit code as it is). With
    --json -, the document alone is on stdout, and the verdict on stderr."""
    from evalgate.cli import arguments
    from evalgate.evidence.model import to_document
    from evalgate.evidence.outputs import write_output
    from evalgate.verify import report
    from evalgate.verify.document import document

    shown = settings.output
    said = sys.stderr if shown.json_file == arguments.STDOUT else sys.stdout
    lines = report.terminal_lines(result, quiet=shown.quiet)
    while chunk := "".join(itertools.islice(lines, 4096)):  # stdout may be unbuffered
        said.write(chunk)
    unwritten: list[str] = []

    def attempt(label: str, path: str, render: Callable[[], str], append: bool = False) -> None:
        try:
            write_output(path, render(), append=append, label=label)
        except ArtifactError as exc:
            print(line("ArtifactError: {}", exc.message), file=sys.stderr)
            unwritten.append(f"{label} {path}")

    if github:
        if summary:
            attempt("GITHUB_STEP_SUMMARY", summary, lambda: report.markdown(result), append=True)
        else:
            log.warning("--github: GITHUB_STEP_SUMMARY is not set, so no job summary is written")
        said.write(report.workflow_commands(result))  # the runner reads both streams
    if shown.junit:
        from evalgate.verify.report import junit

        attempt("--junit", shown.junit, lambda: junit(result))
    if shown.json_file and shown.json_file != arguments.STDOUT:
        attempt(
            "--json",
            shown.json_file,
            lambda: scrub.json_text(to_document(document(result)), indent=2) + "\n",
        )
    if shown.html:
        from evalgate.verify import html

        attempt("--html", shown.html, lambda: html.render(result))
    said.write(report.verdict_line(result, unwritten))
    said.flush()
    if shown.json_file == arguments.STDOUT:
        arguments.put_json(arguments.STDOUT, to_document(document(result)))
        sys.stdout.flush()
