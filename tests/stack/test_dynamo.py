"""`evalgate` behind NVIDIA Dynamo's frontend, in front of the real vLLM CPU engine.

The frontend (ai-dynamo 1.6.1) reaches vLLM through scripts/dynamo_worker.py, a worker on
Dynamo's runtime API that registers no context length: the frontend lists `context_window` 8192
(SmolLM2's max_position_embeddings) where vLLM serves 2048, has no /tokenize, sends errors flat
and, streamed, as HTTP 200 then an error event. evalgate waits on /v1/models/{id}/ready, does not
read context_window as a served limit, and takes the limit from the worker (--worker-url).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib import request

import pytest

from evalgate.engine import answers
from tests.conftest import load_result, load_samples, run_subprocess

from . import stack
from .stack import EngineStack, http_json, server_root
from .test_engine_run import (
    FAILS_WITHIN,
    RUN_TIMEOUT,
    args,
    assert_gated_fail,
    error_line,
    kill_mid_eval,
    run_args,
)

pytestmark = pytest.mark.engine

VLLM_WORDS = (
    "max_tokens=12288 cannot be greater than max_model_len=2048. Please request fewer output "
    "tokens. (parameter=max_tokens, value=12288)"
)
# Waits between retries while a worker goes away: a busy loop of zero waits would outrun the
# frontend's own bookkeeping.
WAITING = ["--retry-wait-min", "0.5", "--retry-wait-max", "1"]


def worker(running: EngineStack) -> list[str]:
    assert running.engine_url is not None
    return ["--worker-url", running.engine_url]


def post_stream(url: str, body: dict[str, Any]) -> tuple[int, str]:
    """POST `body` streamed, and the status and whole text of the answer."""
    data = json.dumps({**body, "stream": True}).encode()
    req = request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with request.urlopen(req, timeout=120) as response:
        return response.status, response.read().decode()


def model_config(running: EngineStack) -> Path:
    """The served model's config.json, found through vLLM's own card (its `root`)."""
    status, body = http_json(f"{running.engine_url}/models")
    assert status == 200, body
    return Path(body["data"][0]["root"]) / "config.json"


def over_budget(running: EngineStack) -> dict[str, Any]:
    return {
        "model": running.model,
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 12288,
    }


# --- what the frontend answers (docs/harness.md) ------------------------------------------------


def test_dynamo_frontend_answers_as_seen(engine_dynamo: EngineStack) -> None:
    front = engine_dynamo.router_url
    root = server_root(front)
    status, models = http_json(f"{front}/models")
    assert status == 200
    (card,) = models["data"]
    assert card["id"] == engine_dynamo.model and card["owned_by"] == "nvidia"
    assert card["context_window"] == 8192 and "max_model_len" not in card
    status, ready = http_json(f"{front}/models/{engine_dynamo.model}/ready")
    assert status == 200 and ready["ready"] is True
    status, health = http_json(f"{root}/health")
    assert status == 200 and health["status"] == "healthy"
    for method, path in (("POST", "/tokenize"), ("GET", "/readiness"), ("GET", "/version")):
        body = {"model": engine_dynamo.model, "prompt": "Hi"} if method == "POST" else None
        assert http_json(f"{root}{path}", body) == (
            404,
            {"message": f"Route not found: {method} {path}", "type": "Not Found", "code": 404},
        )

    assert http_json(f"{front}/chat/completions", over_budget(engine_dynamo)) == (
        400,
        {"message": VLLM_WORDS, "type": "Bad Request", "code": 400},
    )
    status, text = post_stream(f"{front}/chat/completions", over_budget(engine_dynamo))
    assert status == 200
    events = [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert json.loads(events[0]) == {
        "error": {"message": VLLM_WORDS, "type": "invalid_request_error", "code": 400}
    }


# --- context, the run, the incident -------------------------------------------------------------


def test_dynamo_context_takes_the_limit_from_the_worker_not_context_window(engine_dynamo, cli):
    base = ("context --json -", engine_dynamo.router_url, engine_dynamo.model)
    alone = cli(*args(*base, "--isl 1024 --osl 1024 --limit 8"))
    given = cli(*args(*base, "--isl 1024 --osl 1024 --limit 8", raw=worker(engine_dynamo)))

    assert alone.code == 2  # no served limit, no native maximum: nothing to derive from
    assert "lists context_window 8192 for smollm2-135m (Dynamo's frontend): not read" in alone.err
    assert given.code == 0, given.err
    document = json.loads(given.out)
    assert document["served"] == [
        {"value": 2048, "source": f"/v1/models of worker {engine_dynamo.engine_url}"}
    ]
    assert document["eval_max_model_len"] == 2048
    assert document["prompt_tokens"]["source"].startswith("estimate")  # no /tokenize
    assert f"{engine_dynamo.router_url} is ready" in given.err


def test_dynamo_full_small_eval_completes_with_evidence(engine_dynamo, tmp_path):
    questions = 8
    out = tmp_path / "run"
    done = run_subprocess(
        *run_args(
            engine_dynamo.router_url,
            engine_dynamo.model,
            out,
            f"--isl 1024 --osl 1024 --limit {questions} --num-concurrent 2",
            raw=worker(engine_dynamo),
        ),
        timeout=RUN_TIMEOUT,
    )
    document, _ = assert_gated_fail(done, out, questions)

    assert document["endpoint"]["engine"]["owned_by"] == "nvidia"
    assert document["probe"]["outcome"] == "ok"
    assert document["context"]["served"] == [
        {"value": 2048, "source": f"/v1/models of worker {engine_dynamo.engine_url}"}
    ]
    assert document["eval"]["max_tokens"] < 2048


def test_dynamo_incident_fails_at_the_probe_with_vllms_words(engine_dynamo, tmp_path):
    out = tmp_path / "run"
    started = time.monotonic()
    done = run_subprocess(
        *run_args(
            engine_dynamo.router_url,
            engine_dynamo.model,
            out,
            "--isl 1024 --osl 1024 --max-tokens 12288",
            raw=worker(engine_dynamo),
        ),
        timeout=RUN_TIMEOUT,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 3, done.stderr
    assert elapsed < FAILS_WITHIN, f"took {elapsed:.1f} s"

    document = load_result(out)
    assert (document["status"], document["stage"]) == ("error", "probe")
    assert document["probe"]["status_code"] == 400
    assert document["probe"]["engine_message"] == VLLM_WORDS
    assert document["eval"] is None and not (out / "journal.jsonl").exists()
    line = error_line(done.stderr, "ProbeError")
    assert line.startswith(
        f"ProbeError: The engine rejected the pre-flight request (HTTP 400: {VLLM_WORDS})."
    )
    assert "Drop --max-tokens 12288 to let evalgate derive the budget" in line


def test_dynamo_overstated_context_window_never_reaches_the_eval(engine_dynamo, tmp_path):
    """With only the model's config (max_position_embeddings 8192, what the frontend lists), the
    budget it allows is more than vLLM serves: the probe says so, before any eval request."""
    out = tmp_path / "run"
    done = run_subprocess(
        *run_args(
            engine_dynamo.router_url,
            engine_dynamo.model,
            out,
            "--isl 4096 --osl 4096 --limit 4",
            raw=["--model-config", str(model_config(engine_dynamo))],
        ),
        timeout=RUN_TIMEOUT,
    )
    assert done.returncode == 3, done.stderr
    document = load_result(out)
    assert (document["status"], document["stage"]) == ("error", "probe")
    assert document["context"]["served"] == []
    assert document["context"]["eval_max_model_len"] == 8192  # the native maximum, not served
    budget = document["probe"]["max_tokens"]
    assert document["probe"]["engine_message"] == (
        f"max_tokens={budget} cannot be greater than max_model_len=2048. Please request fewer "
        f"output tokens. (parameter=max_tokens, value={budget})"
    )
    assert "--served-max-model-len 2048" in document["reason"]
    assert any("context_window 8192" in warning for warning in document["warnings"])
    assert not (out / "journal.jsonl").exists()  # not one eval request was sent


# --- a stack of its own: a worker that loses vLLM's words, then is killed -----------------------


@pytest.fixture(scope="module")
def dynamo_own(
    engine_installed: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EngineStack]:
    """Dynamo's frontend in front of a worker that reports vLLM's rejections as Dynamo's own vLLM
    worker does (the frontend then says only "Bad Request"); other ports, its own run directory:
    its worker gets killed, which the session's shared stacks must never be."""
    env = {
        "EVALGATE_ENGINE_RUN": str(tmp_path_factory.mktemp("dynamo-own")),
        "EVALGATE_DYNAMO_FRONTEND_PORT": "18013",
        "EVALGATE_DYNAMO_ENGINE_PORT": "18420",
        "EVALGATE_DYNAMO_FRONTEND_RPC_PORT": "18430",
        "EVALGATE_DYNAMO_FRONTEND_STREAM_PORT": "18431",
        "EVALGATE_DYNAMO_WORKER_RPC_PORT": "18432",
        "EVALGATE_DYNAMO_WORKER_STREAM_PORT": "18433",
        "EVALGATE_DYNAMO_REJECT_WITH": "http-error",
    }
    running = stack.up("dynamo", env)
    try:
        yield running
    finally:
        stack.down("dynamo", env)


