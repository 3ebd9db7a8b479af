"""The task lm-eval runs, evalgate's own task files (docs/run.md, 4) or the user's, handed to
lm-eval as a config dict pointed at the chosen data; and its prompts, built as lm-eval builds
them but without it, so the probe can send the longest one in seconds (a test holds them to
lm-eval's, and the eval checks that no prompt it sends is longer than the one probed).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evalgate.errors import DatasetError, UsageError
from evalgate.tasks.dataset import HUB_NAME, HUB_PATH, Dataset, load_dataset, load_file_data
from evalgate.tasks.taskfile import FIELD, load_task_file

Message = dict[str, str]


@dataclass(frozen=True)
class Prompt:
    """One eval prompt in the shape the API takes."""

    doc_id: int
    messages: tuple[Message, ...] | None
    """Chat turns (chat API)."""
    text: str | None
    """One prompt string (completions API)."""

    @property
    def chars(self) -> int:
        """Size in characters: what picks the candidates for the longest prompt."""
        if self.messages is not None:
            return sum(len(m["content"]) for m in self.messages)
        return len(self.text or "")


def build_prompt(
    spec: TaskSpec, doc_id: int, doc: dict[str, str], shots: Sequence[dict[str, str]]
) -> Prompt:
    """The prompt lm-eval sends for one question, given its few-shot examples."""
    description = render(str(spec.config.get("description") or ""), doc)
    question, answer = (Template(str(spec.config[key])) for key in ("doc_to_text", "doc_to_target"))
    if spec.api == "chat":
        messages: list[Message] = []
        if description:
            messages.append({"role": "system", "content": description})
        for shot in shots:
            messages.append({"role": "user", "content": question(shot)})
            messages.append({"role": "assistant", "content": answer(shot)})
        messages.append({"role": "user", "content": question(doc)})
        return Prompt(doc_id, tuple(messages), None)
    text = "".join(f"{question(shot)} {answer(shot)}\n\n" for shot in shots)
    return Prompt(doc_id, None, description + text + question(doc))


def build_prompts(
    spec: TaskSpec,
    test: Sequence[dict[str, str]],
    train: Sequence[dict[str, str]],
    limit: int | None = None,
) -> list[Prompt]:
    """Every prompt of the eval, in lm-eval's order (the first `limit` questions)."""
    rnd = random.Random(FEWSHOT_SEED)  # noqa: S311 - lm-eval's few-shot draw, not security
    docs = test[:limit] if limit is not None else test
    k = spec.num_fewshot
    pool = list(train)
    split = spec.config.get("fewshot_split")
    same = split is not None and split == spec.config.get("test_split")
    return [
        build_prompt(spec, i, doc, _shots(rnd, pool, k, doc if same else None))
        for i, doc in enumerate(docs)
    ]


def _shots(
    rnd: random.Random, pool: list[dict[str, str]], k: int, doc: dict[str, str] | None
) -> list[dict[str, str]]:
    """lm-eval's draw (ContextSampler.sample): `k` of the pool; when the shots come from the
    split asked (`doc` given), k + 1 less the doc itself, drawn again without it if fewer remain."""
    if k == 0 or doc is None:
        return rnd.sample(pool, k)
    shots = [shot for shot in rnd.sample(pool, k + 1) if shot != doc][:k]
    return shots if len(shots) == k else rnd.sample([s for s in pool if s != doc], k)


def longest_candidates(prompts: Sequence[Prompt], count: int = 3) -> list[Prompt]:
    """The few longest prompts by characters: the longest in tokens is among them in practice,
    and the probe measures each with the engine's tokenizer."""
    return sorted(prompts, key=lambda p: p.chars, reverse=True)[:count]


# The task.

FEWSHOT_SEED = 1234
"""lm-eval's default few-shot seed; evalgate pins it so two runs draw the same shots."""


def stop_sequences(until: Any) -> list[str]:
    """A task's `until` as the stops sent: one string is one stop, as lm-eval's models take it."""
    return [until] if isinstance(until, str) else list(until or [])


@dataclass(frozen=True)
class TaskSpec:
    """One task file, parsed, with its digest for the protocol fingerprint."""

    api: str
    config: dict[str, Any]
    sha256: str
    path: Path | None = None
    """The user's task file (--task FILE); None for evalgate's own."""

    @property
    def name(self) -> str:
        return str(self.config["task"])

    @property
    def num_fewshot(self) -> int:
        return int(self.config["num_fewshot"])

    @property
    def stop(self) -> list[str]:
        return stop_sequences(self.config["generation_kwargs"]["until"])

    @property
    def sampling(self) -> dict[str, Any]:
        """What the task's generation settings put into each request body besides the stops:
        its temperature and the rest lm-eval passes on as they are (top_p)."""
        kwargs = self.config["generation_kwargs"]
        return {k: v for k, v in kwargs.items() if k not in ("until", "do_sample")}

    @property
    def temperature(self) -> float:
        """The temperature every request carries: the task's, else 0 (engine/client.py)."""
        return float(self.sampling.get("temperature", 0))

    @property
    def version(self) -> str:
        return str(self.config.get("metadata", {}).get("version", ""))


