"""`--api chat` is the benchmark harness's eval, request for request, and scored as it scores.

The harness runs lm-eval's `local-chat-completions` model with `--apply_chat_template` on its own
gsm8k task (REFERENCE.md §5). Here lm-eval is run in-process exactly so, with the harness's task
settings written out below (not evalgate's task file), against a loopback engine that records
every request body; then evalgate runs against the same engine. The two must send the same body
for every one of the 1319 questions. The bodies are compared as they arrived on the wire, so
this holds whatever builds them inside evalgate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.tasks.dataset import load_dataset
from tests.conftest import FAST, deadline, load_result, load_samples
from tests.fakeengine import EngineBehaviour, FakeEngine, RequestRecord

pytestmark = pytest.mark.loopback

CONTEXT = 9472
HARNESS_BUDGET = CONTEXT - 4096  # the harness's rule: ctx - 4096 when ctx > 4096

# The harness's utils/evals/gsm8k.yaml, as its job runs it (REFERENCE.md §5), pointed at the
# GSM8K copy evalgate ships (the same rows, in the same order, as openai/gsm8k).
HARNESS_TASK: dict[str, Any] = {
    "task": "gsm8k",
    "output_type": "generate_until",
    "training_split": "train",
    "fewshot_split": "train",
    "test_split": "test",
    "doc_to_text": "Question: {{question}}\nEnd your response with the answer on the last line, "
    "formatted as: #### [number]\nAnswer:",
    "doc_to_target": "{{answer}}",
    "metric_list": [
        {
            "metric": "exact_match",
            "aggregation": "mean",
            "higher_is_better": True,
            "ignore_case": True,
            "ignore_punctuation": False,
            "regexes_to_ignore": [",", "\\$", "(?s).*#### ", "\\.$"],
        }
    ],
    "generation_kwargs": {"until": ["</s>", "<|im_end|>"], "do_sample": False, "temperature": 0.0},
    "repeats": 1,
    "num_fewshot": 5,
    "filter_list": [
        {
            "name": "strict-match",
            "filter": [
                {
                    "function": "regex",
                    "group_select": -1,
                    "regex_pattern": "#### (\\-?[0-9\\.\\,]+)",
                },
                {"function": "take_first"},
            ],
        },
        {
            "name": "flexible-extract",
            "filter": [
                {
                    "function": "regex",
                    "group_select": -1,
                    "regex_pattern": "(-?[$0-9.,]{2,})|(-?[0-9]+)",
                },
                {"function": "take_first"},
            ],
        },
    ],
    "metadata": {"version": 3.0},
}


def harness_eval(engine: FakeEngine, limit: int | None) -> dict[str, Any]:
    """lm-eval as the harness's run_lm_eval invokes it (model_args and gen_kwargs as strings,
    parsed by lm-eval itself)."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    files = load_dataset().files
    task = HARNESS_TASK | {
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {k: str(v.resolve()) for k, v in files.items()}},
    }
    model_args = (
        f"model=fake-model,base_url={engine.root_url}/v1/chat/completions,api_key=EMPTY,"
        "eos_string=</s>,max_retries=5,num_concurrent=64,timeout=1800,tokenized_requests=False,"
        f"max_length={CONTEXT}"
    )
    output = simple_evaluate(
        model="local-chat-completions",
        model_args=model_args,
        tasks=[task],
        apply_chat_template=True,
        gen_kwargs=f"max_tokens={HARNESS_BUDGET},temperature=0,top_p=1",
        limit=limit,
        task_manager=TaskManager(include_defaults=False),
    )
    assert output is not None
    return dict(output)


def bodies_by_question(requests: list[RequestRecord]) -> dict[str, str]:
    """The eval's request bodies (the probe's streamed one aside), by question, as canonical
    JSON that tells 0 from 0.0."""
    found: dict[str, str] = {}
    for record in requests:
        assert record.body is not None and record.question is not None
        if record.body.get("stream"):
            continue
        assert record.question not in found, f"asked twice: {record.question[:60]}"
        found[record.question] = json.dumps(record.body, sort_keys=True, ensure_ascii=False)
    return found


def evalgate_run(cli: Any, engine: FakeEngine, out: Path, *extra: str) -> Any:
    return cli(
        "run",
        "--base-url",
        engine.url,
        "--model",
        "fake-model",
        "--eval-max-model-len",
        str(CONTEXT),
        "--budget-policy",
        "harness",
        "--num-concurrent",
        "64",
        "--output-dir",
        str(out),
        *FAST,
        "--min-samples",  # protocol, not statistics: the point estimate decides
        "0",
        *extra,
    )


