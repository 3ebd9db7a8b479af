"""InlineThinking (evalgate.eval.replies): the part of an answer scored when its thinking is
written into it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalgate.eval.replies import InlineThinking, Split
from tests.conftest import (
    THINKING_FIELDS,
    THINKING_QUESTIONS,
    THINKING_RUN,
    load_result,
    load_samples,
    run_args,
)
from tests.fakeengine import CHAT_PATH, FILLER, EngineBehaviour, FakeEngine, count_tokens

SPLITS = [
    # (case, markers, answer as sent, split)
    (
        "closed: only what follows the end marker",
        InlineThinking(),
        "<think>so #### 3</think> so #### 5",
        Split(" so #### 5", "<think>so #### 3</think>", ended=True),
    ),
    (
        "no opening marker (the template opened the block): what follows the end",
        InlineThinking(),
        "so #### 3\n</think>\n#### 5",
        Split("\n#### 5", "so #### 3\n</think>", ended=True),
    ),
    (
        "several end markers: after the last",
        InlineThinking(),
        "<think>a</think>b<think>c</think>#### 5",
        Split("#### 5", "<think>a</think>b<think>c</think>", ended=True),
    ),
    (
        "cut before the end marker: no answer at all",
        InlineThinking(),
        "<think>\nso far #### 3 and",
        Split("", "<think>\nso far #### 3 and", ended=False),
    ),
    ("no thinking: unchanged", InlineThinking(), "#### 5", Split("#### 5", None, ended=True)),
    (
        "no end marker set: the whole answer, as the harness scores it",
        InlineThinking(end=""),
        "<think>#### 3</think>#### 5",
        Split("<think>#### 3</think>#### 5", None, ended=True),
    ),
    (
        "no start marker set: an unended block is not recognised",
        InlineThinking(start=""),
        "<think>#### 3",
        Split("<think>#### 3", None, ended=True),
    ),
    (
        "other markers",
        InlineThinking("<|begin_of_thought|>", "<|end_of_thought|>"),
        "<|begin_of_thought|>#### 3<|end_of_thought|>#### 5",
        Split("#### 5", "<|begin_of_thought|>#### 3<|end_of_thought|>", ended=True),
    ),
]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("markers", "text", "expected"), [c[1:] for c in SPLITS], ids=[c[0] for c in SPLITS]
)
def test_split(markers, text, expected):
    assert markers.split(text) == expected


# Reasoning models: the thinking kept, answers cut while thinking counted, and the request options
# that steer thinking sent in every request.


def _probed_once_streamed(engine: FakeEngine, doc: dict[str, object]) -> None:
    """The run's one streamed request, the probe, was answered and accepted."""
    streamed = [r for r in engine.requests if r.stream]
    assert [(r.path, r.status) for r in streamed] == [(CHAT_PATH, 200)]
    assert doc["probe"] == doc["probe"] | {"outcome": "ok", "status_code": 200}


@pytest.mark.loopback
@THINKING_FIELDS
def test_answers_cut_while_thinking_are_counted_kept_and_warned_about(cli, tmp_path, field):
    behaviour = EngineBehaviour(thinking=field, endless_thinking=0.3)
    with FakeEngine(behaviour) as engine:
        result = cli(*run_args(engine.url, tmp_path, max_truncated_rate="0.2", **THINKING_RUN))
    assert result.code == 1, result.text
    doc = load_result(tmp_path)
    _probed_once_streamed(engine, doc)
    budget = doc["eval"]["max_tokens"]
    requests = doc["eval"]["requests"]
    assert requests["cut_while_thinking"] == 30
    assert requests["from_reasoning"] == 30
    assert requests["truncated"] == 30 and requests["empty"] == 0
    thought = 6 * count_tokens(FILLER)  # the 40 tokens asked, in whole filler sentences
    assert requests["reasoning_tokens"] == {
        "answers": THINKING_QUESTIONS,
        "median": float(thought),
        "p95": float(budget),
        "max": budget,
    }
    warning = (
        f"30 answer(s) ran out of the {budget}-token budget while still thinking (30.0% of 100: "
        "no content, finish_reason length; scored from their reasoning): holding them takes a "
        f"budget above {budget} tokens, e.g. --max-tokens {2 * budget}"
    )
    assert any(w.startswith(warning) for w in doc["warnings"]), doc["warnings"]
    assert (
        "30.0% of answers were truncated or empty, over --max-truncated-rate 20.0%"
        in (doc["reason"])
    )
    samples = load_samples(tmp_path)
    assert all(s["reasoning"] and s["reasoning"].startswith(FILLER) for s in samples)
    cut = [s for s in samples if s["answer_field"] == field]
    assert len(cut) == 30
    assert all(s["finish_reason"] == "length" and s["reasoning_tokens"] == budget for s in cut)
    answered = [s for s in samples if s["answer_field"] == "content"]
    assert all(s["response"].rstrip().split("\n")[-1].startswith("#### ") for s in answered)
    assert all(s["reasoning_tokens"] == thought for s in answered)