def tasks_dir() -> Path:
    return Path(__file__).parent


BUILT_IN = ("gsm8k", "gpqa_diamond_cot_n_shot")
"""The tasks --task names: evalgate's own task files."""


def load_task(api: str, task: str = "gsm8k") -> TaskSpec:
    """Read the task file for a task and an API (chat or completions): evalgate's own, or the
    user's lm-eval YAML file, checked whole (tasks/taskfile.py)."""
    if task not in BUILT_IN:
        path = Path(task)
        config, raw = load_task_file(path)
        digest = hashlib.sha256(raw).hexdigest()
        return TaskSpec(api, _with_defaults(path, config), digest, path.resolve())
    name = f"gsm8k_evalgate_{api}" if task == "gsm8k" else task
    raw = (tasks_dir() / f"{name}.yaml").read_bytes()
    return TaskSpec(api=api, config=yaml.safe_load(raw), sha256=hashlib.sha256(raw).hexdigest())


def _with_defaults(path: Path, config: dict[str, Any]) -> dict[str, Any]:
    """A checked task file as evalgate runs it: local data resolved, lm-eval's defaults filled."""
    if "task" not in config:
        raise UsageError(f"{path} names no task (its `task:` key). Fix the task file.")
    files = config.get("dataset_kwargs", {}).get("data_files")
    if config.get("dataset_path") != "json" or not files:
        raise UsageError(
            f"{path}: its data must be local JSONL files (dataset_path: json and "
            "dataset_kwargs: {data_files: {test: FILE, train: FILE}}), not "
            f"{config.get('dataset_path')!r}. Point the task file at local copies."
        )
    config["dataset_kwargs"] = {
        "data_files": {split: str(path.parent / str(file)) for split, file in files.items()}
    }
    missing = [key for key in ("doc_to_text", "doc_to_target") if key not in config]
    if missing:
        raise UsageError(f"{path} has no {' or '.join(missing)}: say how a question is asked.")
    config.setdefault("num_fewshot", 0)
    config.setdefault("test_split", "test")  # lm-eval would ask the validation split instead
    config.setdefault("metric_list", [{"metric": "exact_match", "aggregation": "mean"}])
    kwargs = dict(config.get("generation_kwargs") or {"do_sample": False, "temperature": 0})
    kwargs.setdefault("until", [config.get("fewshot_delimiter", "\n\n")])
    config["generation_kwargs"] = kwargs
    return config


@dataclass(frozen=True)
class Template:
    """A task file's ``{{field}}`` template as a plain function of the doc: lm-eval compiles
    jinja on every call, and a substitution gives the same text (tested on every question)."""

    text: str

    def __call__(self, doc: dict[str, Any]) -> str:
        return render(self.text, doc)

    def __str__(self) -> str:
        return self.text


def render(template: str, doc: dict[str, Any]) -> str:
    """Substitute each ``{{field}}`` (``{{question}}``, ``{{Question}}``, ``{{A}}``) in one pass."""
    return FIELD.sub(lambda match: str(doc[match.group(1)]), template)


def lm_eval_config(spec: TaskSpec, dataset: Dataset) -> dict[str, Any]:
    """The config dict given to lm-eval (its index of 14k built-in task files is never built),
    loading the data from where the Dataset says."""
    config = dict(spec.config)
    config["doc_to_text"] = Template(str(spec.config["doc_to_text"]))
    config["doc_to_target"] = Template(str(spec.config["doc_to_target"]))
    if spec.path is not None:  # the user's task file: its own data files, as resolved
        return config
    if not dataset.train:  # docs evalgate built itself (GPQA): handed over as they are
        docs = list(dataset.test)
        config["custom_dataset"] = lambda **_: _as_datasets(docs)
        config.pop("dataset_kwargs", None)
    elif dataset.source == "hub":
        config["dataset_path"] = HUB_PATH
        config["dataset_name"] = HUB_NAME
        config.pop("dataset_kwargs", None)
    else:
        config["dataset_path"] = "json"
        config["dataset_kwargs"] = {
            "data_files": {split: str(path.resolve()) for split, path in dataset.files.items()}
        }
    return config


def _as_datasets(docs: list[dict[str, str]]) -> Any:
    import datasets

    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})


def load_data(
    task: str, dataset_dir: Path | None, *, hub: bool, spec: TaskSpec | None = None
) -> Dataset:
    """The data set a task asks: GSM8K (shipped, a folder or the hub), the user's GPQA, or what
    the user's task file names."""
    if spec is not None and spec.path is not None:
        return load_file_data(spec.config, spec.path, spec.num_fewshot)
    from evalgate.tasks.dataset import TASK as GPQA
    from evalgate.tasks.dataset import load_gpqa

    if task == GPQA:
        if hub:
            raise DatasetError(
                f"{GPQA} cannot be loaded from the hub by evalgate (the data set is gated): "
                "give --dataset-dir instead of --dataset-hub."
            )
        return load_gpqa(dataset_dir)
    return load_dataset(dataset_dir, hub=hub)