def test_dynamo_without_vllms_words_asks_the_worker(dynamo_own, tmp_path):
    assert http_json(f"{dynamo_own.router_url}/chat/completions", over_budget(dynamo_own)) == (
        400,
        {"message": "Bad Request", "type": "Bad Request", "code": 400},
    )
    runs = {}
    for how, given in (
        ("alone", ["--served-max-model-len", "2048"]),
        ("worker", worker(dynamo_own)),
    ):
        out = tmp_path / how
        runs[how] = run_subprocess(
            *run_args(
                dynamo_own.router_url,
                dynamo_own.model,
                out,
                "--isl 1024 --osl 1024 --max-tokens 12288",
                raw=given,
            ),
            timeout=RUN_TIMEOUT,
        )
        assert runs[how].returncode == 3, runs[how].stderr

    rejected = "The engine rejected the pre-flight request (HTTP 400: Invalid request)."
    alone = load_result(tmp_path / "alone")
    assert alone["reason"].startswith(rejected)
    assert alone["reason"].endswith(f" {answers.NO_WORDS} {answers.ASK_WORKERS}")
    asked = load_result(tmp_path / "worker")
    assert asked["reason"].startswith(rejected)
    assert asked["reason"].endswith(
        f" The worker {dynamo_own.engine_url} answers the same request itself: HTTP 400: "
        f"{VLLM_WORDS}."
    )
    assert asked["probe"]["engine_message"] == VLLM_WORDS
    assert error_line(runs["worker"].stderr, "ProbeError") == f"ProbeError: {asked['reason']}"


