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
from evalgate.tasks.spec import (
    FEWSHOT_SEED,
    Prompt,
    build_prompts,
    lm_eval_config,
    load_task,
    longest_candidates,
    tasks_dir,
)
from tests.conftest import FAST, deadline, load_result, load_samples
from tests.fakeengine import EngineBehaviour, FakeEngine, RequestRecord
from tests.tasks.task_files import cli_run_task, edited

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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


# tasks.prompts and tasks.spec: the prompts evalgate builds are the ones lm-eval sends.
#
# The probe measures the longest prompt from evalgate's own builder, so the builder must match
# lm-eval exactly. lm-eval is run here with a recording model that answers "#### 0" and keeps
# every context it is given; chat contexts are the JSON of the message list.

LIMIT = 40


@pytest.fixture(scope="module")
def dataset():
    return load_dataset()


def lm_eval_contexts(api: str, dataset: Any) -> list[tuple[int, str]]:
    """(doc_id, context) for each request lm-eval 0.4.13 makes on evalgate's task."""
    from lm_eval import simple_evaluate
    from lm_eval.api.model import LM
    from lm_eval.tasks import TaskManager

    class Recorder(LM):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[tuple[int, str]] = []

        @property
        def tokenizer_name(self) -> str:
            return "recorder"

        def apply_chat_template(
            self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True
        ) -> str:
            return json.dumps(chat_history, ensure_ascii=False)

        def loglikelihood(self, requests):
            raise NotImplementedError

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

        def generate_until(self, requests, disable_tqdm: bool = False):
            for instance in requests:
                self.seen.append((instance.doc_id, instance.args[0]))
            return ["#### 0"] * len(requests)

    recorder = Recorder()
    simple_evaluate(
        model=recorder,
        tasks=[lm_eval_config(load_task(api), dataset)],
        limit=LIMIT,
        apply_chat_template=api == "chat",
        fewshot_as_multiturn=True,
        task_manager=TaskManager(include_path=str(tasks_dir()), include_defaults=False),
        fewshot_random_seed=FEWSHOT_SEED,
    )
    return recorder.seen


@pytest.fixture(scope="module", params=["chat", "completions"])
def recorded(request, dataset):
    api = request.param
    return api, lm_eval_contexts(api, dataset)


@pytest.mark.loopback
def test_prompts_are_exactly_lm_evals(recorded, dataset):
    api, contexts = recorded
    ours = {p.doc_id: p for p in build_prompts(load_task(api), dataset.test, dataset.train, LIMIT)}

    assert sorted(doc_id for doc_id, _ in contexts) == list(range(LIMIT))
    for doc_id, context in contexts:
        prompt = ours[doc_id]
        if api == "chat":
            assert prompt.text is None
            assert list(prompt.messages) == json.loads(context), f"doc {doc_id}"
        else:
            assert prompt.messages is None
            assert prompt.text == context, f"doc {doc_id}"


@pytest.mark.unit
def test_chat_prompt_shape(dataset):
    spec = load_task("chat")
    prompt = build_prompts(spec, dataset.test, dataset.train, 1)[0]

    roles = [m["role"] for m in prompt.messages]
    # The benchmark harness's layout: alternating turns, no system turn, its instruction line.
    assert roles == ["user", "assistant"] * spec.num_fewshot + ["user"]
    assert prompt.messages[-1]["content"] == (
        f"Question: {dataset.test[0]['question']}\nEnd your response with the answer on the "
        "last line, formatted as: #### [number]\nAnswer:"
    )
    assert "#### " in prompt.messages[1]["content"]


@pytest.mark.unit
def test_completions_prompt_shape(dataset):
    spec = load_task("completions")
    prompt = build_prompts(spec, dataset.test, dataset.train, 1)[0]

    assert prompt.text.count("Question: ") == spec.num_fewshot + 1
    assert prompt.text.count("\n\n") >= spec.num_fewshot
    assert prompt.text.endswith(f"Question: {dataset.test[0]['question']}\nAnswer:")


