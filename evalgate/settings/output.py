"""What a command writes and prints (where the evidence goes, the reports, the form of what is
printed), and the history verify records into and `evalgate history` reads."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from evalgate.compare import DEFAULT_FLIPS
from evalgate.numbers import COUNT_MAX
from evalgate.settings.fields import Flag, Group, Texts

Policy = Literal["beta-binomial", "ix"]
"""How `history --fit-thresholds` fits a floor (docs/history.md)."""
POLICIES: tuple[Policy, ...] = ("beta-binomial", "ix")


class OutputSettings(Group):
    """Where the evidence and the reports go, and what is printed."""

    heading = "output"

    output_dir: Path = Path("evalgate-results")
    """Where result.json, samples.jsonl and lm-eval's raw results are written. run, when no
    flag, variable or config file names it: a fresh folder of its own under evalgate-results
    (run-YYYYMMDD-HHMMSS), printed as the run starts; hook: evalgate-results itself."""

    overwrite: bool = False
    """Replace a result already in output_dir (otherwise that is an error); run: only in an
    output_dir named by a flag, variable or config file."""

    resume: bool = False
    """Continue an interrupted run in --output-dir from its journal (hook: each interrupted run
    in the staging folder); only answers from the same engine and protocol are reused. run:
    only in an output_dir named by a flag, variable or config file."""

    layout: Literal["evalgate", "harness"] = "evalgate"
    """`evalgate hook`: evalgate's own folders (conc-<N>/), or the benchmark harness's files in
    output_dir (meta_env.json, results_<ts>_conc<N>.json, samples_gsm8k_<ts>_conc<N>.jsonl)
    with evalgate's own results under evalgate/; harness also decides as the harness's
    validator does, on the point estimate (--min-samples 0), unless --min-samples is given."""

    format: Literal["env", "json", "text"] = "env"
    """context: env (KEY=VALUE lines for eval), json (the full derivation) or text (a readable
    summary)."""

    explain: bool = False
    """context: also print each step and its source (to stderr with --format env)."""

    json_file: Annotated[str | None, Flag("json", metavar="FILE|-")] = None
    """Write the command's document as JSON to FILE, or with - print it on stdout and nothing
    else there: run's result.json, probe's outcome, context's derivation, compare's
    comparison, verify's verdict (verdict.schema.json), history's runs of every config."""

    junit: Annotated[str | None, Flag(metavar="FILE")] = None
    """verify: write JUnit XML, one testcase per config."""

    html: Annotated[str | None, Flag(metavar="FILE")] = None
    """Write a self-contained page. verify: a chart per task of each config's score and 95%
    interval against its threshold, the problems first, then the table; compare: both scores,
    the paired difference and its interval against the margin, the protocol differences and
    every flipped question; history: per config its accuracy per sweep with the 95% interval,
    the floor, regressions and fails marked."""

    markdown: bool = False
    """compare: print the report as Markdown."""

    flips: int = Field(DEFAULT_FLIPS, ge=0, le=COUNT_MAX)
    """compare: list the first N flipped questions per filter (0: none)."""

    github: bool | None = None
    """verify: append a markdown table to $GITHUB_STEP_SUMMARY and print ::error annotations
    (default: on under GitHub Actions)."""

    quiet: Annotated[bool, Flag(short="q")] = False
    """verify: print only the problems and the verdict, not every result."""

    @field_validator("output_dir", mode="before")
    @classmethod
    def _not_blank(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError(
                "an empty folder name would write the evidence into the working directory "
                "itself: pass a folder (the default is evalgate-results), or . for the working "
                "directory"
            )
        return value


class HistorySettings(Group):
    """The history: where verify records, and what `evalgate history` shows, curates and fits."""

    heading = "history"

    record: Annotated[str | None, Flag(metavar="HISTORY")] = None
    """verify: keep every run gated in a history, an SQLite file (created if absent) or a
    postgresql:// URL (the [postgres] extra)."""

    sweep_id: Annotated[str | None, Flag(metavar="ID")] = None
    """verify, with --record: the sweep these runs belong to (default: $GITHUB_RUN_ID, else the
    time); several jobs may record their parts under one id."""

    where: Annotated[Texts, Flag(metavar="LABEL=VALUE")] = Field(default_factory=list)
    """Only configs with this label (task, model, hardware, concurrency, ...); repeatable flag,
    comma-separated in the environment."""

    last: int = Field(10, ge=0, le=COUNT_MAX)
    """Runs shown per config in the table (0: all)."""

    mark_run: Annotated[str | None, Flag(metavar="IDENTITY")] = None
    """Mark one run bad (--reason)."""

    mark_sweep: Annotated[str | None, Flag(metavar="SWEEP")] = None
    """Mark a whole sweep bad (--reason)."""

    delete_sweep: Annotated[str | None, Flag(metavar="SWEEP")] = None
    """Delete a sweep recorded by mistake (--reason)."""

    reason: Annotated[str | None, Flag(metavar="TEXT")] = None
    """Why the run or sweep is marked or deleted."""

    by: Annotated[str | None, Flag(metavar="NAME")] = None
    """Who curates (default: $GITHUB_ACTOR, else $USER)."""

    fit_thresholds: Annotated[str | None, Flag(metavar="FILE")] = None
    """Write a thresholds file fitted from the completed runs not marked bad (passing and
    failing), with a summary of each floor against the file in use."""

    policy: Policy | None = None
    """With --fit-thresholds: how a floor is fitted (default beta-binomial: a lower prediction
    bound for the next run; ix: the benchmark harness's rule)."""
