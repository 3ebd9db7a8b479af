"""The package as a user gets it: the wheel and the sdist built from this checkout, the core
installed from the wheel into a fresh virtualenv (`pip install evalgate-bench`, its
dependencies from the registry), and what that install can and cannot do without the eval
extra. The full install (the eval extra) is exercised by tests/project/test_readme.py."""

from __future__ import annotations

import email
import re
import shutil
import subprocess
import tarfile
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from evalgate._version import DISTRIBUTION, EVAL_EXTRA, __version__
from tests.conftest import ROOT, Sweep, Venv, built_once, fresh_venv, load_result, venv_at

pytestmark = pytest.mark.loopback


COMMANDS = ("run", "hook", "verify", "compare", "context", "probe")


EVAL_STACK = ("lm_eval", "datasets", "pyarrow", "torch")


def wheel(dist: Path) -> Path:
    [found] = dist.glob("evalgate_bench-*.whl")
    return found


def sdist(dist: Path) -> Path:
    [found] = dist.glob("evalgate_bench-*.tar.gz")
    return found


@pytest.fixture(scope="module")
def core(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """The core installed from the wheel in a fresh virtualenv, once per test run; the tests
    only run commands in it."""

    def install(folder: Path) -> None:
        venv = fresh_venv(folder / "venv", dist)
        done = venv.run(f"pip install --quiet {DISTRIBUTION}", cwd=folder)
        assert done.returncode == 0, done.stderr
        which = venv.run("command -v evalgate", cwd=venv.root)
        assert which.stdout.strip() == str(venv.root / "bin" / "evalgate")

    return venv_at(built_once(tmp_path_factory, "core", install) / "venv", dist)


def test_the_wheel_and_the_sdist_hold_the_license(dist):
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("MIT License")
    assert "The evalgate authors" in license_text
    with zipfile.ZipFile(wheel(dist)) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(name).decode() == license_text
    with tarfile.open(sdist(dist)) as archive:
        member = archive.extractfile(f"evalgate_bench-{__version__}/LICENSE")
        assert member is not None
        assert member.read().decode() == license_text


def test_the_metadata_a_registry_shows(dist):
    with zipfile.ZipFile(wheel(dist)) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(archive.read(name))
    assert metadata["Name"] == DISTRIBUTION
    assert metadata["Version"] == __version__
    assert metadata["License-Expression"] == "MIT"
    assert metadata["License-File"] == "LICENSE"
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert metadata["Summary"].startswith("Accuracy gate for LLM inference benchmarks")
    assert "gsm8k" in metadata["Keywords"].split(",")
    classifiers = metadata.get_all("Classifier")
    assert "Typing :: Typed" in classifiers
    assert "Topic :: Software Development :: Testing" in classifiers
    assert metadata.get_payload().startswith("# evalgate")
    requires = metadata.get_all("Requires-Dist")
    core = [r for r in requires if "extra ==" not in r]
    eval_extra = [r for r in requires if "extra == 'eval'" in r or 'extra == "eval"' in r]
    assert not [r for r in core if r.startswith(("lm-eval", "datasets", "pyarrow", "torch"))]
    assert any(r.startswith("lm-eval[api]") for r in eval_extra)


def test_the_core_has_no_eval_stack_and_verify_and_compare_pass(
    core: Venv, loopback_sweep: Sweep, tmp_path
):
    for module in EVAL_STACK:
        missing = core.run(f"python -c 'import {module}'", cwd=tmp_path)
        assert missing.returncode == 1
        assert f"No module named '{module}'" in missing.stderr
    runs = loopback_sweep.runs
    verify = core.run(
        f"evalgate verify {runs['pass']} {runs['pass_conc8']} "
        f"--thresholds {loopback_sweep.thresholds} --expect 2",
        cwd=tmp_path,
    )
    print(verify.stdout)
    assert verify.returncode == 0, verify.stderr
    assert "evalgate verify: PASS (exit 0): 2 results for 2 configs: 2 pass" in verify.stdout
    # two runs of 50 questions, every answer the same: equivalent within 10 points (50
    # questions cannot show the default 2-point margin)
    compare = core.run(
        f"evalgate compare {runs['pass']} {runs['pass_conc8']} --max-drop 0.1", cwd=tmp_path
    )
    print(compare.stdout)
    assert compare.returncode == 0, compare.stdout + compare.stderr
    assert compare.stdout.startswith("evalgate compare: EQUIVALENT (exit 0)")


def test_the_wheel_holds_the_report_templates(dist):
    """The pages, JUnit and the job summary are rendered from templates shipped as package data:
    every file under evalgate/templates (git's list) is in the wheel, beside the code."""
    tracked = subprocess.run(
        [shutil.which("git") or "git", "ls-files", "evalgate/templates"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    with zipfile.ZipFile(wheel(dist)) as archive:
        shipped = set(archive.namelist())
    assert {"evalgate/templates/page.html", "evalgate/templates/junit.xml"} <= set(tracked)
    assert set(tracked) <= shipped


def test_the_core_writes_every_report_from_its_templates(
    core: Venv, loopback_sweep: Sweep, tmp_path
):
    runs = loopback_sweep.runs
    reports = tmp_path / "reports"
    verify = core.run(
        f"GITHUB_STEP_SUMMARY={reports / 'summary.md'} evalgate verify {runs['pass']} "
        f"{runs['fail']} --thresholds {loopback_sweep.thresholds} --github "
        f"--junit {reports / 'junit.xml'} --html {reports / 'verify.html'}",
        cwd=tmp_path,
    )
    assert verify.returncode == 1, verify.stdout + verify.stderr
    suites = ET.parse(reports / "junit.xml").getroot()  # noqa: S314  (evalgate's own file)
    assert (suites.get("tests"), suites.get("failures")) == ("2", "1")
    assert (reports / "summary.md").read_text().startswith("### ❌ evalgate verify: FAIL")
    assert "<title>evalgate verify: FAIL</title>" in (reports / "verify.html").read_text()
    compare = core.run(
        f"evalgate compare {runs['pass']} {runs['fail']} --markdown "
        f"--html {reports / 'compare.html'}",
        cwd=tmp_path,
    )
    assert compare.returncode == 1, compare.stdout + compare.stderr
    assert compare.stdout.startswith("## evalgate compare: REGRESSION")
    assert "<title>evalgate compare: REGRESSION</title>" in (reports / "compare.html").read_text()


def test_context_and_probe_run_in_the_core(core: Venv, engine, tmp_path):
    context = core.run(
        "evalgate context --isl 1024 --osl 512 --served-max-model-len 4096 "
        "--task examples/addition/addition_chat.yaml",
        cwd=ROOT,
    )
    assert context.returncode == 0, context.stderr
    assert context.stdout.startswith("EVAL_MAX_MODEL_LEN=1792\nEVAL_MAX_TOKENS=")
    probe = core.run(
        f"evalgate probe --base-url {engine.url} --model fake-model --isl 1024 --osl 512",
        cwd=tmp_path,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.startswith("probe ok: max_tokens ")


@pytest.mark.parametrize("command", ["run", "hook"])
def test_run_and_hook_without_the_extra_exit_2_naming_the_line_that_installs_it(
    core: Venv, command, tmp_path
):
    done = core.run(
        f"evalgate {command} --base-url http://127.0.0.1:9/v1 --model m --output-dir out",
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"UsageError: evalgate {command} needs the eval extra (lm-eval), which this install "
        f"lacks: {EVAL_EXTRA}\n"
    )
    assert EVAL_EXTRA == "pip install 'evalgate-bench[eval]'"
    assert not (tmp_path / "out").exists()


def test_run_gate_without_the_extra_is_a_usage_error_in_its_result(core: Venv, engine, tmp_path):
    code = (
        "import evalgate, json, pathlib\n"
        f"settings = evalgate.Settings(base_url='{engine.url}', model='fake-model', isl=1024, "
        "osl=512, output_dir=pathlib.Path('out'))\n"
        "outcome = evalgate.run_gate(settings)\n"
        "print(outcome.exit_code, outcome.status, outcome.reason)\n"
    )
    (tmp_path / "gate.py").write_text(code)
    done = core.run("python gate.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"2 error a gate run needs the eval extra (lm-eval), which this install lacks: "
        f"{EVAL_EXTRA}\n"
    )
    result = load_result(tmp_path / "out")
    assert (result["status"], result["exit_code"]) == ("error", 2)


def test_help_and_version_of_every_command_work_without_the_extra(core: Venv, tmp_path):
    version = core.run("evalgate --version", cwd=tmp_path)
    assert (version.returncode, version.stdout) == (0, f"evalgate {__version__}\n")
    for command in ("", *COMMANDS):
        done = core.run(f"evalgate {command} --help", cwd=tmp_path)
        assert done.returncode == 0, (command, done.stderr)
        assert done.stdout.startswith("usage: evalgate")
        # a user of the wheel has the README (the registry's page), not the docs/ folder
        assert not re.search(r"docs/|\.md\b", done.stdout), (command, done.stdout)


def test_the_core_requirements_are_the_ones_benchmarks_measured(dist):
    """BENCHMARKS.md's install section records the core's requirements it measured: a change to
    them (a new dependency for the core) must be measured again (scripts/bench --only install)."""
    from benchmarks.bench_install import core_requirements

    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    measured = re.search(r"^- the core's requirements, as measured: (.*)$", text, flags=re.M)
    assert measured is not None
    assert measured.group(1) == ", ".join(core_requirements(wheel(dist))), (
        "the core's requirements changed since BENCHMARKS.md measured its install: run "
        "scripts/bench --only install"
    )


def test_no_file_tells_anyone_to_install_the_registry_evalgate():
    """`evalgate` on the registry is another project's: every install line names ours."""
    files = subprocess.run(
        [shutil.which("git") or "git", "-C", str(ROOT), "ls-files"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    wrong = re.compile(r"pip install (--\S+ )*['\"]?evalgate(?![-\w])")
    found = [
        f"{name}: {match.group(0)}"
        for name in files
        if not name.endswith((".png", ".jsonl", ".csv")) and (ROOT / name).is_file()
        for match in wrong.finditer(
            " ".join((ROOT / name).read_text(encoding="utf-8", errors="replace").split()).replace(
                "never `pip install evalgate`",
                "never that",  # the README's warning
            )
        )
    ]
    assert found == []
