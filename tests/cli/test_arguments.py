"""The habits users bring, through the CLI in its own process: a mistyped flag and lm-eval's and
vLLM's spellings get evalgate's flag under the command's usage line; one --json rule (FILE, or
- for stdout alone) for every command; verify's --baseline one value each, in any place; each
error said once."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from evalgate.schemas import validation_errors
from tests.conftest import ROOT, deadline, load_result, run_args, run_subprocess
from tests.verify.sweeps import answers, baseline_answers, evalgate_sweep, thresholds

pytestmark = pytest.mark.loopback


MISTAKES = [
    (["run", "--limt", "20"], "--limt is not a flag of evalgate run: did you mean --limit?"),
    (["verify", "--qiet", "x"], "--qiet is not a flag of evalgate verify: did you mean --quiet?"),
    (["run", "--tasks", "gsm8k"], "--tasks is lm-eval's flag: evalgate's is --task, one task"),
    (["run", "--output_path", "o"], "--output_path is lm-eval's flag: evalgate's is --output-dir"),
    (
        ["hook", "--num_concurrent", "8"],
        "--num_concurrent is lm-eval's spelling (a --model_args key): evalgate's flag is "
        "--num-concurrent.",
    ),
    (
        [
            "run",
            "--model_args",
            "base_url=http://u:pw-9x@127.0.0.1:8000/v1/chat/completions,model=m,"
            "num_concurrent=8,tokenized_requests=False",
        ],
        "--model_args is lm-eval's flag: evalgate takes each key as a flag of its own: --base-url "
        "http://127.0.0.1:8000/v1 --model m --num-concurrent 8 (tokenized_requests: evalgate "
        "sets it itself).",
    ),
    (
        ["run", "--max-model-len", "4096"],
        "--max-model-len is vLLM's flag: evalgate has two, --served-max-model-len (the "
        "--max-model-len the engine serves",
    ),
    (["context", "--max_model_len", "4096"], "and --eval-max-model-len (the context the eval"),
    (["probe", "--base_url", "http://x/v1"], "did you mean --base-url? (evalgate's flags are"),
    (
        ["verify", "--limit", "5", "sweep"],
        "--limit is a flag of evalgate run, context, probe and hook, not of evalgate verify",
    ),
    (["run", "--version"], "--version goes before the command: evalgate --version."),
]


@pytest.mark.parametrize(("argv", "said"), MISTAKES, ids=[" ".join(a[:2]) for a, _ in MISTAKES])
def test_a_flag_the_command_does_not_take_gets_evalgates_flag_under_its_usage(argv, said, tmp_path):
    done = run_subprocess(*argv, cwd=tmp_path, timeout=60)

    assert done.returncode == 2
    assert done.stdout == ""
    usage, error = done.stderr.splitlines()  # one line and the usage line, not the whole help
    assert usage == f"usage: evalgate {argv[0]} [options]" + (
        " RESULTS [RESULTS ...]" if argv[0] == "verify" else ""
    )
    assert error.startswith(f"evalgate {argv[0]}: error: ")
    assert said in error
    assert "pw-9x" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["run", "--api", "foo"], "argument --api: invalid choice: 'foo'"),
        (["history", "h.db", "--last", "x"], "argument --last:"),
        (["compare", "a"], "the following arguments are required: candidate"),
        (["context", "--isl", "abc"], "UsageError: Invalid settings: --isl = 'abc'"),
        (["probe", "--timeout", "-1"], "UsageError: Invalid settings: --timeout = -1.0"),
        (["verify", "r", "--max-drop", "2"], "UsageError: --max-drop 2.0 is not a fraction"),
    ],
)
def test_a_bad_value_prints_one_line_under_the_commands_usage_line(argv, said, tmp_path):
    done = run_subprocess(*argv, cwd=tmp_path, timeout=60)

    assert done.returncode == 2
    usage, error = done.stderr.splitlines()
    assert usage.startswith(f"usage: evalgate {argv[0]} [options]")
    assert said in error


def test_lm_evals_fraction_for_limit_gets_the_count_to_give(tmp_path):
    done = run_subprocess("run", "--limit", "0.1", cwd=tmp_path, timeout=60)

    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "usage: evalgate run [options]",
        "UsageError: Invalid settings: --limit = '0.1' (set by --limit or EVALGATE_LIMIT or "
        "EVAL_LIMIT): a number of questions, not a fraction as lm-eval's --limit takes: for 10% "
        "of GSM8K's 1,319 questions, give --limit 132.",
    ]


@pytest.fixture
def sweeps(tmp_path: Path) -> dict[str, Path]:
    """Two sweeps of two configs: B lost 80 of A's right answers at conc 8 (a regression)."""
    a = evalgate_sweep(tmp_path / "A", "a", {4: baseline_answers(), 8: baseline_answers()})
    b = evalgate_sweep(tmp_path / "B", "b", {4: answers(seed=1), 8: answers(seed=2, lost=80)})
    return {"A": a, "B": b, "thresholds": thresholds(tmp_path)}


