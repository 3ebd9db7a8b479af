"""What the engines serve (engine/served.py): one check reads /readiness (where a router has one)
and /v1/models once; behind a router that lists a placeholder (sglang-router's `unknown`) the probe
proves the model.

Every test drives `evalgate` as a user would (cli.main) against the fake engine, in the shapes
sglang-router 0.3.2 and vllm-router 0.1.17 answer in front of vLLM (REFERENCE.md §6).
"""

from __future__ import annotations

import json
import threading

import pytest

from tests.conftest import (
    MODEL,
    assert_error,
    deadline,
    gate,
    load_result,
    run_args,
)
from tests.fakeengine import EngineBehaviour, FakeEngine, Fault, refused_url

pytestmark = pytest.mark.loopback


CONTEXT = {"command": "context", "json": "-", "osl": 1024, "limit": 5}


RUN = {"osl": 1024, "limit": 10, "num_concurrent": 4, "min_samples": 0}
"""Routers' shapes, not statistics: the point estimate decides."""


@pytest.fixture
def sglang_router():
    """The fake engine behind sglang-router: lists `unknown`, no lengths, no /tokenize."""
    with FakeEngine(EngineBehaviour(router="sglang-router", max_model_len=4096)) as front:
        yield front


@pytest.mark.parametrize("router", [None, "vllm-router"])
def test_one_check_reads_the_model_list_once(cli, router):
    with FakeEngine(EngineBehaviour(router=router)) as engine:
        with deadline(30, engine):
            result = cli(*run_args(engine.url, **CONTEXT))

        paths = [record.path for record in engine.log]
    assert result.code == 0, result.err
    assert paths.count("/v1/models") == 1
    assert paths.count("/readiness") == 1  # answered 404 by an engine, ready by a router
    document = json.loads(result.out)
    assert document["served"] == [{"value": 4096, "source": "/v1/models of the endpoint"}]


def test_a_router_listing_unknown_runs_to_a_pass_with_a_warning(sglang_router, cli, tmp_path):
    out = tmp_path / "run"
    with deadline(60, sglang_router):
        result = cli(*run_args(sglang_router.url, out, served_max_model_len=4096, **RUN))

    assert result.code == 0, result.err
    assert result.out.splitlines()[0].startswith("PASS: ")
    document = load_result(out)
    assert (document["status"], document["exit_code"]) == ("pass", 0)
    (warning,) = [w for w in document["warnings"] if "does not name the model" in w]
    assert f"{sglang_router.url}/models does not name the model: it lists ['unknown']" in warning
    assert "the probe proves 'fake-model'" in warning
    assert f"warning: {warning}" in result.err
    assert document["context"]["served"] == [{"value": 4096, "source": "--served-max-model-len"}]
    assert document["context"]["prompt_tokens"]["source"].startswith("estimate")  # no /tokenize
    assert document["probe"]["outcome"] == "ok"
    assert document["endpoint"]["engine"]["owned_by"] == "local"
    # The probe sent the real name; the router renamed max_tokens on the way, as it does.
    assert sglang_router.requests[0].body["model"] == MODEL


def test_a_wrong_model_name_behind_the_placeholder_fails_at_the_probe(sglang_router, cli, tmp_path):
    out = tmp_path / "run"
    with deadline(30, sglang_router):
        result = cli(
            *run_args(sglang_router.url, out, served_max_model_len=4096, model="smollm", **RUN)
        )

    assert result.code == 3, result.err
    document = load_result(out)
    assert (document["stage"], document["error"]["type"]) == ("probe", "ProbeError")
    message = "The model `smollm` does not exist. Valid aliases: fake-model."
    assert document["probe"]["status_code"] == 404
    assert document["probe"]["engine_message"] == message
    assert f"The engine rejected the pre-flight request (HTTP 404: {message})" in result.err
    assert sglang_router.total == 1  # the probe alone: a 404 is an answer, sent once


