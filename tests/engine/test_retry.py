"""engine.retry: what is retried, how often and how long, for readiness, probe and eval alike."""

from __future__ import annotations

import json

import aiohttp
import pytest
from tenacity import RetryError

from evalgate.engine.http import RetryPolicy, should_retry
from evalgate.engine.wire import EngineError, parse_error
from evalgate.errors import (
    AnswerTooLarge,
    ConnectionFailed,
    EngineAnswerError,
    HostSilent,
    MalformedAnswer,
)
from evalgate.errors import EngineAnswerError as SideDoorError
from evalgate.errors import TimedOut as AnswerTimedOut

pytestmark = pytest.mark.unit

VLLM_400 = json.dumps({"error": {"message": "max_tokens=9 cannot be greater", "code": 400}})
WORKER_REFUSED = (
    "Transparent proxy request failed: Network error: Decode request failed to "
    "http://127.0.0.1:18201/v1/chat/completions: error sending request for url "
    "(http://127.0.0.1:18201/v1/chat/completions) caused by: client error (Connect) caused by: "
    "tcp connect error caused by: Connection refused (os error 111)"
)
NO_WORKERS_JSON = json.dumps(
    {
        "error": {
            "type": "Service Unavailable",
            "code": "no_available_workers",
            "message": "No available workers (all circuits open or unhealthy)",
        }
    }
)


def sdk_status(status: int, body: str) -> EngineAnswerError:
    """An HTTP error answer, as the probe and the eval raise it."""
    return EngineAnswerError(parse_error(status, body))


def side_door(status: int, body: str) -> SideDoorError:
    """A /readiness or /v1/models error answer, as readiness sees it."""
    return SideDoorError(parse_error(status, body))


CASES: list[tuple[str, BaseException, bool]] = [
    # (case, exception, retried)
    ("connection refused", ConnectionFailed("ConnectionRefusedError: refused"), True),
    ("connection reset", ConnectionFailed("ConnectionResetError: reset"), True),
    ("a host that stopped answering", HostSilent("http://10.0.0.2:8000 stopped answering"), True),
    ("no whole answer in time", AnswerTimedOut("late"), True),
    ("a 200 that is not a completion", MalformedAnswer("not JSON"), True),
    ("a 200 that is not a model list", SideDoorError(EngineError(200, "not JSON")), True),
    ("408", sdk_status(408, "Request Timeout"), True),
    ("429", sdk_status(429, "Too Many Requests"), True),
    ("500", sdk_status(500, "Internal Server Error"), True),
    ("502", sdk_status(502, ""), True),
    ("504", sdk_status(504, "Gateway Timeout"), True),
    ("vllm-router 503 all circuits open", sdk_status(503, "all circuits open"), True),
    (
        "vllm-router 503 No available workers (text)",
        sdk_status(503, "No available workers (all circuits open or unhealthy)"),
        True,
    ),
    ("sglang-router 503 No available workers (JSON)", sdk_status(503, NO_WORKERS_JSON), True),
    (
        "sglang-router /readiness 503 not ready",
        side_door(503, '{"status":"not ready","reason":"insufficient healthy workers"}'),
        True,
    ),
    ("a router's 500: worker refused (os error 111)", sdk_status(500, WORKER_REFUSED), True),
    (
        "a router's 500 wrapping a worker's 503",
        sdk_status(500, "Request processing failed: Prefill server error 503 x: " + VLLM_400),
        True,
    ),
    ("400 vLLM's rejection", sdk_status(400, VLLM_400), False),
    ("401", sdk_status(401, '{"error": "Unauthorized"}'), False),
    ("403", sdk_status(403, "Forbidden"), False),
    ("404 unknown model", sdk_status(404, '{"detail": "Not Found"}'), False),
    ("422", sdk_status(422, '{"detail": [{"msg": "bad"}]}'), False),
    ("401 on /v1/models", side_door(401, "bad key"), False),
    (
        "a router's 500 wrapping a worker's 400",
        sdk_status(500, "Request processing failed: Prefill server error 400 x: " + VLLM_400),
        False,
    ),
    ("an answer over --max-response-bytes", AnswerTooLarge("cut"), False),
    ("an evalgate bug", ValueError("bug"), False),
    ("a key error", KeyError("choices"), False),
]


