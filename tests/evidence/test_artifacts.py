"""Evidence on disk: never half a result.json, never another run's result buried, nothing lost.

The rules (evalgate/evidence/artifacts.py, RELIABILITY.md):
- every file is written to a temporary file in the same folder, flushed, fsynced and renamed over
  the target: a crash at any point leaves the old file or the new one, never a truncated one;
- a folder that holds a result.json is not written into without --overwrite (or --resume, for a
  run that did not finish): the earlier result stays byte for byte, and the engine is not asked;
- two runs into different folders share nothing;
- a run stopped by Ctrl-C or SIGTERM still writes its result (status aborted) with the answers
  received so far, and --resume sends only the questions not yet answered.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalgate.errors import ArtifactError
from evalgate.evidence import artifacts
from evalgate.evidence.model import Result
from evalgate.gate.runlog import RunLog, build_result, labels
from evalgate.run import run_gate
from evalgate.settings.values import Settings
from tests.conftest import (
    MODEL,
    QUICK,
    child_env,
    deadline,
    json_values,
    load_result,
    run_args,
    run_settings,
    start_subprocess,
    temp_file,
)
from tests.fakeengine import NOT_PROBE, REPO_ROOT, Fault
from tests.folders import SMALL_LIMIT, SMALL_RUN, mount, umount

LIMIT = 10


RUN = {
    "osl": 1024, "limit": LIMIT, "num_concurrent": 2, "ready_timeout": 2,
    "min_samples": 0,  # evidence, not statistics: the point estimate decides
}  # fmt: skip


GATE = {**RUN, "timeout": 5}


"""run_gate's settings: those of the CLI's runs, with a 5 s timeout."""


def a_result(status: str = "error", **fields: Any) -> Result:
    """A result, as a run that stopped at settings would write it (any field replaced as given:
    an invalid value is the test's point where it is one)."""
    result = build_result(
        RunLog(MODEL, labels(Settings(model=MODEL)), "gsm8k"),
        status="error",
        reason="a test document",
        exit_code=4,
    )
    return msgspec.structs.replace(result, status=status, **fields)


def a_document(status: str = "error", **fields: Any) -> str:
    """a_result as the text of a result.json."""
    return json.dumps(msgspec.to_builtins(a_result(status, **fields)))


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != "result.json")


def _fail_fsync(monkeypatch) -> type[BaseException]:
    def fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    return OSError


