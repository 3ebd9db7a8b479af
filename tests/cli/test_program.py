"""`evalgate --help` and every subcommand's `--help`: the first thing a newcomer types."""

from __future__ import annotations

import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from evalgate.cli import SUBCOMMANDS, build_parser, main
from evalgate.errors import ConnectionFailed, ExitCode
from evalgate.probe import preflight
from tests.conftest import (
    EVALGATE,
    ROOT,
    child_env,
    deadline,
    finish,
    load_result,
    modules_loaded_by,
    run_args,
    run_subprocess,
    start_subprocess,
)
from tests.fakeengine import REPO_ROOT, FakeEngine, Fault
from tests.folders import SMALL_RUN
from tests.verify.sweeps import write_result

pytestmark = pytest.mark.loopback


@pytest.mark.parametrize("command", [[], *([name] for name in SUBCOMMANDS)], ids=" ".join)
def test_every_help_exits_0_and_names_the_command(command):
    done = run_subprocess(*command, "--help", timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith(f"usage: evalgate {' '.join(command)}".rstrip())
    assert "exit codes:" in done.stdout
    if not command:
        for name in SUBCOMMANDS:
            assert f"\n    {name}" in done.stdout


def test_the_help_text_keeps_a_literal_percent_sign():
    done = run_subprocess("--help", timeout=60)
    assert "95% Wilson interval" in done.stdout or "95% interval" in done.stdout


def test_no_command_prints_the_help_and_exits_2():
    done = run_subprocess(timeout=60)
    assert done.returncode == 2
    assert "usage: evalgate" in done.stderr


GATE_RUN = ["endpoint", "context and budget", "eval", "gate", "labels", "network and retries"]


HEADINGS = {
    # the groups each command's --help shows, in this order, the everyday ones first
    "run": [*GATE_RUN, "output"],
    "hook": [*GATE_RUN, "output"],
    "context": ["endpoint", "context and budget", "eval", "network and retries", "output"],
    "probe": ["endpoint", "context and budget", "eval", "network and retries", "output"],
    "verify": ["gate", "output", "history"],
    "compare": ["gate", "output"],
    "history": ["gate", "output", "history"],
}


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_commands_help_shows_its_flags_in_groups_then_examples(command):
    done = run_subprocess(command, "--help", timeout=60)
    lines = done.stdout.splitlines()

    headings = [line[:-1] for line in lines if line.endswith(":") and not line.startswith(" ")]
    groups = [h for h in headings if h not in ("options", "positional arguments")]
    assert groups == [*HEADINGS[command], "configuration", "examples", "exit codes"]
    examples = lines[lines.index("examples:") + 1 : lines.index("exit codes:")]
    said = [line for line in examples if line.startswith("  # ")]
    typed = [
        line.strip() for line in examples if f"evalgate {command} " in line and "#" not in line
    ]
    assert 2 <= len(typed) <= 3 and len(said) == len(typed)


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_example_in_a_help_is_a_command_evalgate_reads(command):
    """Each example parses as it is written (its flags are the command's own)."""
    module = importlib.import_module(f"evalgate.cli.{command}")
    for example in module.EXAMPLES.splitlines()[1::2]:
        argv = shlex.split(re.sub(r'^eval "\$\((.*)\)"$', r"\1", example))  # a job script's
        assert argv[:2] == ["evalgate", command]
        parsed = build_parser(argv[1:]).parse_args(argv[1:])
        assert parsed._name == command


def test_the_exit_codes_in_every_help_are_exit_codes_own():
    done = run_subprocess("compare", "--help", timeout=60)
    told = done.stdout.split("exit codes:\n", 1)[1]

    for code in ExitCode:
        first = code.meaning.replace("`", "").split()[:4]
        assert f"  {int(code)}  {' '.join(first)}" in told


# evalgate.cli: arguments in, exit code out; `-v` wherever users type it.


@pytest.mark.parametrize(
    ("argv", "verbose"),
    [
        (["verify", "x"], 0),
        (["-v", "verify", "x"], 1),
        (["verify", "x", "-v"], 1),
        (["verify", "-v", "-v", "x"], 2),
        (["run", "--isl", "1", "-v"], 1),
        (["compare", "a", "b", "--verbose"], 1),
    ],
)
def test_verbose_is_accepted_before_and_after_the_subcommand(argv, verbose):
    assert build_parser(argv).parse_args(argv).verbose == verbose


def test_run_dash_v_after_the_subcommand_shows_the_traceback(tmp_path, capsys):
    """`evalgate run ... -v` was refused as an unrecognized argument (exit 2, no run at all)."""
    code = main(
        [
            "run",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--isl",
            "1024",
            "--osl",
            "1024",
            "--ready-timeout",
            "0.5",
            "--output-dir",
            str(tmp_path / "run"),
            "-v",
        ]
    )
    err = capsys.readouterr().err
    assert "unrecognized arguments" not in err
    assert code == 3  # the endpoint is not there: a readiness error, with its evidence
    assert "NotReadyError: " in err
    assert "Traceback (most recent call last)" in err  # what -v is for
    assert (tmp_path / "run" / "result.json").is_file()


def _escapes(*_: object) -> None:
    raise ConnectionFailed("ConnectionResetError: [Errno 104] Connection reset by peer")


@pytest.mark.parametrize("command", ["run", "context"])
def test_an_engine_failure_that_escapes_its_stage_is_exit_3_naming_it(
    command, tmp_path, capsys, monkeypatch
):
    """Each stage makes its own error of the engine's failures (the probe a ProbeError, the eval
    an EvalFailedError); one that escaped (an evalgate bug, made here) is the endpoint's exit 3
    under its own name, in result.json too. Before the one exception tree: "InternalError ...
    please report it", exit 4 (CHANGELOG.md)."""
    monkeypatch.setattr(preflight, "survey", _escapes)  # what the engines serve: never asked
    url, out = "http://127.0.0.1:9/v1", tmp_path / "run"
    argv = run_args(url, out) if command == "run" else ["context", "--base-url", url]
    code = main([*argv, "--isl", "1024", "--osl", "512"])

    err = capsys.readouterr().err
    assert code == ExitCode.ENDPOINT, err
    assert "ConnectionFailed: ConnectionResetError: [Errno 104] Connection reset by peer" in err
    assert "InternalError" not in err and "please report" not in err
    if command == "run":
        result = load_result(out)
        assert (result["status"], result["exit_code"]) == ("error", 3)


class _Stops:
    def __set_name__(self, owner: type, name: str) -> None:
        raise KeyboardInterrupt("SIGINT")  # as Ctrl-C lands while a class is built


def _interrupted_while_importing(*_: object) -> None:
    class Lands:  # Python 3.11: RuntimeError("Error calling __set_name__ ...") from the interrupt
        field = _Stops()


def test_a_stop_that_lands_in_an_import_is_an_abort(tmp_path, capsys, monkeypatch):
    """A signal that lands while a module is imported (a class built) reaches evalgate wrapped
    in a RuntimeError; it is still an abort, exit 6, for run (in result.json too) and context.
    Before: "unexpected RuntimeError ... please report it", exit 4 (CHANGELOG.md)."""
    monkeypatch.setattr(preflight, "survey", _interrupted_while_importing)
    url, out, lengths = "http://127.0.0.1:9/v1", tmp_path / "run", ["--isl", "1024", "--osl", "512"]
    codes = [main([*run_args(url, out), *lengths]), main(["context", "--base-url", url, *lengths])]

    err = capsys.readouterr().err
    assert codes == [ExitCode.ABORTED] * 2, err
    assert err.count("AbortedError: interrupted") == 2, err
    assert "RuntimeError" not in err and "please report" not in err
    result = load_result(out)
    assert (result["status"], result["exit_code"]) == ("aborted", 6)
    assert result["reason"] == "interrupted by a signal"


_CONSOLE = """
import atexit, sys, threading, time
from evalgate.cli import console
atexit.register(lambda: print("exit handler ran", flush=True))
def late():
    time.sleep(0.3)
    print("non-daemon thread finished", file=sys.stderr, flush=True)
threading.Thread(target=late).start()
sys.argv = ["evalgate", *sys.argv[1:]]
console()
"""


def _console(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CONSOLE, *argv], capture_output=True, text=True, check=False
    )