def test_a_router_listing_unknown_with_no_limit_anywhere_is_the_clear_context_error(
    sglang_router, cli
):
    with deadline(30, sglang_router):
        result = cli(*run_args(sglang_router.url, **CONTEXT))

    assert result.code == 2
    assert "ContextError: Cannot derive EVAL_MAX_MODEL_LEN: missing" in result.err
    assert "the served --max-model-len (--base-url or --worker-url to ask the engines" in result.err
    assert "does not name the model: it lists ['unknown']" in result.err  # the reason, logged


def test_the_workers_limit_comes_from_worker_url_behind_the_placeholder(sglang_router, cli):
    with FakeEngine(EngineBehaviour(max_model_len=3072)) as worker, deadline(30, sglang_router):
        result = cli(*run_args(sglang_router.url, worker_url=worker.url, **CONTEXT))

    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert document["served"] == [{"value": 3072, "source": f"/v1/models of worker {worker.url}"}]
    assert document["eval_max_model_len"] == 2304
    assert any("it lists ['unknown']" in warning for warning in document["warnings"])


@pytest.mark.parametrize("router", ["sglang-router", "vllm-router"])
def test_no_healthy_worker_is_not_ready_within_the_ready_timeout(cli, tmp_path, router):
    behaviour = EngineBehaviour(router=router, workers_ready=False)
    with FakeEngine(behaviour) as front:
        out = tmp_path / "run"
        with deadline(20, front):
            result = cli(
                *run_args(front.url, out, served_max_model_len=4096, **RUN),
                "--ready-timeout",
                "0.5",
                "--retry-wait-min",
                "0.02",
                "--retry-wait-max",
                "0.02",
            )

        generation = front.total
    assert result.code == 3, result.err
    document = load_result(out)
    assert (document["stage"], document["error"]["type"]) == ("readiness", "NotReadyError")
    assert "was not ready after" in document["reason"]
    assert (
        'last answer: HTTP 503: /readiness says {"status":"not ready","reason":"insufficient '
        'healthy workers"}' in document["reason"]
    )
    assert generation == 0  # not one generation request while the router had no worker


def test_workers_coming_up_are_waited_out(cli, tmp_path):
    """Readiness before the worker is up: /readiness says not ready, then ready; the run goes on."""
    behaviour = EngineBehaviour(router="sglang-router", workers_ready=False)
    with FakeEngine(behaviour) as front:

        def worker_comes_up() -> None:
            if front.wait_until(lambda e: sum(r.path == "/readiness" for r in e.log) >= 3, 20):
                front.behaviour.workers_ready = True

        threading.Thread(target=worker_comes_up, daemon=True).start()
        out = tmp_path / "run"
        with deadline(60, front):
            result = cli(
                *run_args(front.url, out, served_max_model_len=4096, **RUN),
                "--ready-timeout",
                "30",
                "--retry-wait-min",
                "0.01",
                "--retry-wait-max",
                "0.05",
            )

        readiness = [r.status for r in front.log if r.path == "/readiness"]
    assert result.code == 0, result.err
    assert readiness[:3] == [503, 503, 503] and readiness[-1] == 200
    assert load_result(out)["status"] == "pass"


@pytest.mark.parametrize(
    "fault",
    [
        Fault("router_busy", paths={"/v1/models"}, times=2),
        Fault("router_busy", paths={"/readiness"}, times=2),
    ],
    ids=["No available workers on /v1/models", "No available workers on /readiness"],
)
def test_no_available_workers_as_json_is_waited_out(sglang_router, cli, tmp_path, fault):
    sglang_router.inject(fault)
    out = tmp_path / "run"
    with deadline(60, sglang_router):
        result = cli(*run_args(sglang_router.url, out, served_max_model_len=4096, **RUN))

    assert result.code == 0, result.err
    assert fault.hits == 2
    assert load_result(out)["status"] == "pass"


