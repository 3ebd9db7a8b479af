"""The advice fits the mistake: each common mistake through the CLI in its own process, and what
it is told (a refused key, a misspelt thresholds key, a run compared with the run before it),
each error said once.

The engines are the fake one (tests/fakeengine.py), behind a front door (tests/front.py) that
asks for an API key where a gateway in front of an engine would.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import error_lines, load_result, run_args, run_subprocess, thresholds_json
from tests.fakeengine import GENERATION_PATHS, FakeEngine, Fault
from tests.front import Answer, Front, Handler

pytestmark = pytest.mark.loopback

KEY = "sk-gate-7Qm2Vx9Lp4"
ADVICE = (
    "The server refused the credentials: pass the API key it expects with --api-key, or set "
    "EVALGATE_API_KEY or OPENAI_API_KEY."
)
LENGTH_ADVICE = "Serve a larger --max-model-len"
NOT_PROBE = frozenset(range(2, 100_000))
"""`Fault.nth` that spares the first generation request: the pre-flight probe."""


def keyed(status: int) -> Answer:
    """Forward a request that carries KEY; answer any other `status` with vLLM's body for a
    missing key (its --api-key middleware: `{"error": "Unauthorized"}`)."""

    def answer(handler: Handler) -> None:
        if handler.headers.get("Authorization") == f"Bearer {KEY}":
            handler.forward(handler.path)
        else:
            handler.send(status, json.dumps({"error": "Unauthorized"}).encode())

    return answer


def gateway(engine: FakeEngine, status: int, paths: tuple[str, ...]) -> Front:
    return Front(engine.root_url, dict.fromkeys(paths, keyed(status)))


# -- a refused key: --api-key and its variables, whichever request was refused ---------------------


def test_generation_refused_without_a_key_names_the_key_not_the_length(tmp_path):
    """The models are listed without a key; generation answers 401. The probe said "Serve a
    larger --max-model-len, or lower the budget with --max-tokens"."""
    with FakeEngine() as engine, gateway(engine, 401, GENERATION_PATHS) as front:
        probed = run_subprocess(*run_args(front.url, command="probe"))
        ran = run_subprocess(*run_args(front.url, tmp_path / "run"))
        keyed_probe = run_subprocess(*run_args(front.url, api_key=KEY, command="probe"))

    assert probed.returncode == 3, probed.stderr
    [line] = error_lines(probed.stderr, "ProbeError")
    assert line == (
        "ProbeError: The engine rejected the pre-flight request (HTTP 401: Unauthorized). " + ADVICE
    )
    assert ran.returncode == 3, ran.stderr
    assert error_lines(ran.stderr, "ProbeError") == [line]
    assert LENGTH_ADVICE not in probed.stderr + ran.stderr
    assert load_result(tmp_path / "run")["reason"] == line.removeprefix("ProbeError: ")
    assert keyed_probe.returncode == 0, keyed_probe.stderr  # the advice taken, the probe passes
    assert keyed_probe.stdout.startswith("probe ok: ")


def test_discovery_refused_names_the_key_and_its_variables_work(tmp_path):
    """/v1/models answers 403 without the key: the model list is refused, so readiness is."""
    with FakeEngine() as engine, gateway(engine, 403, ("/v1/models",)) as front:
        context = run_subprocess(*run_args(front.url, command="context"))
        ran = run_subprocess(*run_args(front.url, tmp_path / "run"))
        by_variable = {
            name: run_subprocess(*run_args(front.url, command="probe"), env={name: KEY})
            for name in ("EVALGATE_API_KEY", "OPENAI_API_KEY")
        }

    expected = f"EndpointError: {front.url}/models answered HTTP 403: Unauthorized. {ADVICE}"
    assert context.returncode == 3, context.stderr
    assert error_lines(context.stderr, "EndpointError") == [expected]
    assert ran.returncode == 3, ran.stderr
    assert error_lines(ran.stderr, "EndpointError") == [expected]
    assert load_result(tmp_path / "run")["stage"] == "readiness"
    for name, done in by_variable.items():
        assert done.returncode == 0, (name, done.stderr)


def test_a_key_refused_during_the_eval_names_the_key_not_the_prompt(tmp_path):
    """The probe passed; the engine then answers 401 (a key revoked mid-run). The eval said
    "the probe passed, so the prompt is unusual"."""
    with FakeEngine() as engine:
        engine.inject(Fault("error", status=401, nth=NOT_PROBE, message="Unauthorized"))
        ran = run_subprocess(*run_args(engine.url, tmp_path / "run", limit=10))

    assert ran.returncode == 4, ran.stderr
    [line] = error_lines(ran.stderr, "EvalFailedError")
    assert line.startswith("EvalFailedError: The engine rejected question ")
    assert line.endswith(ADVICE)
    assert "the prompt is unusual" not in line