@pytest.mark.unit
@pytest.mark.parametrize(("limit", "count"), [(1, 1), (LIMIT, LIMIT), (None, 1319), (5000, 1319)])
def test_limit_is_respected(dataset, limit, count):
    prompts = build_prompts(load_task("completions"), dataset.test, dataset.train, limit)

    assert [p.doc_id for p in prompts] == list(range(count))


@pytest.mark.unit
def test_shots_are_drawn_per_question(dataset):
    prompts = build_prompts(load_task("chat"), dataset.test, dataset.train, 3)

    first_shots = {p.messages[1]["content"] for p in prompts}
    assert len(first_shots) == 3


@pytest.mark.unit
def test_same_seed_same_prompts(dataset):
    spec = load_task("chat")

    assert build_prompts(spec, dataset.test, dataset.train, 10) == build_prompts(
        spec, dataset.test, dataset.train, 10
    )


def text_prompt(doc_id: int, size: int) -> Prompt:
    return Prompt(doc_id, None, "x" * size)


def chat_prompt(doc_id: int, *sizes: int) -> Prompt:
    return Prompt(doc_id, tuple({"role": "user", "content": "y" * s} for s in sizes), None)


LONGEST = [
    # (case, prompts, count, doc_ids expected, longest first)
    (
        "top three of five",
        [text_prompt(i, s) for i, s in enumerate([5, 50, 7, 49, 48])],
        3,
        [1, 3, 4],
    ),
    ("count larger than the list", [text_prompt(0, 1), text_prompt(1, 2)], 3, [1, 0]),
    ("one", [text_prompt(0, 10), text_prompt(1, 30), text_prompt(2, 20)], 1, [1]),
    (
        "ties keep the eval's order",
        [text_prompt(0, 5), text_prompt(1, 9), text_prompt(2, 9)],
        2,
        [1, 2],
    ),
    (
        "chat sums every turn",
        [chat_prompt(0, 10, 10, 10), chat_prompt(1, 25), chat_prompt(2, 29)],
        2,
        [0, 2],
    ),
    ("empty", [], 3, []),
]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("prompts", "count", "doc_ids"),
    [case[1:] for case in LONGEST],
    ids=[case[0] for case in LONGEST],
)
def test_longest_candidates(prompts, count, doc_ids):
    assert [p.doc_id for p in longest_candidates(prompts, count)] == doc_ids


@pytest.mark.unit
def test_longest_candidates_on_the_real_eval(dataset):
    prompts = build_prompts(load_task("chat"), dataset.test, dataset.train)

    found = longest_candidates(prompts)

    assert len(found) == 3
    assert found[0].chars == max(p.chars for p in prompts)
    assert found[0].chars >= found[1].chars >= found[2].chars


@pytest.mark.unit
def test_task_templates_render_exactly_as_lm_evals_jinja():
    """evalgate hands lm-eval its templates as plain substitutions (lm-eval would compile the
    jinja string 22k times a run); they must give the same text for every question."""
    from lm_eval.utils import apply_template

    from evalgate.tasks.dataset import load_dataset
    from evalgate.tasks.spec import Template, load_task

    data = load_dataset()
    for api in ("chat", "completions"):
        spec = load_task(api)
        for key in ("doc_to_text", "doc_to_target"):
            template = Template(str(spec.config[key]))
            for doc in [*data.test, *data.train[:500]]:
                assert template(doc) == apply_template(template.text, doc)


# Shots drawn from the split a task file asks are the prompts lm-eval sends.


@pytest.mark.loopback
def test_shots_drawn_from_the_split_asked_are_the_prompts_lm_eval_sends(cli, engine, tmp_path):
    done = cli_run_task(
        cli, engine, tmp_path, edited("fewshot_split: train", "fewshot_split: test")
    )

    assert done.code in (0, 1), done.err
    assert "prompts differ" not in done.err and "please report" not in done.err