def test_the_console_exit_keeps_the_code_the_output_the_handlers_and_the_threads():
    done = _console("context", "--isl", "1024", "--osl", "1024", "--served-max-model-len", "4096")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("EVAL_MAX_MODEL_LEN=2304\n")
    assert done.stdout.endswith("exit handler ran\n")  # after main()'s output, before the end
    assert "non-daemon thread finished" in done.stderr  # waited for, as a normal exit does


def test_the_console_exit_keeps_a_failures_code_and_message(tmp_path):
    done = _console("verify", str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert "nowhere" in done.stderr


def test_the_console_exit_delivers_long_output_whole():
    done = _console("--help")
    assert done.returncode == 0
    assert done.stdout.count("\n") > 20 and "exit codes:" in done.stdout


def test_too_few_file_descriptors_are_named_not_blamed_on_the_disk(tmp_path):
    """Under ulimit -n 40 a module's file cannot be opened for reading: 8c36240 said "Cannot
    write .../tqdm/gui.py ... check the disk"."""
    import resource

    from tests.fakeengine import EngineBehaviour, FakeEngine

    def few() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))

    out = tmp_path / "run"
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        argv = run_args(engine.url, out, num_concurrent=64)
        code, _, err = finish(start_subprocess(*argv, preexec_fn=few), 300)

    # where the 41st descriptor is refused (a module read, a connection) varies with timing;
    # the cause is named wherever it is
    assert code == 4, err
    assert "Too many open files" in err, err
    assert "check the disk" not in err and "Cannot write" not in err
    assert "Too many open files" in load_result(out)["reason"]