def test_a_worker_that_refuses_the_key_names_it(tmp_path):
    with (
        FakeEngine() as engine,
        FakeEngine() as worker,
        gateway(worker, 401, ("/v1/models",)) as door,
    ):
        done = run_subprocess(*run_args(engine.url, worker_url=door.url, command="context"))

    assert done.returncode == 3, done.stderr
    [line] = error_lines(done.stderr, "EndpointError")
    assert line == (
        f"EndpointError: Worker {door.url} did not answer /v1/models (HTTP 401: Unauthorized). "
        + ADVICE
    )


def test_tokenize_refusing_the_key_is_said_before_the_estimate_it_leads_to():
    """/tokenize was passed over as absent: the context then came from an estimate, and its
    error said to raise ISL/OSL with no word of the key."""
    with FakeEngine() as engine, gateway(engine, 401, ("/tokenize",)) as front:
        done = run_subprocess(*run_args(front.url, command="context"))

    lines = done.stderr.splitlines()
    warned = [i for i, line in enumerate(lines) if line.startswith("/tokenize of ")]
    assert [lines[i] for i in warned] == [
        f"/tokenize of {front.root_url} answered HTTP 401: Unauthorized: prompt lengths "
        f"estimated. {ADVICE}"
    ], done.stderr
    # 1,519 tokens measured would fit the context of 1,792; estimated, the longest prompt does not
    assert done.returncode == 2, done.stderr
    [error] = [i for i, line in enumerate(lines) if line.startswith("ContextError: ")]
    assert "(estimate: " in lines[error] and warned[0] < error


# -- a thresholds key one or two edits from a task -------------------------------------------------


@pytest.mark.parametrize(
    ("where", "entry", "key", "how"),
    [
        ("models", {"fake-model": {"gsm8K": 0.97}}, "gsm8K", "only in case"),
        ("models", {"fake-model": {"gsm8": 0.97}}, "gsm8", "by 1 edit(s), case aside"),
        (
            "overrides",
            [{"match": {"hardware": "b200"}, "thresholds": {"GSM8k ": 0.97}}],
            "GSM8k ",
            "by 1 edit(s), case aside",
        ),
    ],
)
def test_a_misspelt_task_key_is_refused_naming_the_task_it_means(tmp_path, where, entry, key, how):
    """It was read as a floor for no task: the run fell back to the 0.90 default and passed."""
    path = thresholds_json(tmp_path, {"default": {"gsm8k": 0.9}, where: entry})
    with FakeEngine() as engine:
        done = run_subprocess(
            *run_args(engine.url, tmp_path / "run", limit=10, min_samples=0),
            *("--thresholds", str(path), "--hardware", "b200"),
        )
        sent = engine.total

    assert done.returncode == 2, done.stderr
    [line] = error_lines(done.stderr, "ThresholdsError")
    inside = "$.models.fake-model" if where == "models" else "$.overrides[0].thresholds"
    assert line.startswith(
        f"ThresholdsError: {path}: {inside}.{key} names no known task, but differs from the "
        f"task 'gsm8k' {how}: "
    ), line
    assert f'Rename the key "gsm8k"; or, if {json.dumps(key)} is a task of its own' in line
    assert sent == 0  # refused before the endpoint was asked anything
    assert load_result(tmp_path / "run")["stage"] == "thresholds"


@pytest.mark.parametrize(
    ("data", "floor", "matched"),
    [
        (
            {"default": {"gsm8k": 0.5}, "models": {"fake-model": {"mmlu": 0.7, "gsm8k": 0.6}}},
            0.6,
            "model:fake-model",
        ),
        (
            {"default": {"gsm8k": 0.5, "gsm8": 0.7}, "models": {"fake-model": {"gsm8": 0.8}}},
            0.5,
            "default",
        ),
    ],
    ids=["a key far from every task", "a near key that default names: a task of its own"],
)
def test_a_key_that_is_no_misspelling_is_kept(tmp_path, data, floor, matched):
    path = thresholds_json(tmp_path, data)
    with FakeEngine() as engine:
        done = run_subprocess(
            *run_args(engine.url, tmp_path / "run", limit=10, min_samples=0),
            "--thresholds",
            str(path),
        )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].endswith(f">= threshold {floor:.4f} ({matched})")