def test_every_chat_body_is_the_harness_eval_body(cli, tmp_path):
    """All 1319 questions: messages (five shots as alternating turns, no system turn, the
    instruction line), model, max_tokens, temperature 0, top_p 1, the two stops and the seed."""
    with FakeEngine(EngineBehaviour(max_model_len=CONTEXT)) as engine, deadline(600, engine):
        harness = harness_eval(engine, limit=None)
        theirs = bodies_by_question(engine.requests)
        engine.clear()
        ran = evalgate_run(cli, engine, tmp_path)
        ours = bodies_by_question(engine.requests)
    assert ran.code == 0, ran.text
    assert len(theirs) == len(ours) == 1319
    assert ours.keys() == theirs.keys()
    differing = [q for q in theirs if ours[q] != theirs[q]]
    assert not differing, f"{len(differing)} bodies differ; first: {differing[0][:60]}"
    one = json.loads(next(iter(ours.values())))
    assert {k: v for k, v in one.items() if k != "messages"} == {
        "model": "fake-model",
        "max_tokens": HARNESS_BUDGET,
        "temperature": 0,
        "stop": ["</s>", "<|im_end|>"],
        "seed": 1234,
        "top_p": 1,
    }
    assert [m["role"] for m in one["messages"]] == ["user", "assistant"] * 5 + ["user"]
    # Scored alike: the harness's lm-eval and evalgate agree on both filters.
    doc = load_result(tmp_path)
    scores = {s["filter"]: s["value"] for s in doc["scores"]}
    lm_eval = harness["results"]["gsm8k"]
    assert (
        scores
        == {
            "strict-match": float(lm_eval["exact_match,strict-match"]),
            "flexible-extract": float(lm_eval["exact_match,flexible-extract"]),
        }
        == {"strict-match": 1.0, "flexible-extract": 1.0}
    )


def test_strict_match_takes_the_last_answer_line(cli, tmp_path):
    """An answer that first ends on a wrong `#### n`, then corrects itself: the last one is
    scored, as the harness's strict-match (group_select -1) does."""
    behaviour = EngineBehaviour(max_model_len=CONTEXT, second_thoughts=True)
    with FakeEngine(behaviour) as engine:
        ran = evalgate_run(cli, engine, tmp_path, "--limit", "20")
        answers = [r for r in engine.requests if not (r.body or {}).get("stream")]
    assert ran.code == 0, ran.text
    assert {s["filter"]: s["value"] for s in load_result(tmp_path)["scores"]} == {
        "strict-match": 1.0,
        "flexible-extract": 1.0,
    }
    samples = load_samples(tmp_path)
    assert len(answers) == len(samples) == 20
    for sample in samples:
        assert sample["response"].count("#### ") == 2
        assert sample["filters"]["strict-match"]["extracted"] == sample["target"]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_an_answer_in_the_reasoning_is_scored_from_it(cli, tmp_path, field):
    """A reasoning parser that leaves content null: the answer is taken from the reasoning
    field, as the harness's patch does, and samples.jsonl says which field answered."""
    with FakeEngine(EngineBehaviour(max_model_len=CONTEXT, answer_field=field)) as engine:
        ran = evalgate_run(cli, engine, tmp_path, "--limit", "10")
    assert ran.code == 0, ran.text
    doc = load_result(tmp_path)
    assert doc["eval"]["requests"]["empty"] == 0
    samples = load_samples(tmp_path)
    assert {s["answer_field"] for s in samples} == {field}
    assert all(s["filters"]["strict-match"]["correct"] for s in samples)


def test_completions_keeps_lm_evals_standard_prompt(cli, tmp_path, engine):
    """`--api completions` is lm-eval's own gsm8k: one text prompt, no instruction line, the
    "Question:" stop."""
    ran = cli(
        "run",
        "--base-url",
        engine.url,
        "--model",
        "fake-model",
        "--api",
        "completions",
        "--isl",
        "1024",
        "--osl",
        "512",
        "--limit",
        "5",
        "--min-samples",
        "0",
        "--output-dir",
        str(tmp_path),
        *FAST,
    )
    body = next(r.body for r in engine.requests if r.body and not r.body.get("stream"))
    assert ran.code == 0, ran.text
    assert "End your response" not in body["prompt"]
    assert body["prompt"].count("Question: ") == 6
    assert body["stop"] == ["Question:", "</s>", "<|im_end|>"]
    assert "top_p" not in body
    assert {s["answer_field"] for s in load_samples(tmp_path)} == {"text"}