# Where an address-space limit bites varies from machine to machine and run to run (glibc's
# per-thread arenas, OpenBLAS's thread pool and buffers): a shared library that fails to map
# reaches Python as an ImportError or MemoryError, which evalgate names; OpenBLAS refused memory
# ends the process on its own (it raises SIGINT on itself when a thread cannot start, or exits
# 1), and a library's segfault kills it: no Python code sees either. Each limit is tried until
# one lands in Python.
_LIMITS_KIB = (300_000, 240_000, 270_000, 330_000)
_C_LIBRARY_ENDED = ("OpenBLAS blas_thread_init", "OpenBLAS error: Memory allocation")


def test_a_memory_limit_is_named_not_reported_as_a_bug(tmp_path):
    """Under ulimit -v 300000 (300 MB: enough for evalgate to start, not for lm-eval's data
    stack) a shared library fails to map as the eval loads: main said "unexpected ImportError
    ... please report it" with numpy's page of advice."""
    import resource

    from tests.fakeengine import EngineBehaviour, FakeEngine

    seen: list[str] = []
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        for kib in _LIMITS_KIB:

            def little(kib: int = kib) -> None:
                resource.setrlimit(resource.RLIMIT_AS, (kib * 1024, kib * 1024))

            out = tmp_path / f"run-{kib}"
            argv = run_args(engine.url, out, limit=10)
            code, _, err = finish(start_subprocess(*argv, preexec_fn=little), 300)
            assert "please report" not in err, err
            if code < 0 or (code != 4 and any(words in err for words in _C_LIBRARY_ENDED)):
                seen.append(f"ulimit -v {kib}: exit {code}, ended in a C library:\n{err}")
                continue
            assert code == 4, err
            said = [text for text in err.splitlines() if text.startswith("EvalFailedError")]
            assert len(said) == 1 and len(said[0]) < 800, err
            assert f"ulimit -v: {kib} KiB" in said[0] and "pip check" in said[0]
            result = load_result(out)
            assert (result["status"], result["exit_code"]) == ("error", 4)
            assert f"ulimit -v: {kib} KiB" in result["reason"]
            return
    pytest.fail("no limit tried reached Python:\n" + "\n".join(seen))


