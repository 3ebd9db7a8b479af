"""tasks.prompts and tasks.spec: the prompts evalgate builds are the ones lm-eval sends.

The probe measures the longest prompt from evalgate's own builder, so the builder must match
lm-eval exactly. lm-eval is run here with a recording model that answers "#### 0" and keeps
every context it is given; chat contexts are the JSON of the message list.
"""

from __future__ import annotations

import json
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
