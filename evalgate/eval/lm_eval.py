"""Running lm-eval in-process on evalgate's task, and reading its answer; the model it evaluates
(GateLM) turns each of its requests into the body the engine receives (generation_body, the
probe's builder too), answered by the run's Dispatch. lm-eval is imported here only, when an
eval runs: `--help`, `context`, `probe` and `verify` never pay for it.
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from lm_eval.api.model import LM

from evalgate import scrub
from evalgate.engine.client import generation_body
from evalgate.errors import AbortedError, EvalFailedError
from evalgate.eval.dispatch import Dispatch, Request
from evalgate.evidence.model import Answer, Reply, Sample, Score
from evalgate.tasks.dataset import Dataset, reference_answer
from evalgate.tasks.spec import FEWSHOT_SEED, TaskSpec, lm_eval_config, stop_sequences, tasks_dir

_NOT_SENT = frozenset({"until", "do_sample", "temperature", "max_gen_toks", "max_tokens"})
"""Generation settings lm-eval consumes itself; the task's others (top_p) go into the body."""


class GateLM(LM):  # type: ignore[misc]  # lm-eval's LM is untyped
    def __init__(self, *, dispatch: Dispatch, sampling: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.dispatch = dispatch
        self.sampling = dict(sampling or {})
        """The task's temperature and other generation settings (TaskSpec.sampling)."""

    # -- what lm-eval asks of a chat-capable API model ----------------------------------------
    @property
    def tokenizer_name(self) -> str:
        return "engine"

    def apply_chat_template(
        self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True
    ) -> str:
        """Keep the turns as JSON: the engine applies the model's own chat template."""
        return json.dumps(chat_history, ensure_ascii=False)

    def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
        raise NotImplementedError("evalgate's tasks only generate")

    def loglikelihood_rolling(self, requests: list[Any]) -> list[float]:
        raise NotImplementedError("evalgate's tasks only generate")

    # -- generation ---------------------------------------------------------------------------
    def _request(self, instance: Any) -> Request:
        """The body lm-eval's local-*-completions model sends (generation_body: what it holds)."""
        context, gen_kwargs = instance.args
        # The task file's own values, as written (lm-eval turns a temperature of 0 into 0.0;
        # the harness's job overrides it with its gen_kwargs, and the engine receives 0).
        told = {"temperature": gen_kwargs.get("temperature", 0)}
        told |= {k: v for k, v in gen_kwargs.items() if k not in _NOT_SENT} | self.sampling
        replies = self.dispatch.replies
        chat = replies.api == "chat"
        body = generation_body(
            api=replies.api,
            model=replies.model,
            max_tokens=replies.max_tokens,
            stop=stop_sequences(gen_kwargs.get("until")),
            sampling=told,
            messages=json.loads(context) if chat else None,
            prompt=None if chat else context,
        )
        return Request.of(int(instance.doc_id), body, dict(instance.doc))

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        return self.dispatch.answers([self._request(instance) for instance in requests])


@dataclass(frozen=True)
class Evaluation:
    """lm-eval's scores, its raw results, and one record per question."""

    scores: tuple[Score, ...]
    raw: dict[str, Any]
    samples: list[Sample]


def extract_scores(task: str, results: dict[str, Any], n: int) -> tuple[Score, ...]:
    """Every metric,filter score of `task` in lm-eval's results, with its stderr (None when
    lm-eval says "N/A"), each over `n` questions."""
    found = []
    for key, value in results.get(task, {}).items():
        numeric = isinstance(value, int | float)
        if not numeric or "," not in key or key.startswith(("alias", "name")) or "_stderr" in key:
            continue
        metric, flt = key.split(",", 1)
        stderr = results[task].get(f"{metric}_stderr,{flt}")
        found.append(
            Score(
                task=task,
                metric=metric,
                filter=flt,
                value=float(value),
                stderr=float(stderr) if isinstance(stderr, int | float) else None,
                n=n,
            )
        )
    return tuple(found)


def _samples(raw_samples: list[dict[str, Any]], answers: dict[int, Reply]) -> list[Sample]:
    """One Sample per question: lm-eval's records (one per doc and filter) joined with the
    answer evalgate received for it (or the error saying it received none)."""
    none = Reply(
        doc_id=0, prompt_sha256="", response=None, finish_reason=None, error="no answer recorded"
    )
    docs: dict[int, dict[str, Any]] = {}
    filters: dict[int, dict[str, Answer]] = {}
    for record in raw_samples:
        doc_id = int(record["doc_id"])
        docs.setdefault(doc_id, record)
        extracted = (record.get("filtered_resps") or [""])[0]  # one per request: one asked
        filters.setdefault(doc_id, {})[str(record.get("filter"))] = Answer(
            extracted=scrub.fragment(str(extracted)),  # scored as sent, kept without a secret
            correct=float(record.get("exact_match", 0.0)) == 1.0,
        )
    samples = []
    first_asked: dict[str, int] = {}
    for doc_id in sorted(docs):
        record = docs[doc_id]
        doc = record.get("doc") or {}
        question = str(doc.get("question", ""))
        # A task asking each question several times (GPQA) numbers the repeats; they are told
        # apart by the question's text: two questions of the same text would be taken for one,
        # which only makes compare's statistics more cautious.
        try:
            repeat = None if doc.get("repeat_id") is None else int(doc["repeat_id"])
        except (TypeError, ValueError):
            repeat = None
        reply = answers.get(doc_id) or msgspec.structs.replace(none, doc_id=doc_id)
        samples.append(
            Sample(
                **msgspec.structs.asdict(reply),
                question=question,
                target=reference_answer(str(doc.get("answer", record.get("target", "")))),
                filters=filters[doc_id],
                cluster=None if repeat is None else first_asked.setdefault(question, doc_id),
                repeat=repeat,
            )
        )
    return samples


def _git_hash() -> str | None:
    """What lm-eval records as git_hash (the working directory's commit), without the
    "fatal: not a git repository" its own `git describe` prints outside a checkout."""
    try:
        done = subprocess.run(
            ["git", "describe", "--always"],  # noqa: S607  # lm-eval's own command
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def prefix_result(result: Evaluation, doc_ids: Sequence[int]) -> Evaluation:
    """The result over only `doc_ids` (the questions an early-stopped run read): those samples,
    and each score recomputed over them as lm-eval computes a mean and its standard error."""
    keep = set(doc_ids)
    samples = [sample for sample in result.samples if sample.doc_id in keep]
    n = len(samples)
    scores = []
    for score in result.scores:
        right = sum(
            bool(s.filters[score.filter].correct) for s in samples if score.filter in s.filters
        )
        value = right / n if n else 0.0
        stderr = math.sqrt(value * (1 - value) / (n - 1)) if n > 1 else None
        scores.append(msgspec.structs.replace(score, value=value, stderr=stderr, n=n))
    return Evaluation(tuple(scores), {}, samples)


def sandbox_templates() -> None:
    """Give lm-eval's template rendering jinja2's sandbox: the task-file check admits only
    ``{{field}}`` templates, and this holds even for one that slipped past it."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment
    from lm_eval import utils

    if isinstance(utils.env, SandboxedEnvironment):
        return
    env = ImmutableSandboxedEnvironment(
        loader=utils.env.loader, undefined=utils.env.undefined, keep_trailing_newline=True
    )
    env.filters.update(utils.env.filters)  # lm-eval's regex_replace among them
    utils.env = env  # apply_template reads the module's env at each call


def run_eval(spec: TaskSpec, dataset: Dataset, lm: GateLM, limit: int | None) -> Evaluation:
    """simple_evaluate on evalgate's task with lm-eval's built-in task index off."""
    from lm_eval import evaluator, simple_evaluate
    from lm_eval.tasks import TaskManager

    sandbox_templates()
    evaluator.get_git_commit_hash = _git_hash  # lm-eval calls it by this module-level name

    for name in ("lm-eval", "lm_eval"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))
    try:
        output = simple_evaluate(
            model=lm,
            tasks=[lm_eval_config(spec, dataset)],
            limit=limit,
            apply_chat_template=spec.api == "chat",
            fewshot_as_multiturn=True,
            task_manager=TaskManager(include_path=str(tasks_dir()), include_defaults=False),
            fewshot_random_seed=FEWSHOT_SEED,
            log_samples=True,
        )
    except (EvalFailedError, AbortedError, KeyboardInterrupt):
        raise
    except Exception as exc:
        if isinstance(exc, OSError) and exc.filename is not None:
            raise  # the journal's disk refused a write: not lm-eval's fault
        raise EvalFailedError(
            f"lm-eval failed: {type(exc).__name__}: {exc}. Rerun with -v for its traceback."
        ) from exc
    if output is None:
        raise EvalFailedError("lm-eval returned no results (not rank 0?)")
    n = int(output.get("n-samples", {}).get(spec.name, {}).get("effective", 0))
    samples = _samples(output.get("samples", {}).get(spec.name, []), lm.dispatch.replies.answers)
    raw = {key: value for key, value in output.items() if key != "samples"}
    return Evaluation(extract_scores(spec.name, output["results"], n), raw, samples)
