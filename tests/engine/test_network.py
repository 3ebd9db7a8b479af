"""engine.http: every request has a total deadline, every number an engine sends is typed where
it enters, every answer is capped, and the probe keeps the engine's words.

Each test runs `evalgate` as a user does against the fake engine behind `tests.front.Front`,
which answers one path in a hostile shape (a trickle, a stream of comments, a gzip bomb, an
implausible number) and forwards the rest. Deadlines are a second or two; the bounds checked
are several times that. RELIABILITY.md lists each case with its test.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, load_result, load_samples, run_args
from tests.fakeengine import CHAT_PATH, EngineBehaviour, FakeEngine
from tests.front import (
    FRONT_CONTEXT,
    FRONT_RUN,
    Front,
    Handler,
    comments,
    gzip_bomb,
    gzipped,
    json_answer,
    only,
    streamed_only,
    timed,
    trickle,
)

pytestmark = pytest.mark.loopback

MODEL = "fake-model"


# -- 1. deadlines are total, first byte to last ----------------------------------------------------


def test_a_probe_stream_of_comments_is_cut_at_the_timeout(engine, cli, tmp_path):
    with Front(engine.root_url, {CHAT_PATH: streamed_only(comments(every=0.5))}) as front:
        result, took = timed(
            cli, front, *run_args(front.url, tmp_path / "run", timeout=2, **FRONT_RUN)
        )

    assert result.code == 3, result.err
    assert "could not reach the engine after 2 attempts (no first token within 2 s)" in result.err
    assert took < 30  # two attempts of 2 s each, not the endless stream
    assert load_result(tmp_path / "run")["stage"] == "probe"


def test_a_trickled_model_list_is_cut_at_the_ready_timeout(engine, cli):
    listing = json.dumps({"object": "list", "data": [{"id": MODEL}]}).encode()
    with Front(engine.root_url, {"/v1/models": trickle(listing)}) as front:
        result, took = timed(cli, front, *run_args(front.url, ready_timeout=2, **FRONT_CONTEXT))

    assert result.code == 3, result.err
    assert "was not ready after" in result.err
    assert "(--ready-timeout 2); last answer: no whole answer within" in result.err
    assert took < 20


def test_a_trickled_tokenize_is_cut_at_the_ready_timeout(engine, cli):
    counted = json.dumps({"count": 1200, "max_model_len": 4096}).encode()
    with Front(engine.root_url, {"/tokenize": trickle(counted)}) as front:
        result, took = timed(cli, front, *run_args(front.url, ready_timeout=2, **FRONT_CONTEXT))

    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert document["prompt_tokens"]["source"].startswith("estimate")
    assert any("/tokenize of" in w and "gave no answer" in w for w in document["warnings"])
    assert took < 20


def test_a_trickled_version_is_cut_at_the_discovery_timeout(engine, cli, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALGATE_DISCOVERY_TIMEOUT", "1")
    with Front(engine.root_url, {"/version": trickle(b'{"version": "0.32.0"}')}) as front:
        result, took = timed(cli, front, *run_args(front.url, tmp_path / "run", **FRONT_RUN))

    assert result.code == 0, result.err
    assert load_result(tmp_path / "run")["endpoint"]["engine"]["version"] is None
    assert took < 60


def test_a_trickled_worker_model_list_is_cut_at_the_discovery_timeout(engine, cli, monkeypatch):
    monkeypatch.setenv("EVALGATE_DISCOVERY_TIMEOUT", "1")
    listing = json.dumps({"object": "list", "data": [{"id": MODEL}]}).encode()
    with Front(engine.root_url, {"/v1/models": trickle(listing)}) as worker:
        args = run_args(engine.url, worker_url=worker.url, **FRONT_CONTEXT)
        result, took = timed(cli, worker, *args)

    assert result.code == 3, result.err
    assert f"Worker {worker.url} did not answer /v1/models (no whole answer within 1 s)" in (
        result.err
    )
    assert took < 20


# -- 2. an engine's numbers are typed where they enter -------------------------------------------


@pytest.mark.parametrize("count", [-5, True, "1200", 0], ids=["negative", "true", "text", "zero"])
def test_an_implausible_tokenize_count_is_named_and_not_used(engine, cli, tmp_path, count):
    rewrite = only("/tokenize", lambda doc: {**doc, "count": count})
    with Front(engine.root_url, rewrite=rewrite) as front:
        result, _ = timed(cli, front, *run_args(front.url, tmp_path / "run", **FRONT_RUN))

    assert result.code == 0, result.err
    document = load_result(tmp_path / "run")
    assert document["context"]["prompt_tokens"]["source"].startswith("estimate")
    assert document["context"]["max_tokens"] < 4096
    said = f"reports count {count!r}, not a whole number of tokens above 0: ignored"
    assert any(said in warning for warning in document["warnings"]), document["warnings"]
    assert said in result.err
    assert len(load_samples(tmp_path / "run")) == 5


def test_an_implausible_tokenize_limit_is_named_and_not_used(engine, cli):
    rewrite = only("/tokenize", lambda doc: {**doc, "max_model_len": -1})
    with Front(engine.root_url, rewrite=rewrite) as front:
        result, _ = timed(cli, front, *run_args(front.url, **FRONT_CONTEXT))

    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert all(limit["value"] > 0 for limit in document["served"])
    assert any("reports max_model_len -1" in w for w in document["warnings"])


def test_an_implausible_version_is_named_and_not_used(engine, cli, tmp_path):
    rewrite = only("/version", lambda doc: {"version": 32})
    with Front(engine.root_url, rewrite=rewrite) as front:
        result, _ = timed(cli, front, *run_args(front.url, tmp_path / "run", **FRONT_RUN))

    assert result.code == 0, result.err
    document = load_result(tmp_path / "run")
    assert document["endpoint"]["engine"]["version"] is None
    assert any("reports version 32, not text: ignored" in w for w in document["warnings"])


@pytest.mark.parametrize("tokens", [-3, True, "7"], ids=["negative", "true", "text"])
def test_implausible_numbers_in_answers_are_named_and_not_used(engine, cli, tmp_path, tokens):
    def usage(doc):
        return {**doc, "usage": {**doc["usage"], "completion_tokens": tokens}}

    with Front(engine.root_url, rewrite=only(CHAT_PATH, usage)) as front:
        result, _ = timed(cli, front, *run_args(front.url, tmp_path / "run", **FRONT_RUN))

    assert result.code == 0, result.err
    samples = load_samples(tmp_path / "run")
    assert [s["completion_tokens"] for s in samples] == [None] * 5
    warning = f"5 answer(s) carried an implausible usage.completion_tokens (first: {tokens!r})"
    assert any(warning in w for w in load_result(tmp_path / "run")["warnings"])


# -- 3. every answer is capped, decoded ----------------------------------------------------------

MEASURED = (  # VmHWM: this process's peak since exec (ru_maxrss may count the forking parent)
    "import re, sys\n"
    "from evalgate.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "status = open('/proc/self/status').read()\n"
    "print('peak_kb', re.search(r'VmHWM:\\s+(\\d+)', status).group(1), file=sys.stderr)\n"
    "sys.exit(code)\n"
)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_compressed_bomb_model_list_is_cut_at_the_cap_in_little_memory(engine, encoding):
    """200 KB of gzip that decodes to 200 MB, and the same as deflate (zlib's container, which
    aiohttp decodes by its own path): read up to the default cap (16 MiB), no further."""
    prefix, suffix = b'{"object":"list","data":[{"id":"fake-model","root":"', b'"}]}'
    bomb = gzip_bomb(prefix, 200 << 20, suffix, encoding=encoding)
    assert len(bomb) < 400_000
    with Front(engine.root_url, {"/v1/models": gzipped(bomb, encoding=encoding)}) as front:
        done = subprocess.run(
            [sys.executable, "-c", MEASURED, *run_args(front.url, **FRONT_CONTEXT)],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
            check=False,
        )

    assert done.returncode == 3, done.stderr
    assert "the answer passed the cap of 16777216 bytes (--max-response-bytes)" in done.stderr
    assert "raise --max-response-bytes" in done.stderr
    peak_mb = int(done.stderr.split("peak_kb ")[1].split()[0]) / 1024
    assert peak_mb < 300  # 200 MB decoded would not fit


def test_an_answer_that_is_not_the_gzip_it_says_fails_its_request_naming_it(engine, cli, tmp_path):
    def broken(handler: Handler) -> None:
        if handler.json_body.get("stream"):
            handler.forward(CHAT_PATH)
            return
        gzipped(b"\x1f\x8b\x08\x00 and then no gzip at all")(handler)

    with Front(engine.root_url, {CHAT_PATH: broken}) as front:
        result, _ = timed(cli, front, *run_args(front.url, tmp_path / "run", **FRONT_RUN))

    assert result.code == 4, result.err
    said = "Can not decode content-encoding: gzip"
    assert said in result.err
    assert "failed after 2 attempt(s)" in result.err  # retried: the next answer may be whole
    assert load_result(tmp_path / "run")["stage"] == "eval"
    assert any(said in (s["error"] or "") for s in load_samples(tmp_path / "run"))


def test_an_answer_over_the_cap_fails_its_request_and_says_so(engine, cli, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALGATE_MAX_RESPONSE_BYTES", "1048576")

    def bomb(handler: Handler) -> None:
        if handler.json_body.get("stream"):
            handler.forward(CHAT_PATH)
            return
        prefix = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"'
        gzipped(gzip_bomb(prefix, 4 << 20, b'"},"finish_reason":"stop"}]}'))(handler)

    with Front(engine.root_url, {CHAT_PATH: bomb}) as front:
        result, _ = timed(cli, front, *run_args(front.url, tmp_path / "run", **FRONT_RUN))

    assert result.code == 4, result.err
    said = "HTTP 200: the answer passed the cap of 1048576 bytes (--max-response-bytes)"
    assert said in result.err
    document = load_result(tmp_path / "run")
    assert (document["status"], document["stage"]) == ("error", "eval")
    assert any(said in (s["error"] or "") for s in load_samples(tmp_path / "run"))


# -- 4. the probe keeps the engine's words ---------------------------------------------------------

WORDS = (
    "This model's maximum context length is 2048 tokens. However, you requested 4000 tokens "
    "(1200 in the messages, 2800 in the completion). Please reduce the length."
)


def test_a_200_json_error_to_the_probe_keeps_the_engines_words(engine, cli, tmp_path):
    error = {"error": {"message": WORDS, "type": "BadRequestError", "param": None, "code": 400}}
    with Front(engine.root_url, {CHAT_PATH: streamed_only(json_answer(200, error))}) as front:
        result, _ = timed(cli, front, *run_args(front.url, tmp_path / "run", **FRONT_RUN))

    assert result.code == 3, result.err
    assert "answered the pre-flight request with an error instead of a stream" in result.err
    assert f"(HTTP 200: {WORDS})" in result.err
    probe = load_result(tmp_path / "run")["probe"]
    assert (probe["status_code"], probe["engine_message"]) == (200, WORDS)


# -- the proxies users expect ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("no_proxy", "proxied"),
    [(None, True), ("127.0.0.1,localhost", False)],
    ids=["proxied", "NO_PROXY"],
)
def test_http_proxy_is_used_unless_no_proxy_names_the_host(
    engine, cli, monkeypatch, no_proxy, proxied
):
    """aiohttp reads the environment as urllib does: a loopback engine goes through HTTP_PROXY
    too, unless NO_PROXY names it (docs/architecture.md)."""
    with Front(engine.root_url) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.root_url)
        if no_proxy is not None:
            monkeypatch.setenv("NO_PROXY", no_proxy)
        result, _ = timed(cli, proxy, *run_args(engine.url, **FRONT_CONTEXT))

    assert result.code == 0, result.err
    assert ("/v1/models" in proxy.seen) is proxied
    assert ("/tokenize" in proxy.seen) is proxied


# -- the workers' watch is about the host, not the server's speed ----------------------------


def test_a_worker_slow_to_list_its_models_is_not_lost(cli, tmp_path):
    """Polls connect but get no answer (an engine busy generating): the host is there, the eval
    runs to its end. A minute of silence is two seconds here."""
    with FakeEngine(EngineBehaviour(max_model_len=4096, latency_s=0.5)) as engine:

        def models(handler: Handler) -> None:
            if handler.server.front.seen.count("/v1/models") > 1:  # after the context's own
                handler.stopped.wait(120)
            handler.forward("/v1/models")

        with Front(engine.root_url, {"/v1/models": models}) as worker:
            quick = {"keepalive_idle": 1, "keepalive_interval": 1, "keepalive_probes": 1}
            given = {"worker_url": worker.url, "discovery_timeout": 1, "limit": 16}
            args = run_args(engine.url, tmp_path / "run", **(FRONT_RUN | quick | given))
            result, _ = timed(cli, worker, *args)
            polls = worker.seen.count("/v1/models") - 1

    assert result.code == 0, result.err
    assert polls >= 2, polls  # polled while the eval ran, none answered
    assert load_result(tmp_path / "run")["status"] == "pass"