def test_context_with_stdout_closed_is_exit_2_not_numbers_written_nowhere():
    """`evalgate context >&-`: its numbers are its product; 8c36240 exited 0 having written
    them nowhere (`>/dev/full` was already exit 2)."""
    argv = ["context", "--isl", "4096", "--osl", "1024", "--served-max-model-len", "8192"]
    code, _, err = finish(start_subprocess(*argv, preexec_fn=lambda: os.close(1)), 120)

    assert code == 2, err
    assert "OutputError: could not write to stdout (the stream is closed); redirect stdout" in err


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["run", "--print-config"], id="run --print-config"),
        pytest.param(["hook", "--print-config"], id="hook --print-config"),
        pytest.param(["--help"], id="--help"),
        pytest.param(["run", "--help"], id="run --help"),
        pytest.param(["--version"], id="--version"),
    ],
)
@pytest.mark.parametrize("stdout", ["closed", "full"])
def test_printed_output_lost_is_exit_2_even_for_run_and_hook(argv, stdout):
    """What --print-config, --help and --version print is their product, whatever the command:
    lost, it is exit 2, and no result.json is claimed to hold a verdict. Before, `run
    --print-config >/dev/full` was exit 0, saying "result.json holds the verdict" (none was
    written), and `--help >&-` was exit 0."""
    with open("/dev/full", "w") as full:
        child = start_subprocess(
            *argv,
            stdout=full if stdout == "full" else None,
            preexec_fn=(lambda: os.close(1)) if stdout == "closed" else None,
        )
        code, _, err = finish(child, 120)

    assert code == 2, err
    assert err.startswith("OutputError: could not write to stdout ("), err
    assert "redirect stdout to a writable file and run again" in err
    assert "result.json" not in err


# The advice fits the mistake: each error said once, on stderr, nothing on stdout.


def test_an_error_is_said_once_on_stderr_with_nothing_on_stdout(tmp_path):
    """It was said twice: `ERROR: ...` on stdout and `NotReadyError: ...` on stderr."""
    with FakeEngine() as engine:
        engine.inject(Fault("error", status=503, paths={"/v1/models"}, message="loading"))
        ran = run_subprocess(*run_args(engine.url, tmp_path / "run", ready_timeout=1))
        hooked = run_subprocess(
            *run_args(engine.url, tmp_path / "hook", ready_timeout=1, command="hook")
        )

    reason = load_result(tmp_path / "run")["reason"]
    assert ran.returncode == 3, ran.stderr
    assert ran.stdout == ""
    assert [line for line in ran.stderr.splitlines() if reason in line] == [
        f"NotReadyError: {reason}"
    ]
    assert hooked.returncode == 3, hooked.stderr
    assert hooked.stdout == ""
    said = [line for line in hooked.stderr.splitlines() if "was not ready after" in line]
    assert len(said) == 1 and said[0].startswith("conc 64: ERROR: "), hooked.stderr


# `evalgate compare`'s module stays light: the comparison and lm-eval load only when it runs.


def test_cli_module_stays_light():
    loaded = modules_loaded_by("import evalgate.cli.compare")
    assert "evalgate.compare.comparison" not in loaded
    assert "lm_eval" not in loaded


# Hostile environments, end to end: signals, closed and full streams, full and read-only disks.


BASH = shutil.which("bash") or "/bin/bash"