def test_dynamo_worker_killed_mid_eval_names_what_went_away(dynamo_own, tmp_path):
    out = tmp_path / "run"
    questions = 40
    arguments = run_args(
        dynamo_own.router_url,
        dynamo_own.model,
        out,
        f"--isl 1024 --osl 1024 --limit {questions} --num-concurrent 2",
        "--max-attempts 2 --timeout 300",
        raw=[*worker(dynamo_own), *WAITING],
    )
    run = kill_mid_eval(arguments, out, dynamo_own.run_dir / "worker.pid", wait=400)
    stdout, stderr, after_kill = run.stdout, run.stderr, run.after_kill

    assert run.returncode == 4, stderr
    assert after_kill < 60, f"took {after_kill:.1f} s to give up after the kill"
    document = load_result(out)
    assert (document["status"], document["stage"]) == ("error", "eval")
    reason = document["reason"]
    assert re.match(
        r"Dynamo's frontend (no longer lists the model|cannot reach the model's worker|has no "
        r"live worker for the model) \(HTTP (404|503)[^)]*\)[^:]*: its worker went away during "
        r"the eval",
        reason,
    ), reason
    assert "rejected" not in reason and "unusual" not in reason
    assert error_line(stderr, "EvalFailedError") == f"EvalFailedError: {reason}"
    assert stdout == ""  # no verdict: the error is said once, on stderr
    failed = [s for s in load_samples(out) if s["error"] is not None]
    assert failed and all(re.match(r"HTTP (5\d\d|404): ", s["error"]) for s in failed), failed
