"""The eval's requests sent from the moment the probe passes, while lm-eval loads: each question
still goes to the engine once, lm-eval receives the answers to its own bodies, and a dispatch
whose bodies are not lm-eval's is discarded rather than trusted."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from evalgate.engine.client import EvalClient, generation_body
from evalgate.eval.dispatch import Dispatch, Request
from evalgate.eval.replies import Replies
from evalgate.tasks.dataset import load_dataset
from evalgate.tasks.spec import build_prompts, load_task
from tests.conftest import MODEL, eval_client, load_result, load_samples, run_args
from tests.fakeengine import EngineBehaviour, FakeEngine, find_question

pytestmark = pytest.mark.loopback


def _requests(limit: int, *, max_tokens: int = 256) -> list[Request]:
    spec = load_task("chat", "gsm8k")
    data = load_dataset()
    prompts = build_prompts(spec, data.test, data.train, limit)
    return [
        Request.of(
            p.doc_id,
            generation_body(
                api="chat", model=MODEL, max_tokens=max_tokens, stop=spec.stop, messages=p.messages
            ),
        )
        for p in prompts
    ]


def _dispatch(engine: FakeEngine) -> Dispatch:
    def client() -> EvalClient:
        return eval_client(engine.url, max_connections=4)

    replies = Replies(MODEL, "chat", max_tokens=256, max_failed=0, journal=None, thinking=None)
    return Dispatch(client_factory=client, replies=replies, num_concurrent=4)


def test_a_run_sends_each_question_once_and_lm_eval_takes_the_early_answers(
    engine, cli, tmp_path, caplog
):
    caplog.set_level(logging.INFO, logger="evalgate")
    result = cli(
        *run_args(engine.url, tmp_path, "-v", limit=40, min_samples=0, num_concurrent=None)
    )

    assert result.code == 0, result.err
    assert "lm-eval asked for the 40 requests under way since the probe passed" in result.err
    streamed = [r for r in engine.requests if r.stream]
    plain = [r for r in engine.requests if not r.stream]
    assert len(streamed) == 1  # the probe
    assert len(plain) == 40
    asked = [find_question(r.body["messages"][-1]["content"]) for r in plain]  # type: ignore[index]
    assert len(set(asked)) == 40  # every question once: none sent again by lm-eval
    doc = load_result(tmp_path)
    assert doc["eval"]["requests"]["total"] == 40
    assert doc["eval"]["requests"]["completed"] == 40
    assert doc["warnings"] == []
    samples = load_samples(tmp_path)
    assert [s["doc_id"] for s in samples] == list(range(40))
    assert all(s["filters"]["strict-match"]["correct"] for s in samples)


def test_answers_to_the_bodies_being_sent_come_from_that_dispatch(tmp_path):
    requests = _requests(6)
    with FakeEngine(EngineBehaviour(max_model_len=4096)) as engine:
        sent = _dispatch(engine)
        sent.start(requests)
        texts = sent.answers(requests)
        total = engine.total

    assert total == 6  # each question once: lm-eval took the answers already under way
    assert len(texts) == 6 and all("####" in text for text in texts)
    assert sent.replies.counts.completed == 6 and sent.warnings == []


def test_a_dispatch_of_other_bodies_is_discarded_and_lm_evals_are_sent(tmp_path):
    early = _requests(6)
    wanted = _requests(6, max_tokens=200)  # another budget: no body is the same
    with FakeEngine(EngineBehaviour(max_model_len=4096, latency_s=0.2)) as engine:
        sent = _dispatch(engine)
        sent.start(early)
        texts = sent.answers(wanted)
        budgets = [r.body["max_tokens"] for r in engine.requests]  # type: ignore[index]

    assert len(texts) == 6 and all("####" in text for text in texts)
    assert budgets.count(200) == 6  # lm-eval's bodies, every one sent
    assert sent.replies.counts.total == 6 and sent.replies.counts.completed == 6
    (warning,) = sent.warnings
    assert "sent before lm-eval asked were discarded" in warning
    assert "differ from lm-eval's (6 of 6)" in warning


def test_halting_stops_the_sending_at_once(tmp_path: Path):
    requests = _requests(40)
    with FakeEngine(EngineBehaviour(max_model_len=4096, latency_s=0.5)) as engine:
        sent = _dispatch(engine)
        sent.start(requests)
        assert engine.wait_until(lambda fake: fake.in_flight == 4, timeout=10)
        sent.halt()
        after = engine.total

    assert after <= 8  # the 4 in flight, and at most the next 4 as they ended
    assert sent.replies.counts.completed < 40