# Readiness under faults: waited out, or refused within its time, saying why.


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_circuits_open_while_the_router_starts_are_waited_out(engine, tmp_path, clean_run):
    fault = engine.inject(Fault("router_busy", paths={"/v1/models"}, times=3))

    run = gate(engine, tmp_path / "run", ready_timeout=10, retry_wait_min=0.02, retry_wait_max=0.05)

    assert fault.hits == 3
    assert [r.status for r in engine.log if r.path == "/v1/models"][:4] == [503, 503, 503, 200]
    assert (run.outcome.exit_code, run.doc["status"]) == (0, "pass")
    assert run.scores == clean_run.scores


def test_refused_connections_are_not_ready_within_the_ready_timeout(tmp_path):
    run = gate(refused_url(), tmp_path / "run", ready_timeout=0.5, within=10)

    assert (run.outcome.exit_code, run.doc["status"], run.doc["stage"]) == (3, "error", "readiness")
    assert "was not ready after" in run.outcome.reason
    assert "(--ready-timeout 0.5); last answer: ConnectionRefusedError" in run.outcome.reason
    assert run.elapsed < 0.5 + 3
    assert run.doc["eval"] is None


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_circuits_open_for_good_is_not_ready_within_the_ready_timeout(engine, tmp_path):
    engine.inject(Fault("router_busy", paths={"/v1/models"}))

    run = gate(
        engine,
        tmp_path / "run",
        ready_timeout=0.5,
        retry_wait_min=0.02,
        retry_wait_max=0.02,
        within=10,
    )

    assert_error(run, code=3, stage="readiness", says="last answer: HTTP 503: all circuits open")
    assert run.elapsed < 0.5 + 3
    assert engine.total == 0  # no generation request was sent


def test_another_model_served_fails_at_once(tmp_path):
    with FakeEngine(EngineBehaviour(listed_model="other-model")) as other:
        run = gate(other, tmp_path / "run", ready_timeout=30)

        models = [r for r in other.log if r.path == "/v1/models"]
    assert_error(
        run,
        code=3,
        stage="readiness",
        says="does not serve model 'fake-model'; it serves ['other-model']. Pass --model",
    )
    assert len(models) == 1  # an answer, not a glitch: asked once
    assert run.elapsed < 5


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_unauthorized_model_list_fails_at_once(engine, tmp_path):
    fault = engine.inject(Fault("error", status=401, paths={"/v1/models"}, message="bad key"))

    run = gate(engine, tmp_path / "run", ready_timeout=30)

    assert_error(
        run,
        code=3,
        stage="readiness",
        says="answered HTTP 401: bad key. The server refused the credentials: pass the API key "
        "it expects with --api-key, or set EVALGATE_API_KEY or OPENAI_API_KEY.",
    )
    assert fault.hits == 1


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_hung_model_list_is_not_ready_within_the_ready_timeout(engine, tmp_path):
    engine.inject(Fault("hang", paths={"/v1/models"}))

    run = gate(engine, tmp_path / "run", ready_timeout=1, within=4)

    assert_error(run, code=3, stage="readiness", says="was not ready after")


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_https_against_a_plain_http_engine_fails_at_once(engine, tmp_path):
    url = f"https://127.0.0.1:{engine.port}/v1"

    run = gate(url, tmp_path / "run", ready_timeout=30, within=15)

    assert_error(run, code=3, stage="readiness", says="did not answer TLS")
    assert f"try http://127.0.0.1:{engine.port}/v1" in run.outcome.reason
    assert run.elapsed < 10  # not retried until --ready-timeout


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_base_url_without_v1_gets_the_hint_to_add_it(engine, tmp_path):
    run = gate(engine.root_url, tmp_path / "run", ready_timeout=30, within=15)

    assert_error(run, code=3, stage="readiness", says="HTTP 404")
    assert f"--base-url does not end in /v1: try {engine.root_url}/v1" in run.outcome.reason
