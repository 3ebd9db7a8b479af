"""An engine's side doors (engine/discovery.py): the model card picked for the model asked for,
a router's placeholder name, the served limit that follows the picked card, and the advice when
an endpoint refuses the key."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from evalgate.engine.discovery import ModelCard, is_placeholder, pick_card, served_limit
from evalgate.evidence.model import Limit
from tests.conftest import (
    assert_error,
    error_lines,
    gate,
    load_result,
    load_samples,
    run_args,
    run_subprocess,
)
from tests.fakeengine import (
    GENERATION_PATHS,
    NOT_PROBE,
    FakeEngine,
    Fault,
)
from tests.front import (
    FRONT_CONTEXT,
    FRONT_RUN,
    Answer,
    Front,
    Handler,
    only,
    timed,
)

pytestmark = pytest.mark.loopback


CARD = ModelCard("fake-model", "vllm", 4096, None)
OTHER = ModelCard("other-model", "vllm", 2048, None)
UNKNOWN = ModelCard("unknown", "local", None, None)


PICKS = [
    # (case, cards, model asked for, card picked)
    ("the model's own card", [OTHER, CARD], "fake-model", CARD),
    ("the only card, under another name", [OTHER], "fake-model", OTHER),
    ("sglang-router's placeholder", [UNKNOWN], "fake-model", UNKNOWN),
    ("several cards, none the model's", [OTHER, UNKNOWN], "fake-model", None),
    ("no cards", [], "fake-model", None),
    ("no model asked for, one card", [CARD], None, CARD),
]


@pytest.mark.parametrize(
    ("cards", "model", "picked"), [c[1:] for c in PICKS], ids=[c[0] for c in PICKS]
)
def test_pick_card(cards, model, picked):
    assert pick_card(cards, model) == picked


@pytest.mark.parametrize(
    ("cards", "placeholder"),
    [([], True), ([UNKNOWN], True), ([CARD], False), ([UNKNOWN, OTHER], False)],
)
def test_is_placeholder(cards, placeholder):
    assert is_placeholder(cards) is placeholder


def test_served_limit_follows_the_picked_card():
    assert served_limit([OTHER, CARD], "fake-model", "x") == Limit(4096, "/v1/models of x")
    assert served_limit([UNKNOWN], "fake-model", "x") is None  # no length listed
    assert served_limit([OTHER, UNKNOWN], "fake-model", "x") is None


# The advice fits the mistake: an endpoint that refuses the key, whichever request it refused, is
# told as a refused key (--api-key and its variables), each command in its own process behind a
# front door (tests/front.py) that asks for a key where a gateway in front of an engine would.


KEY = "sk-gate-7Qm2Vx9Lp4"


ADVICE = (
    "The server refused the credentials: pass the API key it expects with --api-key, or set "
    "EVALGATE_API_KEY or OPENAI_API_KEY."
)


LENGTH_ADVICE = "Serve a larger --max-model-len"


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


# Every number an engine's side doors send is typed where it enters: an implausible one is named
# and not used (the fake engine behind tests/front.py's Front, which rewrites its answers).


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


# A redirect is refused, naming where it points.


class _Redirect(http.server.BaseHTTPRequestHandler):
    target = ""

    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", self.target + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.usefixtures("nineteen_of_twenty")
def test_a_redirect_names_where_it_points(engine, tmp_path):
    _Redirect.target = engine.root_url
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Redirect)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        run = gate(url, tmp_path / "run", ready_timeout=30, within=15)
    finally:
        server.shutdown()
        server.server_close()

    assert_error(run, code=3, stage="readiness", says="HTTP 302")
    assert f"redirects to {engine.url}/models" in run.outcome.reason
    assert "empty body" not in run.outcome.reason