@pytest.mark.loopback
@THINKING_FIELDS
def test_thinking_that_ends_in_time_passes_and_keeps_the_reasoning(cli, tmp_path, field):
    with FakeEngine(EngineBehaviour(thinking=field)) as engine:
        result = cli(*run_args(engine.url, tmp_path, **THINKING_RUN))
    assert result.code == 0, result.text
    doc = load_result(tmp_path)
    _probed_once_streamed(engine, doc)
    requests = doc["eval"]["requests"]
    assert requests["cut_while_thinking"] == 0 and requests["from_reasoning"] == 0
    assert requests["reasoning_tokens"]["answers"] == THINKING_QUESTIONS
    samples = load_samples(tmp_path)
    assert len(samples) == THINKING_QUESTIONS
    assert all(
        s["reasoning"].startswith(FILLER) and s["answer_field"] == "content" for s in samples
    )


@pytest.mark.loopback
def test_a_plain_model_reports_no_reasoning(engine, cli, tmp_path):
    assert cli(*run_args(engine.url, tmp_path, **THINKING_RUN)).code == 0
    requests = load_result(tmp_path)["eval"]["requests"]
    assert requests["reasoning_tokens"] is None and requests["cut_while_thinking"] == 0
    assert requests["inline_thinking"] == 0  # no thinking: the whole answer, unchanged
    samples = load_samples(tmp_path)
    assert all(s["reasoning"] is None for s in samples)
    assert all(s["response"].startswith("Janet") for s in samples if s["doc_id"] == 0)


INLINE = pytest.mark.parametrize("api", ["chat", "completions"])


def failed_thinking_inline(cli: Any, out: Path, behaviour: EngineBehaviour, **options: object):
    """result.json of a run that fails (exit 1) against an engine writing its thinking into
    every answer (`behaviour`)."""
    with FakeEngine(behaviour) as engine:
        result = cli(*run_args(engine.url, out, **options, **THINKING_RUN))
    assert result.code == 1, result.text
    doc = load_result(out)
    assert doc["eval"]["requests"]["inline_thinking"] == THINKING_QUESTIONS
    return doc


@pytest.mark.loopback
@INLINE
def test_thinking_in_the_answer_is_not_scored_only_what_follows_its_end(cli, tmp_path, api):
    """`<think> … #### 18 …</think> … #### 19`: the answer is 19, whatever the scratchpad says.
    Every answer is wrong (accuracy 0) while every scratchpad holds the right number."""
    behaviour = EngineBehaviour(inline_thinking="open", accuracy=0.0)
    doc = failed_thinking_inline(cli, tmp_path, behaviour, api=api)
    requests = doc["eval"]["requests"]
    assert requests["cut_while_thinking"] == 0 and requests["truncated"] == 0
    assert all(s["value"] == 0.0 for s in doc["scores"])
    for sample in load_samples(tmp_path):
        assert not sample["response"].startswith(("<think>", " <think>"))
        assert sample["response"].lstrip().split("\n")[-1].startswith("#### ")
        assert sample["reasoning"].lstrip().startswith("<think>\nA first guess: #### ")
        assert sample["reasoning"].endswith("</think>")
        assert sample["answer_field"] == ("content" if api == "chat" else "text")
        assert not any(f["correct"] for f in sample["filters"].values())