def _fail_replace(monkeypatch) -> type[BaseException]:
    def replace(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", replace)
    return OSError


def _interrupt_before_rename(monkeypatch) -> type[BaseException]:
    def replace(src: Any, dst: Any) -> None:
        raise KeyboardInterrupt  # SIGINT between the fsync and the rename

    monkeypatch.setattr(os, "replace", replace)
    return KeyboardInterrupt


@pytest.mark.unit
@pytest.mark.parametrize(
    "fail",
    [_fail_fsync, _fail_replace, _interrupt_before_rename],
    ids=["fsync fails", "rename fails", "interrupted before the rename"],
)
def test_a_write_that_fails_leaves_the_old_result_whole(tmp_path, monkeypatch, fail):
    old = a_result(run_id="the-old-run")
    artifacts.write_result(tmp_path, old)
    before = (tmp_path / "result.json").read_bytes()
    raised = fail(monkeypatch)

    with pytest.raises(raised):
        artifacts.write_result(tmp_path, a_result(run_id="the-new-run"))

    monkeypatch.undo()
    assert (tmp_path / "result.json").read_bytes() == before
    assert load_result(tmp_path)["run_id"] == "the-old-run"
    assert leftovers(tmp_path) == []  # the temporary file is gone too


@pytest.mark.unit
def test_a_write_that_breaks_midway_leaves_the_old_result_whole(tmp_path, monkeypatch):
    artifacts.write_result(tmp_path, a_result(run_id="the-old-run"))
    before = (tmp_path / "result.json").read_bytes()
    opened = os.fdopen

    def half_then_full(fd: int, *args: Any, **kwargs: Any) -> Any:
        stream = opened(fd, *args, **kwargs)
        write = stream.write

        def broken(text: str) -> int:
            write(text[: len(text) // 2])
            stream.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

        stream.write = broken
        return stream

    monkeypatch.setattr(artifacts.os, "fdopen", half_then_full)

    with pytest.raises(OSError, match="No space left"):  # after 50 kB went into the temporary file
        artifacts.write_result(tmp_path, a_result(run_id="the-new-run", warnings=["x" * 100_000]))

    assert (tmp_path / "result.json").read_bytes() == before
    assert leftovers(tmp_path) == []


@pytest.mark.unit
def test_a_first_write_that_fails_leaves_no_result_at_all(tmp_path, monkeypatch):
    _fail_replace(monkeypatch)

    with pytest.raises(OSError, match="No space left on device"):
        artifacts.write_result(tmp_path, a_result())

    assert list(tmp_path.iterdir()) == []


@pytest.mark.unit
def test_an_invalid_result_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ArtifactError, match="breaks its own schema"):
        artifacts.write_result(tmp_path, a_result(status="maybe"))

    assert list(tmp_path.iterdir()) == []


WRITER = """
import json, sys
from pathlib import Path
from evalgate.evidence.artifacts import write_result
folder, template = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
n = 0
while True:
    n += 1
    padding = ["x" * 1000] * (n % 7 * 150)  # 0 to 900 kB: some writes take a while
    write_result(folder, template | {"run_id": f"write-{n}", "warnings": padding})
    print(n, flush=True)
"""


@pytest.mark.loopback
@pytest.mark.parametrize("writes", [1, 4, 9])
def test_sigkill_while_writing_never_leaves_a_truncated_result(tmp_path, writes):
    template = tmp_path / "template.json"
    template.write_text(a_document(), encoding="utf-8")
    folder = tmp_path / "out"
    folder.mkdir()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(folder), str(template)],
        cwd=REPO_ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None
        with deadline(30):
            for _ in range(writes):  # each line: one more result.json completely written
                assert writer.stdout.readline().strip()
        writer.kill()  # somewhere inside the next write
    finally:
        writer.kill()
        writer.wait(10)

    doc = load_result(folder)  # parses and validates: never half a file
    assert doc["run_id"] in (f"write-{writes}", f"write-{writes + 1}")
    assert all(
        name.startswith(".result.json.") and name.endswith(".tmp") for name in leftovers(folder)
    )


@pytest.mark.loopback
def test_two_runs_into_different_folders_do_not_interfere(engine, tmp_path):
    """One run in another process, one in this one, at the same time, against one engine."""
    there, here = tmp_path / "there", tmp_path / "here"

    with deadline(90, engine):
        process = start_subprocess(*run_args(engine.url, there, **RUN))
        try:
            local = run_gate(run_settings(engine.url, here, **GATE))
        finally:
            process.communicate(timeout=80)

    assert (process.returncode, local.exit_code) == (0, 0)
    docs = [load_result(folder) for folder in (there, here)]
    assert docs[0]["run_id"] != docs[1]["run_id"]
    for folder, doc in zip((there, here), docs, strict=True):
        assert doc["status"] == "pass"
        assert doc["eval"]["requests"]["completed"] == LIMIT
        assert set(doc["files"].values()) <= {p.name for p in folder.iterdir()}
        samples = (folder / "samples.jsonl").read_text(encoding="utf-8").splitlines()
        assert sorted(json.loads(line)["doc_id"] for line in samples) == list(range(LIMIT))
        journal = (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(journal) == 1 + LIMIT  # its header and its own answers, nobody else's
    assert engine.total == 2 * (1 + LIMIT)  # a probe and LIMIT questions each


@pytest.mark.loopback
def test_an_existing_result_is_never_overwritten_silently(engine, tmp_path, cli):
    out = tmp_path / "run"
    assert cli(*run_args(engine.url, out, **RUN), within=30, engine=engine).code == 0
    first = (out / "result.json").read_bytes()
    files = {p.name: p.read_bytes() for p in out.iterdir()}
    asked = len(engine.log)

    code, _, err = cli(*run_args(engine.url, out, **RUN), within=30, engine=engine)

    assert code == 2
    assert (
        f"ArtifactError: {out / 'result.json'} already holds a result (status pass). Choose "
        "another --output-dir, pass --overwrite to replace it." in err
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == files
    assert (out / "result.json").read_bytes() == first
    assert len(engine.log) == asked  # refused before the engine was asked anything


@pytest.mark.loopback
def test_overwrite_replaces_the_result(engine, tmp_path):
    out = tmp_path / "run"
    with deadline(30, engine):
        first = run_gate(run_settings(engine.url, out, **GATE))
        second = run_gate(run_settings(engine.url, out, **(GATE | {"overwrite": True})))

    assert (first.exit_code, second.exit_code) == (0, 0)
    assert load_result(out)["run_id"] == second.result.run_id != first.result.run_id


@pytest.mark.loopback
@pytest.mark.parametrize(
    "case",
    [
        (a_document(status="pass"), "pass", True, "pass --overwrite to replace it."),
        (a_document(status="fail"), "fail", True, ", or --resume to continue"),
        ('{"status": "pass", "run_id": "cut sho', "unreadable", False, ", or --resume to"),
    ],
    ids=["a pass, even with --resume", "a fail", "a truncated file"],
)
def test_a_folder_with_a_result_is_refused(engine, tmp_path, case):
    content, status, resume, says = case
    out = tmp_path / "run"
    out.mkdir()
    (out / "result.json").write_text(content, encoding="utf-8")

    outcome = run_gate(run_settings(engine.url, out, **GATE), resume=resume)

    assert (outcome.exit_code, outcome.status) == (2, "error")
    assert f"already holds a result (status {status})" in outcome.reason
    assert says in outcome.reason
    assert outcome.result_path is None
    assert (out / "result.json").read_text(encoding="utf-8") == content
    assert engine.log == []


@pytest.mark.loopback
def test_a_folder_with_a_binary_result_is_refused(engine, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "result.json").write_bytes(b"\xff\xfe\x00garbage")

    outcome = run_gate(run_settings(engine.url, out, **GATE))

    assert outcome.exit_code == 2


@pytest.mark.loopback
def test_an_interrupted_run_keeps_its_answers_and_resumes_from_them(engine, tmp_path):
    out = tmp_path / "run"

    def interrupt(done: int, total: int) -> None:
        if done == 4:
            raise KeyboardInterrupt

    with deadline(30, engine):
        stopped = run_gate(
            run_settings(engine.url, out, **(GATE | {"num_concurrent": 1})), progress=interrupt
        )

    doc = load_result(out)
    assert (stopped.exit_code, doc["status"], doc["stage"]) == (6, "aborted", "eval")
    assert doc["reason"] == "interrupted by a signal"
    journal = (out / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    answered = [json.loads(line) for line in journal[1:]]
    assert len(answered) >= 4
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert {s["doc_id"] for s in samples} == {a["doc_id"] for a in answered}
    asked = engine.total

    with deadline(30, engine):
        resumed = run_gate(
            run_settings(engine.url, out, **(GATE | {"num_concurrent": 1})), resume=True
        )

    doc = load_result(out)
    assert (resumed.exit_code, doc["status"]) == (0, "pass")
    assert doc["eval"]["requests"]["resumed"] == len(answered)
    assert engine.total - asked == 1 + LIMIT - len(answered)  # a new probe, then the rest only


@pytest.mark.loopback
def test_sigterm_mid_eval_writes_an_aborted_result(engine, tmp_path, cli):
    """A scheduler's SIGTERM, delivered to this process while `evalgate run` waits on the
    engine: the CLI turns it into an abort that still writes the result."""
    from evalgate.cli.stop import terminate_as_interrupt

    engine.inject(Fault("hang", nth=NOT_PROBE - {2, 3}))  # two answers, then silence
    out = tmp_path / "run"
    sent: list[bool] = []

    def terminate_when_hanging() -> None:
        # only while evalgate's handler is in place: the default one would end pytest
        hanging = engine.wait_until(lambda e: e.hanging >= 2, timeout=30)
        if hanging and signal.getsignal(signal.SIGTERM) is terminate_as_interrupt:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)

    sender = threading.Thread(target=terminate_when_hanging, daemon=True)
    sender.start()
    code, stdout, stderr = cli(
        *run_args(engine.url, out, timeout=60, **RUN), within=60, engine=engine
    )
    sender.join(5)

    assert sent == [True]
    assert code == 6
    assert "AbortedError: interrupted by a signal" in stderr
    assert "stage: eval" in stderr
    assert stdout == ""  # no verdict: the error is said once, on stderr
    doc = load_result(out)
    assert (doc["status"], doc["stage"], doc["exit_code"]) == ("aborted", "eval", 6)
    assert doc["task"] == "gsm8k"
    journal = (out / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(journal) == 1 + 2  # the two answers received are kept
    assert signal.getsignal(signal.SIGTERM) is not terminate_as_interrupt  # restored


@pytest.mark.loopback
def test_a_result_that_cannot_be_written_is_never_a_pass(engine, tmp_path, monkeypatch):
    write_json = artifacts.write_json

    def full_disk(path: Path, document: Any) -> None:
        if path.name == "result.json":
            raise OSError(28, "No space left on device")
        write_json(path, document)

    monkeypatch.setattr(artifacts, "write_json", full_disk)

    with deadline(30, engine):
        outcome = run_gate(run_settings(engine.url, tmp_path / "run", **GATE))

    assert not (tmp_path / "run" / "result.json").exists()
    assert outcome.exit_code != 0


@pytest.mark.loopback
def test_a_killed_overwrite_run_does_not_leave_the_old_pass(engine, tmp_path):
    out = tmp_path / "run"
    with deadline(30, engine):
        assert run_gate(run_settings(engine.url, out, **GATE)).exit_code == 0
    old = load_result(out)["run_id"]

    class Killed(BaseException):
        """The process dies here (SIGKILL, the OOM killer): nothing after it runs."""

    def die(done: int, total: int) -> None:
        if done == 3:
            raise Killed

    with deadline(30, engine), pytest.raises(Killed):
        run_gate(run_settings(engine.url, out, **(GATE | {"overwrite": True})), progress=die)

    doc = load_result(out)
    assert doc["run_id"] != old
    assert (doc["status"], doc["task"]) == ("running", "gsm8k")  # named from the first write on


@pytest.mark.unit
@pytest.mark.parametrize(
    ("content", "says", "compare_says"),
    [
        (None, "Cannot read", "is neither a run folder holding result.json nor a result file"),
        ('{"status": "pass", "run_id": "cut sho', "is not valid JSON (line 1", None),
        ('{"status": "pass"}', "is not a valid evalgate result (result.schema.json): $: ", None),
        (
            a_document(status="great"),
            "is not a valid evalgate result (result.schema.json): $.status",
            None,
        ),
    ],
    ids=["missing", "truncated", "fields missing", "unknown status"],
)
def test_a_bad_result_file_is_a_usage_error(tmp_path, cli, content, says, compare_says):
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    artifacts.write_result(good, a_result(status="pass"))
    if content is not None:
        (bad / "result.json").write_text(content, encoding="utf-8")

    with pytest.raises(ArtifactError) as refused:
        artifacts.read_result(bad / "result.json")
    code, _, err = cli("compare", bad, good)

    assert says in refused.value.message
    assert code == 2
    assert f"ArtifactError: {bad}" in err
    assert (compare_says or says) in err


@pytest.mark.unit
def test_a_binary_result_file_is_a_usage_error(tmp_path):
    (tmp_path / "result.json").write_bytes(b"\xff\xfe\x00garbage")

    with pytest.raises(ArtifactError):
        artifacts.read_result(tmp_path / "result.json")


@pytest.mark.unit
def test_the_temporary_file_lives_beside_the_target(tmp_path, monkeypatch):
    """Same folder, so the rename is atomic (no copy across file systems)."""
    seen: list[tuple[str, str]] = []
    replace = os.replace

    def spy(src: Any, dst: Any) -> None:
        seen.append((str(src), str(dst)))
        replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)

    artifacts.write_result(tmp_path, a_result())

    [(src, dst)] = seen
    assert Path(src).parent == Path(dst).parent == tmp_path
    assert Path(src).name.startswith(".result.json.") and dst.endswith("result.json")


@pytest.mark.unit
def test_a_temp_folder_refused_for_a_moment_is_named_the_open_files_limit(tmp_path, monkeypatch):
    """tempfile says "No usable temporary directory" whatever refused it (dill asks while lm-eval
    loads): when a folder takes a file now, the limit on open files is named, not the disk."""
    from evalgate.evidence import artifacts

    hidden = FileNotFoundError(errno.ENOENT, "No usable temporary directory found in ['/tmp']")
    said = artifacts.os_failure(tmp_path / "run", hidden).message
    assert "Too many open files" in said and "ulimit -n" in said and "check the disk" not in said

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))  # no folder takes one now
    said = artifacts.os_failure(tmp_path / "run", hidden).message
    assert said.startswith(f"Cannot write {tmp_path / 'run'}: No usable temporary directory")
    assert "check the disk" in said


# Hostile environments, end to end: signals, closed and full streams, full and read-only disks.


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Any]:
    """A folder on its own tmpfs of `size` bytes (needs root and mount; else the test skips)."""
    mounted: list[Path] = []

    def make(size: int) -> Path:
        point = tmp_path / f"disk-{size}"
        point.mkdir()
        if not mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)):
            pytest.skip("a small tmpfs needs root and mount(8)")
        mounted.append(point)
        return point

    yield make
    for point in mounted:
        umount(point)