def test_verify_knows_the_tasks_of_the_results_it_gates(tmp_path):
    """A key two edits from a result's task (and far from every built-in task) is a misspelling
    of that task; nothing is written when it is refused."""
    run = tmp_path / "sweep" / "run"
    with FakeEngine() as engine:
        done = run_subprocess(*run_args(engine.url, run, limit=10, min_samples=0))
    assert done.returncode == 0, done.stderr
    [task] = {score["task"] for score in load_result(run)["scores"]}
    assert task == "gsm8k_evalgate_chat"
    misspelt = thresholds_json(
        tmp_path, {"default": {"gsm8k": 0.9}, "models": {"fake-model": {"gsm8k_evalgate_caht": 1}}}
    )
    report = tmp_path / "verdict.json"
    refused = run_subprocess(
        "verify", str(tmp_path / "sweep"), "--thresholds", str(misspelt), "--min-samples", "0",
        "--no-github", "--json", str(report),
    )  # fmt: skip
    spelt = thresholds_json(
        tmp_path, {"default": {"gsm8k": 0.9}, "models": {"fake-model": {task: 1}}}
    )
    kept = run_subprocess(
        "verify", str(tmp_path / "sweep"), "--thresholds", str(spelt), "--min-samples", "0",
        "--no-github",
    )  # fmt: skip

    assert refused.returncode == 2, refused.stdout + refused.stderr
    [line] = error_lines(refused.stderr, "ThresholdsError")
    assert (
        f"$.models.fake-model.gsm8k_evalgate_caht names no known task, but differs from the task "
        f"'{task}' by 2 edit(s), case aside" in line
    )
    assert refused.stdout == "" and not report.exists()
    assert kept.returncode == 0, kept.stdout + kept.stderr  # 1.0 of 10 right: at its floor


# -- the floor on the last line, and run --baseline just after a run -------------------------------


@pytest.mark.parametrize(
    ("data", "matched"),
    [
        ({"default": {"gsm8k": 0.5}}, "default"),
        ({"default": {"gsm8k": 0.5}, "models": {"fake-model": {"gsm8k": 0.6}}}, "model:fake-model"),
        (
            {
                "default": {"gsm8k": 0.5},
                "models": {"fake-model": {"gsm8k": 0.6}},
                "overrides": [{"match": {"hardware": "b200"}, "thresholds": {"gsm8k": 0.7}}],
            },
            "override[0]:hardware=b200",
        ),
    ],
    ids=["the default", "the model's entry", "an override"],
)
def test_the_last_line_names_the_floor_and_its_entry(tmp_path, data, matched):
    path = thresholds_json(tmp_path, data)
    with FakeEngine() as engine:
        done = run_subprocess(
            *run_args(engine.url, tmp_path / "run", limit=10, min_samples=0),
            "--thresholds", str(path), "--hardware", "b200",
        )  # fmt: skip

    result = load_result(tmp_path / "run")
    assert done.returncode == 0, done.stderr
    assert result["threshold"]["matched"] == matched
    floor = result["threshold"]["value"]
    assert done.stdout.splitlines()[-1].endswith(f">= threshold {floor:.4f} ({matched})")


def test_run_baseline_just_after_a_run_warns_of_no_status_and_records_the_final_one(tmp_path):
    """The run compared itself before its verdict, while its own result said "running": "the
    candidate run ended with status running: its samples may be incomplete"."""
    first, second = tmp_path / "kv" / "auto", tmp_path / "kv" / "fp8"
    flags = ("--limit", "20", "--min-samples", "0")
    with FakeEngine() as engine:
        before = run_subprocess(*run_args(engine.url, first, *flags))
        done = run_subprocess(*run_args(engine.url, second, *flags, baseline=first))

    assert before.returncode == 0, before.stderr
    result = load_result(second)
    assert done.returncode == result["exit_code"] == 5, done.stderr  # 20 questions: too few
    assert "ended with status" not in done.stdout + done.stderr
    comparison = json.loads((second / "comparison.json").read_text())
    assert comparison["candidate"]["status"] == result["status"] == "inconclusive"
    assert comparison["warnings"] == []
    last = [line for line in done.stdout.splitlines() if line.startswith("INCONCLUSIVE: ")]
    assert last == [f"INCONCLUSIVE: {result['reason']}"]
    assert last[0].startswith("INCONCLUSIVE: the comparison with the baseline is inconclusive: ")
    assert last[0].endswith(">= threshold 0.9000 (default)")  # the floor, on this line too
    said = [set(filter(None, text.splitlines())) for text in (done.stdout, done.stderr)]
    assert not said[0] & said[1]  # no line on both streams


# -- each error said once ------------------------------------------------------------------------


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
