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
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib import request

import pytest

from evalgate.engine import answers
from tests.conftest import load_result, run_subprocess

from .conftest import engine_args, serving
from .stack import EngineStack, http_json, server_root, worker_limit
from .test_engine_run import (
    RUN_TIMEOUT,
    error_line,
    gated_fail,
    kill_mid_eval,
    refused_at_probe,
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


def test_dynamo_context_takes_the_limit_from_the_worker_not_context_window(engine_dynamo, cli):
    base = ("context --json -", engine_dynamo.router_url, engine_dynamo.model)
    alone = cli(*engine_args(*base, "--isl 1024 --osl 1024 --limit 8"))
    given = cli(*engine_args(*base, "--isl 1024 --osl 1024 --limit 8", raw=worker(engine_dynamo)))

    assert alone.code == 2  # no served limit, no native maximum: nothing to derive from
    assert "lists context_window 8192 for smollm2-135m (Dynamo's frontend): not read" in alone.err
    assert given.code == 0, given.err
    document = json.loads(given.out)
    assert document["served"] == worker_limit(engine_dynamo)
    assert document["eval_max_model_len"] == 2048
    assert document["prompt_tokens"]["source"].startswith("estimate")  # no /tokenize
    assert f"{engine_dynamo.router_url} is ready" in given.err


def test_dynamo_full_small_eval_completes_with_evidence(engine_dynamo, tmp_path):
    raw = worker(engine_dynamo)
    _, document, _ = gated_fail(
        engine_dynamo, tmp_path / "run", 8, "--isl 1024 --osl 1024", raw=raw
    )

    assert document["endpoint"]["engine"]["owned_by"] == "nvidia"
    assert document["probe"]["outcome"] == "ok"
    assert document["context"]["served"] == worker_limit(engine_dynamo)
    assert document["eval"]["max_tokens"] < 2048


def test_dynamo_incident_fails_at_the_probe_with_vllms_words(engine_dynamo, tmp_path):
    out = tmp_path / "run"
    lengths = "--isl 1024 --osl 1024 --max-tokens 12288"
    done, document = refused_at_probe(engine_dynamo, out, lengths, raw=worker(engine_dynamo))
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
        *engine_args(
            "run",
            engine_dynamo.router_url,
            engine_dynamo.model,
            "--isl 4096 --osl 4096 --limit 4",
            out=out,
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


@pytest.fixture(scope="module")
def dynamo_own(
    engine_installed: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EngineStack]:
    """Dynamo's frontend in front of a worker that reports vLLM's rejections as Dynamo's own vLLM
    worker does (the frontend then says only "Bad Request"); other ports, its own run directory:
    its worker gets killed, which the session's shared stacks must never be."""
    yield from serving(
        "dynamo", tmp_path_factory.mktemp("dynamo-own"), FRONTEND_PORT=18013, ENGINE_PORT=18420,
        FRONTEND_RPC_PORT=18430, FRONTEND_STREAM_PORT=18431, WORKER_RPC_PORT=18432,
        WORKER_STREAM_PORT=18433, REJECT_WITH="http-error",
    )  # fmt: skip


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
            *engine_args(
                "run",
                dynamo_own.router_url,
                dynamo_own.model,
                "--isl 1024 --osl 1024 --max-tokens 12288",
                out=out,
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
    _, document, samples = kill_mid_eval(
        dynamo_own, tmp_path / "run", "worker.pid", timeout=300, gives_up_within=60, wait=400,
        raw=[*worker(dynamo_own), *WAITING],
    )  # fmt: skip
    reason = document["reason"]
    assert re.match(
        r"Dynamo's frontend (no longer lists the model|cannot reach the model's worker|has no "
        r"live worker for the model) \(HTTP (404|503)[^)]*\)[^:]*: its worker went away during "
        r"the eval",
        reason,
    ), reason
    assert "rejected" not in reason and "unusual" not in reason
    failed = [s for s in samples if s["error"] is not None]
    assert failed and all(re.match(r"HTTP (5\d\d|404): ", s["error"]) for s in failed), failed