@pytest.mark.loopback
def test_an_end_marker_without_its_start_scores_what_follows(cli, tmp_path):
    """A chat template that opens the block in the prompt: the answer holds only `</think>`."""
    behaviour = EngineBehaviour(inline_thinking="prompt", accuracy=0.5)
    doc = failed_thinking_inline(cli, tmp_path, behaviour)  # half right: below the threshold
    assert all(s["value"] == 0.5 for s in doc["scores"])
    samples = load_samples(tmp_path)
    assert all("</think>" not in s["response"] for s in samples)
    assert all(s["reasoning"].startswith("A first guess: #### ") for s in samples)


@pytest.mark.loopback
@INLINE
def test_an_answer_cut_inside_its_thinking_scores_nothing(cli, tmp_path, api):
    """30 of 100 answers run out of budget before `</think>`: scored from their scratchpad
    (as a whole-text scorer does) every answer would be right and the run would pass."""
    behaviour = EngineBehaviour(inline_thinking="open", endless_thinking=0.3)
    doc = failed_thinking_inline(cli, tmp_path, behaviour, api=api)
    requests = doc["eval"]["requests"]
    assert requests["cut_while_thinking"] == 30 and requests["truncated"] == 30
    assert requests["empty"] == 0 and requests["from_reasoning"] == 0
    assert all(s["value"] == 0.7 for s in doc["scores"])
    budget = doc["eval"]["max_tokens"]
    warning = (
        f"30 answer(s) ran out of the {budget}-token budget while still thinking (30.0% of 100: "
        "thinking written into the answer, finish_reason length before its end marker; "
        "scored as no answer)"
    )
    assert any(w.startswith(warning) for w in doc["warnings"]), doc["warnings"]
    cut = [s for s in load_samples(tmp_path) if s["finish_reason"] == "length"]
    assert len(cut) == 30
    for sample in cut:
        assert sample["response"] == ""
        assert "</think>" not in sample["reasoning"]
        assert {f["extracted"] for f in sample["filters"].values()} == {"[invalid]"}


@pytest.mark.loopback
def test_an_empty_end_marker_scores_the_whole_answer_as_the_harness_does(cli, tmp_path):
    """--think-end-marker '': the harness's way, so the scratchpads of the cut answers count."""
    behaviour = EngineBehaviour(inline_thinking="open", endless_thinking=0.3)
    with FakeEngine(behaviour) as engine:
        result = cli(*run_args(engine.url, tmp_path, think_end_marker="", **THINKING_RUN))
    assert result.code == 0, result.text
    doc = load_result(tmp_path)
    requests = doc["eval"]["requests"]
    assert requests["inline_thinking"] == 0 and requests["cut_while_thinking"] == 0
    assert requests["truncated"] == 30
    assert all(s["value"] == 1.0 for s in doc["scores"])
    assert all(s["response"].startswith("<think>") for s in load_samples(tmp_path))


@pytest.mark.loopback
def test_a_resumed_run_takes_the_thinking_apart_again(cli, tmp_path):
    """The journal keeps each answer as it came: resumed, it is scored and counted alike."""
    behaviour = EngineBehaviour(inline_thinking="open", endless_thinking=0.3)
    with FakeEngine(behaviour) as engine:
        assert cli(*run_args(engine.url, tmp_path, **THINKING_RUN)).code == 1
        first = load_result(tmp_path)
        engine.clear()
        result = cli(*run_args(engine.url, tmp_path, "--resume", "--overwrite", **THINKING_RUN))
        asked = [r for r in engine.requests if not r.stream]
    assert result.code == 1, result.text
    assert asked == []  # every answer came from the journal
    again = load_result(tmp_path)
    assert again["eval"]["requests"]["resumed"] == THINKING_QUESTIONS
    for key in ("inline_thinking", "cut_while_thinking", "truncated"):
        assert again["eval"]["requests"][key] == first["eval"]["requests"][key]
    assert again["scores"] == first["scores"]