BARE = [
    ["run", "--json"],
    ["run", "--json", "--model", "m"],
    ["probe", "--json", "--isl", "1k"],
    ["context", "--json"],
    ["compare", "a", "b", "--json"],
    ["verify", "sweep", "--json", "--quiet"],
    ["history", "h.db", "--json"],
]


@pytest.mark.parametrize("argv", BARE, ids=" ".join)
def test_a_bare_json_is_refused_saying_use_json_dash(argv, tmp_path):
    done = run_subprocess(*argv, cwd=tmp_path, timeout=60)

    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines()[-1] == (
        f"evalgate {argv[0]}: error: argument --json: expected one argument: --json takes where "
        "the document goes: use --json - to print it on stdout, or --json FILE to write it."
    )
    assert list(tmp_path.iterdir()) == []


def test_json_before_two_operands_says_it_took_the_first_as_its_file(tmp_path):
    done = run_subprocess("compare", "--json", "runs/a", "runs/b", cwd=tmp_path, timeout=60)

    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "evalgate compare: error: the following arguments are required: candidate (--json takes "
        "a value: it took 'runs/a' as the file to write; to print the document on stdout, use "
        "--json -)"
    )


def test_verify_json_dash_prints_the_document_alone_and_the_verdict_on_stderr(sweeps):
    root = sweeps["A"].parent
    args = ["verify", "B", "--baseline", "A", "--thresholds", "thresholds.json", "--github"]
    done = run_subprocess(*args, "--json", "-", cwd=root, env={"GITHUB_STEP_SUMMARY": ""})

    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)  # stdout is the document and nothing else
    assert validation_errors("verdict", document) == []
    assert (document["verdict"], document["counts"]["regression"]) == ("fail", 1)
    lines = done.stderr.splitlines()
    assert lines[-1] == (
        "evalgate verify: FAIL (exit 1): 2 results for 2 configs: 1 pass, 1 regression; against "
        "the baseline: 1 equivalent"
    )  # the regression counted once: it is the config's outcome
    assert any(line.startswith("::error ") for line in lines)  # the runner reads stderr too
    assert not (root / "-").exists()  # it wrote a file named - before


def test_verify_json_file_writes_the_document_and_prints_the_verdict_on_stdout(sweeps):
    root = sweeps["A"].parent
    args = ["verify", "B", "--thresholds", "thresholds.json", "--no-github", "--json", "v.json"]
    done = run_subprocess(*args, cwd=root, timeout=60)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        "evalgate verify: PASS (exit 0): 2 results for 2 configs: 2 pass"
    )
    assert done.stderr == ""
    assert json.loads((root / "v.json").read_text())["verdict"] == "pass"


def test_compare_json_dash_or_file_writes_the_comparison(sweeps):
    root = sweeps["A"].parent
    runs = ("A/a-conc8", "B/b-conc8")
    printed = run_subprocess("compare", *runs, "--json", "-", cwd=root, timeout=60)
    written = run_subprocess("compare", *runs, "--json", "c.json", cwd=root, timeout=60)

    assert printed.returncode == written.returncode == 1
    document = json.loads(printed.stdout)
    assert validation_errors("comparison", document) == []
    assert json.loads((root / "c.json").read_text()) == document
    assert written.stdout.startswith("evalgate compare: REGRESSION (exit 1)")


def test_context_json_dash_or_file_writes_the_derivation(tmp_path):
    argv = ["context", "--isl", "2048", "--osl", "1024", "--served-max-model-len", "8192"]
    printed = run_subprocess(*argv, "--json", "-", cwd=tmp_path, timeout=60)
    written = run_subprocess(*argv, "--json", "c.json", cwd=tmp_path, timeout=60)

    assert printed.returncode == written.returncode == 0, printed.stderr
    document = json.loads(printed.stdout)
    assert document["eval_max_model_len"] == 2048 + 1024 + 256
    assert json.loads((tmp_path / "c.json").read_text()) == document
    assert written.stdout.startswith("EVAL_MAX_MODEL_LEN=")  # --format env, as without --json
    refused = run_subprocess(*argv, "--json", "-", "--format", "text", cwd=tmp_path, timeout=60)
    assert refused.returncode == 2
    assert "--json - and --format text both print on stdout" in refused.stderr