@pytest.mark.loopback
@pytest.mark.parametrize("size", [4, 12, 24, 40, 48], ids=lambda n: f"{n} KiB")
def test_a_full_disk_is_an_error_that_says_what_to_do_never_a_pass(engine, small_disk, cli, size):
    """The disk fills up at whichever write: the first result, the journal, the samples, the
    raw results or the final result. Never a pass, never "please report it"; a result.json that
    is left says what the exit code says."""
    out = small_disk(size * 1024) / "run"
    engine.behaviour.reply_tokens = 400  # long answers: the journal and samples fill the disk
    with deadline(60, engine):
        code, stdout, err = cli(*run_args(engine.url, out, **SMALL_RUN))

    assert code == 4, err
    assert "please report it" not in err and "Traceback" not in err
    assert "No space left on device" in err
    assert "free space or choose another --output-dir" in err
    assert "PASS" not in stdout
    if (out / "result.json").exists():
        doc = load_result(out)
        assert doc["status"] in ("running", "error")
        assert doc["exit_code"] == code
    journal = out / "journal.jsonl"
    assert not journal.exists() or journal.stat().st_size > 0


@pytest.mark.loopback
def test_every_evidence_file_gets_the_same_mode_as_any_file_the_user_creates(engine, tmp_path):
    """A collector running as another user reads them all, or none (the umask decides)."""
    out = tmp_path / "run"
    old = os.umask(0o022)
    try:
        with deadline(60, engine):
            from evalgate.run import run_gate

            given = {"osl": 1024, "limit": SMALL_LIMIT, "min_samples": 0}
            defaults = {"num_concurrent": None, "ready_timeout": None}  # the library's own
            outcome = run_gate(run_settings(engine.url, out, **given, **defaults))
    finally:
        os.umask(old)

    assert outcome.exit_code == 0
    modes = {f.name: oct(f.stat().st_mode & 0o777) for f in out.iterdir()}
    assert set(modes) >= {"result.json", "samples.jsonl", "journal.jsonl", "lm_eval_results.json"}
    assert set(modes.values()) == {oct(0o644)}, modes


# Any text read as a result file is a result or an artifact error.


@QUICK
@given(st.one_of(st.text(max_size=200), json_values.map(json.dumps)))
@pytest.mark.unit
def test_a_result_file_is_a_result_or_an_artifact_error(text):
    path = temp_file(text.encode("utf-8", "surrogatepass"))
    try:
        document = artifacts.read_result(path)
    except ArtifactError as exc:
        assert str(path) in exc.message
        return
    except UnicodeDecodeError:
        return  # tests/evidence/test_artifacts.py: test_a_binary_result_file_is_a_usage_error
    finally:
        path.unlink()
    assert isinstance(document, dict)
