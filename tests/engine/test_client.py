"""engine.request: the probe sends the eval's own body, as the engine receives it.

A whole `evalgate run` against the fake engine, which records every body it receives: the
probe's body for its question is the eval's body for the same question, byte for byte, with the
documented streaming key appended.
"""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from evalgate.engine.client import generation_body, probe_body
from evalgate.errors import RequestFailed
from evalgate.run import run_gate
from tests.conftest import (
    DOCS,
    MODEL,
    THINKING_QUESTIONS,
    THINKING_RUN,
    deadline,
    eval_client,
    load_result,
    run_args,
    run_settings,
)
from tests.fakeengine import (
    CHAT_PATH,
    FakeEngine,
)


@pytest.mark.loopback
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_the_probe_sends_byte_for_byte_the_body_the_eval_sends(engine: FakeEngine, tmp_path, api):
    settings = run_settings(
        engine.url, tmp_path / "run", api=api, osl=1024, limit=6, num_concurrent=2, min_samples=0
    )
    with deadline(60, engine):
        outcome = run_gate(settings)
    assert outcome.exit_code == 0, outcome.reason

    probe, *evals = engine.requests
    assert probe.stream and not any(record.stream for record in evals)
    assert len(evals) == 6
    (same,) = [record for record in evals if record.question == probe.question]
    assert probe.body is not None and same.body is not None
    assert set(probe.body) - set(same.body) == {"stream"}
    assert {k: v for k, v in probe.body.items() if k != "stream"} == same.body
    # Byte for byte: the eval's bytes, with the streaming key appended.
    assert probe.raw == same.raw.removesuffix(b"}") + b',"stream":true}'
    document = load_result(tmp_path / "run")
    assert probe.body["max_tokens"] == document["context"]["max_tokens"]
    assert probe.question == DOCS[document["probe"]["doc_id"]].question.strip()


@pytest.mark.unit
def test_the_probe_body_adds_only_the_streaming_key():
    body = generation_body(
        api="chat",
        model="m",
        max_tokens=10,
        stop=["a", "b", "c", "d", "e"],
        sampling={"temperature": 0.0},
        messages=[{"role": "user", "content": "Question: 1 + 1?\nAnswer:"}],
    )

    assert body == {
        "model": "m",
        "max_tokens": 10,
        "temperature": 0.0,
        "messages": [{"role": "user", "content": "Question: 1 + 1?\nAnswer:"}],
        "stop": ["a", "b", "c", "d"],  # lm-eval's chat model keeps the first 4
        "seed": 1234,
    }
    assert probe_body(body) == {**body, "stream": True}
    assert "stream" not in body  # the eval's body is left as it was


# Reasoning models: the thinking kept, answers cut while thinking counted, and the request options
# that steer thinking sent in every request.


@pytest.mark.loopback
def test_thinking_options_go_into_every_request_the_probe_s_included(engine, cli, tmp_path):
    thinking = ["--chat-template-kwargs", '{"enable_thinking": false}', "--reasoning-effort", "low"]
    result = cli(*run_args(engine.url, tmp_path, *thinking, **THINKING_RUN))
    assert result.code == 0, result.text
    bodies = [r.body for r in engine.requests if r.path == CHAT_PATH]
    assert len(bodies) == THINKING_QUESTIONS + 1  # the questions and the probe
    assert any(b.get("stream") for b in bodies)  # the probe is the streamed one
    assert all(b["chat_template_kwargs"] == {"enable_thinking": False} for b in bodies)
    assert all(b["reasoning_effort"] == "low" for b in bodies)
    recorded = load_result(tmp_path)["eval"]
    assert recorded["chat_template_kwargs"] == {"enable_thinking": False}
    assert recorded["reasoning_effort"] == "low"


# --timeout bounds a whole answer, not each read: a trickle is cut.


@pytest.mark.loopback
def test_a_trickling_answer_is_cut_at_the_timeout():
    """--timeout bounds the whole answer, not each read: a byte every 50 ms never completes."""
    import asyncio
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    stop = threading.Event()

    class Trickle(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            with contextlib.suppress(OSError):
                while not stop.wait(0.05):
                    self.wfile.write(b" ")
                    self.wfile.flush()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = eval_client(f"http://127.0.0.1:{server.server_address[1]}/v1", timeout=0.3)

    async def ask() -> RequestFailed:
        try:
            with pytest.raises(RequestFailed) as failed:
                await client.complete({"model": MODEL, "messages": []})
        finally:
            await client.close()
        return failed.value

    started = time.monotonic()
    try:
        with deadline(10):
            failure = asyncio.run(ask())
    finally:
        stop.set()
        server.shutdown()
        server.server_close()

    assert time.monotonic() - started < 0.3 * 2 + 1.5
    assert str(failure) == "no answer: request timed out (--timeout)"
    assert (failure.fatal, failure.attempts, client.retried) == (False, 2, 1)
