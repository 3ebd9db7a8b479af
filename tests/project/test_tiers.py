"""Every test is in exactly one tier, and a unit test opens no socket and starts no process:
planted tests, run by a pytest of their own under this suite's settings and conftest.py."""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import ROOT, UNIT_ONLY

pytestmark = pytest.mark.loopback


@pytest.fixture
def planted(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """planted(SOURCE, *ARGS): test_planted.py run by pytest with pyproject.toml's settings and
    tests/conftest.py as a plugin; the result, and each test's failure message by name."""
    pytester.makepyprojecttoml((ROOT / "pyproject.toml").read_text())
    monkeypatch.setenv("PYTHONPATH", str(ROOT))

    def run(source: str, *args: str) -> tuple[pytest.RunResult, dict[str, str | None]]:
        pytester.makepyfile(test_planted=textwrap.dedent(source))
        result = pytester.runpytest_subprocess(
            "-p", "tests.conftest", "-p", "no:cacheprovider", "--junitxml=report.xml", *args
        )
        report = pytester.path / "report.xml"
        failures = {}
        if report.exists():
            for case in ET.parse(report).iter("testcase"):  # noqa: S314  # the inner pytest's report
                failure = case.find("failure")
                failures[case.get("name", "")] = None if failure is None else failure.get("message")
        return result, failures

    return run


def test_a_unit_test_opening_a_socket_or_starting_a_process_fails_saying_so(planted):
    result, failures = planted("""
        import asyncio
        import socket
        import subprocess

        import pytest

        @pytest.mark.unit
        def test_opens_a_socket():
            socket.socket()

        @pytest.mark.unit
        def test_connects():
            socket.create_connection(("127.0.0.1", 9), timeout=1)

        @pytest.mark.unit
        def test_starts_true():
            subprocess.run(["true"], check=True)

        @pytest.mark.unit
        def test_runs_an_event_loop():
            assert asyncio.run(asyncio.sleep(0, result=7)) == 7

        @pytest.mark.loopback
        def test_on_loopback_opens_a_socket_and_starts_true():
            with socket.socket() as server:
                server.bind(("127.0.0.1", 0))
            subprocess.run(["true"], check=True)
    """)

    result.assert_outcomes(passed=2, failed=3)
    refused = f"AssertionError: {UNIT_ONLY}"
    assert failures == {
        "test_opens_a_socket": refused,
        "test_connects": refused,
        "test_starts_true": refused,
        "test_runs_an_event_loop": None,
        "test_on_loopback_opens_a_socket_and_starts_true": None,
    }


@pytest.mark.parametrize("workers", ["0", "2"])  # one process, and pytest-xdist's workers
def test_a_test_in_no_tier_or_in_two_is_refused_at_collection_each_named(planted, workers):
    result, _ = planted(
        """
        import pytest

        def test_in_no_tier():
            pass

        @pytest.mark.unit
        @pytest.mark.loopback
        def test_in_two():
            pass

        @pytest.mark.unit
        def test_in_one():
            pass
        """,
        "-m",
        "unit",  # checked before -m leaves test_in_no_tier out
        "-n",
        workers,
    )

    if workers == "0":
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        said = result.stderr.str()
    else:  # a collection error the controller prints; no test ran
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        said = result.stdout.str()
    assert "2 test(s) not in exactly one tier" in said
    assert "test_planted.py::test_in_no_tier: no tier" in said
    assert "test_planted.py::test_in_two: loopback and unit" in said
    assert "test_in_one" not in said
    result.assert_outcomes(errors=int(workers != "0"))  # no test ran; the refusal is the one error
