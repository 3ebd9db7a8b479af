"""`evalgate` behind sglang-router, in front of the real vLLM CPU engine.

sglang-router 0.3.2 lists the model as `unknown`, with no max_model_len, has no /tokenize, and
answers /health OK even with no healthy worker (/readiness tells). evalgate warns, lets the probe
prove the model name, takes the served limit from the worker (--worker-url) and estimates the
prompts' length.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from urllib import error, request

import pytest

from .conftest import engine_args, serving
from .stack import EngineStack, chat, http_json, refusal, server_root, worker_limit
from .test_engine_run import (
    error_line,
    gated_fail,
    kill_mid_eval,
    refused_at_probe,
)

pytestmark = pytest.mark.engine


# A worker that is still starting takes about a minute on two cores: poll twice a second, not in
# a busy loop (the common arguments' zero waits), while it starts.
WAITING = ["--ready-timeout", "300", "--retry-wait-min", "0.5", "--retry-wait-max", "1"]


def http_text(url: str) -> tuple[int, str]:
    """GET, and the status and text of the answer (an HTTP error status is an answer too)."""
    try:
        with request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except error.HTTPError as exc:
        return exc.code, exc.read().decode()


def worker(running: EngineStack) -> list[str]:
    assert running.engine_url is not None
    return ["--worker-url", running.engine_url]


def unknown_warning(running: EngineStack) -> str:
    return f"{running.router_url}/models does not name the model: it lists ['unknown']"


def test_sglang_router_answers_as_seen(engine_sglang: EngineStack) -> None:
    root = server_root(engine_sglang.router_url)
    assert http_json(f"{root}/readiness") == (
        200,
        {"status": "ready", "healthy_workers": 1, "total_workers": 1},
    )
    assert http_text(f"{root}/health") == (200, "OK")
    status, models = http_json(f"{engine_sglang.router_url}/models")
    assert status == 200
    assert models["data"] == [{"id": "unknown", "object": "model", "owned_by": "local"}]
    assert http_json(f"{root}/tokenize", {"model": engine_sglang.model, "prompt": "Hi"})[0] == 404

    status, body = chat(engine_sglang.router_url, engine_sglang.model, "What is 2 + 3?", 8)
    assert status == 200 and body["model"] == engine_sglang.model
    assert 0 < body["usage"]["completion_tokens"] <= 8


def test_sglang_context_takes_the_limit_from_the_worker(engine_sglang, cli):
    result = cli(
        *engine_args(
            "context --json -",
            engine_sglang.router_url,
            engine_sglang.model,
            "--isl 1024 --osl 1024 --limit 8",
            raw=worker(engine_sglang),
        )
    )
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert document["served"] == worker_limit(engine_sglang)
    assert document["eval_max_model_len"] == 2048
    assert document["prompt_tokens"]["source"].startswith("estimate")  # no /tokenize
    assert any(w.startswith(unknown_warning(engine_sglang)) for w in document["warnings"])
    assert f"{engine_sglang.router_url} is ready" in result.err


def test_sglang_full_small_eval_completes_with_evidence(engine_sglang, tmp_path):
    raw = worker(engine_sglang)
    done, document, _ = gated_fail(
        engine_sglang, tmp_path / "run", 8, "--isl 1024 --osl 1024", raw=raw
    )

    assert document["endpoint"]["engine"]["owned_by"] == "local"  # the router's placeholder card
    assert document["probe"]["outcome"] == "ok"
    assert document["context"]["served"] == worker_limit(engine_sglang)
    (warning,) = [w for w in document["warnings"] if w.startswith(unknown_warning(engine_sglang))]
    assert f"warning: {warning}" in done.stderr


def test_sglang_incident_fails_at_the_probe_with_vllms_words(engine_sglang, tmp_path):
    # What vLLM answers through the router: the router renames max_tokens before vLLM sees it.
    vllm_message = refusal(engine_sglang.router_url, engine_sglang.model, 12288)
    assert vllm_message == (
        "max_completion_tokens=12288 cannot be greater than max_model_len=2048. Please request "
        "fewer output tokens. (parameter=max_completion_tokens, value=12288)"
    )

    lengths = "--isl 1024 --osl 1024 --max-tokens 12288"
    done, document = refused_at_probe(
        engine_sglang, tmp_path / "run", lengths, raw=worker(engine_sglang)
    )
    assert document["probe"]["engine_message"] == vllm_message
    assert document["eval"] is None
    line = error_line(done.stderr, "ProbeError")
    assert line.startswith(
        f"ProbeError: The engine rejected the pre-flight request (HTTP 400: {vllm_message})."
    )
    assert "Drop --max-tokens 12288 to let evalgate derive the budget" in line


@pytest.fixture(scope="module")
def router_first(
    engine_installed: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EngineStack]:
    """sglang-router up, its worker (the engine) still starting; other ports, its own run
    directory: its engine gets killed, which the session's shared stacks must never be."""
    yield from serving(
        "sglang", tmp_path_factory.mktemp("sglang-router-first"), ROUTER_PORT=18012,
        METRICS_PORT=18096, ENGINE_PORT=18310, ROUTER_FIRST=1,
    )  # fmt: skip


def test_sglang_readiness_waits_for_the_worker(router_first, tmp_path):
    root = server_root(router_first.router_url)
    status, body = http_json(f"{root}/readiness")
    assert status == 503, body  # the worker is not up yet
    assert body == {"status": "not ready", "reason": "insufficient healthy workers"}
    assert http_text(f"{root}/health") == (200, "OK")  # liveness says nothing of the workers

    raw = [*worker(router_first), *WAITING]
    _, document, _ = gated_fail(router_first, tmp_path / "run", 2, "--isl 1024 --osl 256", raw=raw)
    assert document["timings"]["readiness"] > 5  # it waited for the worker, then went on
    assert http_json(f"{root}/readiness")[0] == 200


def test_sglang_worker_killed_mid_eval_names_the_unreachable_worker(router_first, tmp_path):
    _, document, samples = kill_mid_eval(
        router_first, tmp_path / "run", "engine.pid", timeout=60, gives_up_within=30, wait=400,
        raw=[*worker(router_first), *WAITING],
    )  # fmt: skip
    reason = document["reason"]
    worker_root = server_root(str(router_first.engine_url))
    assert reason.startswith(
        f"The worker {worker_root} behind the router is unreachable: the engine went away "
        "during the eval. "
    ), reason
    assert "rejected" not in reason
    failed = [s for s in samples if s["error"] is not None]
    assert failed and all(re.match(r"HTTP 5\d\d: ", s["error"]) for s in failed), failed