def shell(command: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """`evalgate ARGS` started by bash with the redirections in `command` ("$@" is evalgate)."""
    return subprocess.run(
        [BASH, "-c", command, "evalgate", *EVALGATE, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
        cwd=REPO_ROOT,
        check=False,
    )


def test_a_run_with_stderr_closed_still_passes_and_records_it(engine, tmp_path):
    out = tmp_path / "run"
    with deadline(90, engine):
        done = shell('"$@" 2>&-', *run_args(engine.url, out, **SMALL_RUN))

    assert done.returncode == 0, done.stdout
    assert done.stdout.startswith("PASS: ")
    assert load_result(out)["status"] == "pass"


def test_an_error_with_stderr_closed_still_has_its_exit_code_and_result(engine, tmp_path):
    out = tmp_path / "run"
    with deadline(90, engine):
        done = shell(
            '"$@" 2>&-', *run_args(engine.url, out, thresholds=tmp_path / "no", **SMALL_RUN)
        )

    assert done.returncode == 2
    assert "InternalError" not in done.stdout
    assert load_result(out)["stage"] == "thresholds"
    assert engine.log == []


@pytest.mark.parametrize("command", ["verify", "compare", "context"])
def test_other_commands_with_stderr_closed_keep_their_exit_code(tmp_path, command):
    args = {
        "verify": ["verify", str(tmp_path)],
        "compare": ["compare", str(tmp_path / "a"), str(tmp_path / "b")],
        "context": ["context", "--isl", "1024", "--osl", "1024"],
    }[command]
    done = shell('"$@" 2>&-', *args)

    assert done.returncode == {"verify": 1, "compare": 2, "context": 2}[command], done.stdout
    assert "InternalError" not in done.stdout


def test_a_run_with_stdout_on_a_full_device_keeps_the_recorded_verdicts_exit_code(engine, tmp_path):
    out = tmp_path / "run"
    with deadline(90, engine):
        done = shell('"$@" >/dev/full', *run_args(engine.url, out, json="-", **SMALL_RUN))

    doc = load_result(out)
    assert (doc["status"], doc["exit_code"]) == ("pass", 0)
    assert done.returncode == doc["exit_code"], done.stderr
    assert "could not write to stdout (No space left on device)" in done.stderr
    assert "result.json holds the verdict" in done.stderr
    assert "Traceback" not in done.stderr and "please report it" not in done.stderr


def test_a_run_with_stdout_and_stderr_on_a_full_device_keeps_its_exit_code(engine, tmp_path):
    out = tmp_path / "run"
    with deadline(90, engine):
        done = shell('"$@" >/dev/full 2>/dev/full', *run_args(engine.url, out, **SMALL_RUN))

    assert done.returncode == 0
    assert load_result(out)["status"] == "pass"


def test_context_with_stdout_on_a_full_device_is_an_error_not_a_silent_success():
    done = shell(
        '"$@" >/dev/full',
        "context",
        "--isl",
        "1024",
        "--osl",
        "1024",
        "--served-max-model-len",
        "4096",
    )

    assert done.returncode == 2
    assert "could not write to stdout (No space left on device)" in done.stderr
    assert "Traceback" not in done.stderr


def test_verify_into_a_closed_pipe_keeps_its_exit_code(tmp_path):
    done = shell('"$@" | head -c 0', "verify", str(tmp_path))

    assert "Traceback" not in done.stderr
    assert "BrokenPipeError" not in done.stderr


# verify's start-up imports nothing heavy: only its own subcommand's modules.


def test_verify_imports_nothing_heavy(tmp_path):
    write_result(tmp_path / "r")
    script = (
        "import argparse, sys\n"
        "from evalgate.cli import verify as cli_verify\n"
        "parser = argparse.ArgumentParser()\n"
        "cli_verify.add_arguments(parser)\n"
        "code = cli_verify.command(parser.parse_args(sys.argv[1:]))\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'lm_eval', 'datasets', 'torch', 'pandas', 'numpy', 'httpx', 'openai', 'aiohttp'})\n"
        "print('HEAVY', heavy)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout
