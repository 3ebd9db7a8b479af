"""The README is part of the product: its code runs, every command of its first 60 lines as
written from the built wheel; the settings table it links (docs/settings.md) is current."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from evalgate.cli.arguments import settings_table
from evalgate.errors import ExitCode
from evalgate.schemas import validation_errors
from tests.conftest import ROOT, load_result
from tests.fakeengine import EngineBehaviour, FakeEngine

README = (ROOT / "README.md").read_text(encoding="utf-8")


SETTINGS = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")


QUICKSTART = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def section(text: str, title: str) -> str:
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.unit
def test_the_readmes_exit_codes_are_exit_codes_own():
    """Every code and its meaning as evalgate.ExitCode states them, and no other."""
    table = re.search(r"<!-- exit-codes:start -->\n(.*?)<!-- exit-codes:end -->", README, re.S)
    assert table is not None
    rows = [line.split(" | ", 1) for line in table.group(1).splitlines()[2:]]
    written = [(int(code.removeprefix("| ")), meaning.removesuffix(" |")) for code, meaning in rows]
    assert written == [(int(code), code.meaning) for code in ExitCode], (
        "README.md's exit codes differ from evalgate.errors.ExitCode"
    )


@pytest.mark.unit
def test_settings_table_is_generated_from_the_settings_docstrings():
    table = re.search(r"<!-- settings:start -->\n(.*?)<!-- settings:end -->", SETTINGS, re.S)
    assert table is not None
    assert table.group(1) == settings_table(), (
        "docs/settings.md's table is stale: regenerate it from "
        "evalgate.cli.arguments.settings_table()"
    )
    assert "](docs/settings.md)" in README


@pytest.mark.unit
def test_the_two_commands_exist_and_ci_calls_the_test_command():
    commands = re.findall(r"```console\n(.*?)```", section(README, "The two commands"), re.S)
    assert [c.strip() for c in commands] == ["scripts/quickstart", "scripts/test"]
    for command in commands:
        assert (ROOT / command.strip()).stat().st_mode & 0o111
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.loopback
def test_python_quickstart_runs_against_an_engine(tmp_path, monkeypatch):
    (code,) = blocks("python")
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        env = {
            "EVALGATE_BASE_URL": engine.url,
            "EVALGATE_MODEL": "fake-model",
            "EVALGATE_OUTPUT_DIR": str(tmp_path),
            "PATH": "/usr/bin:/bin",
        }
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            cwd=ROOT,
        )
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.strip() == "pass 0 strict-match 1.0000 (95% CI 0.9287-1.0000, n=50), "
        "flexible-extract 1.0000 (95% CI 0.9287-1.0000, n=50) >= threshold 0.9000 (default)"
    )
    load_result(tmp_path)  # valid against the schema


@pytest.mark.unit
@pytest.mark.parametrize("block", [b for b in blocks("json") if '"default"' in b])
def test_thresholds_example_is_valid(block):
    assert validation_errors("thresholds", json.loads(block)) == []


@pytest.mark.unit
def test_the_readme_upload_step_is_the_example_workflows():
    yaml = pytest.importorskip("yaml")
    steps = [step for block in blocks("yaml") for step in yaml.safe_load(block)]
    [step] = [s for s in steps if "upload-artifact" in s["uses"]]
    workflow = yaml.safe_load((ROOT / "examples" / "github-actions-verify.yml").read_text())
    [example] = [
        s for s in workflow["jobs"]["verify-evals"]["steps"] if s.get("uses") == step["uses"]
    ]
    assert step["if"] == example["if"] == "always()"
    assert step["with"]["name"] == example["with"]["name"]
    assert set(step["with"]["path"].split()) <= set(example["with"]["path"].split())
    assert "evalgate-reports/evalgate-report.html" in step["with"]["path"].split()


@pytest.mark.unit
def test_the_quickstart_timing_names_a_date_and_every_phase_the_script_reports():
    script = (ROOT / "scripts" / "quickstart").read_text()
    [phases] = re.findall(r'say "phases: (.*)"', script)
    names = [n.strip() for n in re.findall(r"(?:^|[,;] )([a-z][a-z ]+?) \$", phases)]
    assert names == [
        "engine install",
        "evalgate install",
        "engine start",
        "ready at",
        "incident",
        "fix",
        "eval",
        "verify",
        "default run",
        "changed run",
        "compare",
    ]
    text = " ".join(QUICKSTART.split())
    measured = re.search(r"measured on (\d{4}-\d{2}-\d{2})", text, flags=re.I)
    assert measured is not None, "the quickstart's timing must say when it was measured"
    for name in names:
        assert re.search(rf"{name} \d+(\.\d+)? s", text), f"docs/quickstart.md lacks {name}"


def commands_and_outputs(block: str) -> list[tuple[str, list[str]]]:
    """A console block's `$ command` lines, each with the lines it is shown printing."""
    items: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            items.append((line[2:], []))
        else:
            items[-1][1].append(line)
    return items