def test_history_json_dash_prints_the_document_alone(sweeps):
    root = sweeps["A"].parent
    recorded = run_subprocess(
        "verify", "A", "--thresholds", "thresholds.json", "--no-github", "--record", "h.db",
        cwd=root, timeout=60,
    )  # fmt: skip
    assert recorded.returncode == 0, recorded.stderr
    with sqlite3.connect(root / "h.db") as connection:
        assert connection.execute("SELECT count(*) FROM runs").fetchone() == (2,)

    done = run_subprocess("history", "h.db", "--json", "-", cwd=root, timeout=60)

    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["configs"]) == 2


def test_run_and_probe_json_dash_print_their_document_alone_and_file_writes_it(engine, tmp_path):
    few = ["--limit", "8", "--min-samples", "0"]
    with deadline(120, engine):
        printed = run_subprocess(*run_args(engine.url, tmp_path / "r1", *few, "--json", "-"))
        written = run_subprocess(
            *run_args(engine.url, tmp_path / "r2", *few, "--json", str(tmp_path / "r2.json"))
        )
        probe = run_subprocess("probe", *run_args(engine.url, tmp_path)[1:9], "--json", "-")

    assert printed.returncode == written.returncode == probe.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == load_result(tmp_path / "r1")  # stdout: the document
    assert json.loads((tmp_path / "r2.json").read_text()) == load_result(tmp_path / "r2")
    assert written.stdout.startswith("PASS: ")  # the verdict line, as without --json
    assert json.loads(probe.stdout)["outcome"] == "ok"


def test_an_error_is_said_once_and_json_dash_keeps_stdout_the_document(tmp_path):
    argv = ["run", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--isl", "1024"]
    argv += ["--osl", "512", "--ready-timeout", "1", "--output-dir", str(tmp_path / "r")]
    plain = run_subprocess(*argv, timeout=60)
    printed = run_subprocess(*argv, "--overwrite", "--json", "-", timeout=60)

    assert plain.returncode == printed.returncode == 3
    assert plain.stdout == ""
    said = [line for line in plain.stderr.splitlines() if "was not ready" in line]
    assert len(said) == 1 and said[0].startswith("NotReadyError: ")
    document = json.loads(printed.stdout)
    assert document["error"]["type"] == "NotReadyError"
    assert sum("was not ready" in line for line in printed.stderr.splitlines()) == 1


def test_no_stderr_line_repeats_the_verdict_line(sweeps):
    root = sweeps["A"].parent
    verified = run_subprocess(
        "verify", "B", "--baseline", "A", "--thresholds", "thresholds.json", "--github",
        cwd=root, env={"GITHUB_STEP_SUMMARY": ""}, timeout=60,
    )  # fmt: skip
    compared = run_subprocess("compare", "A/a-conc8", "B/b-conc8", cwd=root, timeout=60)

    for done in (verified, compared):
        assert done.returncode == 1
        assert not set(done.stdout.splitlines()) & set(done.stderr.splitlines()) - {""}


def test_verify_baseline_takes_one_value_so_the_next_word_is_the_results(sweeps):
    root = sweeps["A"].parent
    flags = ["--thresholds", "thresholds.json", "--no-github", "--json", "-"]
    before = run_subprocess("verify", "--baseline", "A", "B", *flags, cwd=root, timeout=60)
    after = run_subprocess("verify", "B", *flags, "--baseline", "A", cwd=root, timeout=60)

    assert before.returncode == after.returncode == 1, before.stderr
    for done in (before, after):
        document = json.loads(done.stdout)
        assert (document["paths"], document["baseline"]["paths"]) == (["B"], ["A"])
        assert document["counts"]["regression"] == 1


def test_verify_baseline_repeated_takes_each_sweep(sweeps):
    root = sweeps["A"].parent
    evalgate_sweep(root / "C", "c", {16: baseline_answers()})
    done = run_subprocess(
        "verify", "B", "--baseline", "A", "--baseline", "C", "--thresholds", "thresholds.json",
        "--no-github", "--json", "-", cwd=root, timeout=60,
    )  # fmt: skip

    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["baseline"]["paths"] == ["A", "C"]


def test_the_old_two_values_after_baseline_are_refused_naming_the_new_spelling(sweeps):
    root = sweeps["A"].parent
    evalgate_sweep(root / "C", "c", {16: baseline_answers()})
    done = run_subprocess("verify", "B", "--baseline", "A", "C", cwd=root, timeout=60)

    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "usage: evalgate verify [options] RESULTS [RESULTS ...]",
        "evalgate verify: error: unrecognized arguments: C: --baseline takes one value each; "
        "for two, write --baseline A --baseline C, and give the results together.",
    ]


# Each setting's range is in --help and in docs/settings.md.


def test_the_ranges_are_in_the_help_and_the_settings_page():
    readme = (ROOT / "docs" / "settings.md").read_text()
    done = run_subprocess("run", "--help")

    assert "(range: 1 to 32,767)" in " ".join(done.stdout.split())
    assert "Range: 1 to 127." in readme