@pytest.mark.parametrize(
    ("exc", "retried"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_should_retry(exc, retried):
    assert should_retry(exc) is retried


class Flaky:
    """Raises `errors` in turn, then answers; counts the calls and the waits asked for."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.waits: list[float] = []

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "answer"

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.mark.parametrize(
    ("library_error", "said"),
    [
        (
            aiohttp.ClientOSError(104, "Connection reset by peer"),
            "ConnectionResetError: [Errno 104] Connection reset by peer",
        ),
        (aiohttp.ServerDisconnectedError(), "ServerDisconnectedError: Server disconnected"),
        (
            aiohttp.ClientPayloadError(""),
            "ClientPayloadError: the connection was closed before an answer",
        ),
    ],
)
def test_a_lost_connection_is_named_by_its_socket_error_and_retried(library_error, said):
    failed = ConnectionFailed.of(library_error)
    assert str(failed) == said
    assert should_retry(failed)


def test_retried_failures_then_an_answer():
    flaky = Flaky(sdk_status(503, "all circuits open"), ConnectionFailed("refused"))
    policy = RetryPolicy(0.0, 0.0, attempts=3)

    assert policy.retrying(sleep=flaky.sleep)(flaky) == "answer"
    assert flaky.calls == 3


def test_a_4xx_is_raised_at_once():
    rejection = sdk_status(400, VLLM_400)
    flaky = Flaky(rejection)

    with pytest.raises(EngineAnswerError) as raised:
        RetryPolicy(0.0, 0.0, attempts=5).retrying(sleep=flaky.sleep)(flaky)

    assert raised.value is rejection
    assert flaky.calls == 1


def test_attempts_bound_the_retries_and_the_last_error_is_raised():
    errors = [sdk_status(500, f"boom {n}") for n in range(10)]
    flaky = Flaky(*errors)

    with pytest.raises(EngineAnswerError) as raised:
        RetryPolicy(0.0, 0.0, attempts=3).retrying(sleep=flaky.sleep)(flaky)

    assert raised.value is errors[2]  # reraised as it was, not a tenacity RetryError
    assert not isinstance(raised.value, RetryError)
    assert flaky.calls == 3


def test_waits_grow_from_the_minimum_to_the_maximum():
    flaky = Flaky(*[sdk_status(503, "busy")] * 6)
    policy = RetryPolicy(1.0, 5.0, attempts=7)

    policy.retrying(sleep=flaky.sleep)(flaky)

    assert flaky.waits == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]


class Clock:
    """tenacity's clock, moved only by the waits it asks for and the attempts' own time."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def test_the_deadline_stops_a_wait_that_would_pass_it(monkeypatch):
    """A total-time bound: no wait starts that would end past the deadline."""
    clock = Clock()
    monkeypatch.setattr("tenacity.time", clock)
    flaky = Flaky(*[sdk_status(503, "busy")] * 10)

    def sleep(seconds: float) -> None:
        flaky.sleep(seconds)
        clock.now += seconds

    with pytest.raises(EngineAnswerError):
        RetryPolicy(4.0, 4.0, deadline=10.0).retrying(sleep=sleep)(flaky)

    # attempts at 0 s, 4 s and 8 s; a third wait would end at 12 s, past the 10 s deadline
    assert (flaky.calls, flaky.waits) == (3, [4.0, 4.0])


def test_attempts_and_deadline_both_bound_a_request(monkeypatch):
    clock = Clock()
    monkeypatch.setattr("tenacity.time", clock)
    policy = RetryPolicy.for_requests(attempts=5, timeout=2.0, wait_min=1.0, wait_max=1.0)

    def slow_failure() -> None:
        clock.now += 2.0  # each attempt times out after --timeout
        raise AnswerTimedOut("no whole answer within 2 s")

    calls: list[float] = []

    def sleep(seconds: float) -> None:
        calls.append(seconds)
        clock.now += seconds

    with pytest.raises(AnswerTimedOut):
        policy.retrying(sleep=sleep)(slow_failure)

    # 5 attempts alone would take 10 s; with the waits the 4th attempt ends at 11 s: the
    # deadline (attempts x timeout) stops it there instead of a 5th attempt at 14 s.
    assert calls == [1.0, 1.0, 1.0]
    assert clock.now == 4 * 2.0 + 3 * 1.0


def test_zero_waits_from_settings_make_retries_instant():
    flaky = Flaky(*[sdk_status(503, "busy")] * 4)
    policy = RetryPolicy.for_requests(attempts=5, timeout=30.0, wait_min=0.0, wait_max=0.0)

    assert policy.retrying(sleep=flaky.sleep)(flaky) == "answer"
    assert flaky.waits == [0.0, 0.0, 0.0, 0.0]
    assert (policy.attempts, policy.deadline) == (5, 150.0)


def test_a_host_silent_twice_in_a_row_ends_the_request_whatever_the_attempts_left():
    """A vanished host: no connection within --connect-timeout, again; no third wait."""
    silent = HostSilent("http://10.0.0.2:8000 stopped answering")
    flaky = Flaky(silent, silent, silent, silent)

    with pytest.raises(HostSilent):
        RetryPolicy(0.0, 0.0, attempts=5).retrying(sleep=flaky.sleep)(flaky)

    assert flaky.calls == 2


def test_silence_between_other_failures_is_retried_as_usual():
    silent = HostSilent("http://10.0.0.2:8000 stopped answering")
    flaky = Flaky(silent, sdk_status(503, "busy"), silent, sdk_status(503, "busy"))

    assert RetryPolicy(0.0, 0.0, attempts=5).retrying(sleep=flaky.sleep)(flaky) == "answer"
    assert flaky.calls == 5


def test_readiness_is_bounded_by_time_alone():
    policy = RetryPolicy.for_readiness(timeout=600.0, wait_min=1.0, wait_max=10.0)

    assert (policy.attempts, policy.deadline) == (None, 600.0)