def assert_shown(shown: list[str], printed: str) -> None:
    """Each line the README shows was printed, in that order (… stands for any text)."""
    lines = iter(printed.splitlines())
    for want in shown:
        pattern = re.compile(".*".join(map(re.escape, want.split("…"))))
        assert any(pattern.fullmatch(line) for line in lines), f"not printed: {want}\n{printed}"


def expected_code(shown: list[str]) -> int:
    return 1 if any(("FAIL" in line or "REGRESSION" in line) for line in shown) else 0


@pytest.mark.loopback
def test_every_command_of_the_first_60_lines_runs_as_written_from_the_wheel(dist, tmp_path):
    """The install lines in a fresh virtualenv (pip finding evalgate-bench in the built dist,
    the rest on the registry); the hook and the config change against test engines answering
    95% and then 92% right; the Action's step through action.yml (run as
    tests/project/action.py runs it, with `install: false`: it takes the evalgate just installed
    from the wheel)."""
    import yaml

    from evalgate._version import __version__
    from tests.conftest import fresh_venv
    from tests.project.action import run_action

    top = "\n".join(README.splitlines()[:60])
    install, hook, change = re.findall(r"```console\n(.*?)```", top, re.S)
    [step] = yaml.safe_load(re.findall(r"```yaml\n(.*?)```", top, re.S)[0])
    [verify_log] = re.findall(r"```text\n(.*?)```", top, re.S)
    venv = fresh_venv(tmp_path / "venv", dist)
    for command, _ in commands_and_outputs(install):
        done = venv.run(command, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    which = venv.run("command -v evalgate; python -c 'import lm_eval'", cwd=tmp_path)
    assert (which.returncode, which.stdout) == (0, f"{venv.root}/bin/evalgate\n"), which.stderr
    job = tmp_path / "job"
    job.mkdir()

    def shell(command: str, engine: FakeEngine) -> subprocess.CompletedProcess[str]:
        variables = {"MODEL": "fake-model", "ISL": "1024", "OSL": "1024", "CONC": "4 8"}
        venv.env.update(variables | {"ROUTER_URL": engine.url})
        return venv.run(command, cwd=job)

    [(command, shown)] = commands_and_outputs(hook)
    with FakeEngine(EngineBehaviour(max_model_len=4096, accuracy=0.95)) as engine:
        done = shell(command, engine)
    assert done.returncode == 0, done.stderr
    assert_shown(shown, done.stdout)

    shutil.copytree(job / "evals", job / "eval-artifacts")  # what CI downloads: the staged runs
    assert step["uses"].endswith(f"/evalgate@v{__version__}")
    inputs = {name: str(value) for name, value in step["with"].items()}
    action = run_action(inputs | {"install": "false"}, job, venv.env)
    assert (action.exit_code, action.outputs["verdict"]) == (0, "pass"), action.log
    assert_shown(verify_log.splitlines(), action.log)

    accuracies = iter([0.95, 0.92])
    engine = FakeEngine(EngineBehaviour(max_model_len=4096, accuracy=next(accuracies)))
    engine.start()
    try:
        for command, shown in commands_and_outputs(change):
            if "restart the engine" in command:
                engine.stop()
                engine = FakeEngine(EngineBehaviour(max_model_len=4096, accuracy=next(accuracies)))
                engine.start()
            done = shell(command, engine)
            assert done.returncode == expected_code(shown), (command, done.stdout, done.stderr)
            assert_shown(shown, done.stdout)
    finally:
        engine.stop()
