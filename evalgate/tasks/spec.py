"""The GSM8K task lm-eval runs: evalgate's own task files, pointed at the chosen data.

``tasks/gsm8k_evalgate_chat.yaml`` is the benchmark harness's protocol (its gsm8k task as its
job runs it: chat turns, its instruction line, its stops, top_p 1, the last ``#### n`` scored),
``tasks/gsm8k_evalgate_completions.yaml`` lm-eval's standard gsm8k prompt. Both are read here and
handed to lm-eval as a config dict, with the data set's location filled in; lm-eval's own index
of 14k built-in task files is never built.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from evalgate.errors import DatasetError, UsageError
from evalgate.tasks.dataset import GSM8K_TEST_SIZE, HUB_NAME, HUB_PATH, Dataset, load_dataset

FULL_SIZES = {"gsm8k": GSM8K_TEST_SIZE, "gpqa_diamond_cot_n_shot": 396, "swebench_lite": 300}
"""Each gated task's full test set (GPQA-diamond: 198 questions asked twice), by task family."""


def full_size(task: str) -> int:
    """A task's full test set, the default --min-samples for its scores (evalgate's
    gsm8k_evalgate_chat is gsm8k's; an unknown task gets GSM8K's)."""
    for name, size in FULL_SIZES.items():
        if task == name or task.startswith(name + "_"):
            return size
    return GSM8K_TEST_SIZE


FEWSHOT_SEED = 1234
"""lm-eval's default few-shot seed; evalgate pins it so two runs draw the same shots."""


@dataclass(frozen=True)
class TaskSpec:
    """One task file, parsed, with its digest for the protocol fingerprint."""

    api: str
    config: dict[str, Any]
    sha256: str

    @property
    def name(self) -> str:
        return str(self.config["task"])

    @property
    def num_fewshot(self) -> int:
        return int(self.config["num_fewshot"])

    @property
    def stop(self) -> list[str]:
        return list(self.config["generation_kwargs"]["until"])

    @property
    def sampling(self) -> dict[str, Any]:
        """What the task's generation settings put into each request body besides the stops:
        its temperature and the rest lm-eval passes on as they are (top_p)."""
        kwargs = self.config["generation_kwargs"]
        return {k: v for k, v in kwargs.items() if k not in ("until", "do_sample")}

    @property
    def version(self) -> str:
        return str(self.config.get("metadata", {}).get("version", ""))


def tasks_dir() -> Path:
    """The folder of evalgate's task files inside the installed package."""
    return Path(str(resources.files("evalgate.tasks")))


BUILT_IN = ("gsm8k", "gpqa_diamond_cot_n_shot")
"""The tasks --task names: evalgate's own task files."""


def load_task(api: str, task: str = "gsm8k") -> TaskSpec:
    """Read the task file for a task and an API (chat or completions)."""
    if task == "gsm8k":
        path = tasks_dir() / f"gsm8k_evalgate_{api}.yaml"
    elif task in BUILT_IN:
        path = tasks_dir() / f"{task}.yaml"
    else:
        return load_task_file(api, Path(task))
    raw = path.read_bytes()
    return TaskSpec(api=api, config=yaml.safe_load(raw), sha256=hashlib.sha256(raw).hexdigest())


def load_task_file(api: str, path: Path) -> TaskSpec:
    """A task the user names by its lm-eval YAML file: only generation tasks can be run."""
    if not path.is_file():
        raise UsageError(
            f"--task {str(path)!r} is neither a task evalgate knows ({', '.join(BUILT_IN)}) "
            "nor a task file. Name one of those, or the path of an lm-eval task YAML."
        )
    raw = path.read_bytes()
    try:
        config = yaml.load(raw, Loader=_TaskLoader)  # noqa: S506 - a loader that builds no objects
    except yaml.YAMLError as exc:
        raise UsageError(f"{path} is not valid YAML ({exc}). Fix the task file.") from exc
    if not isinstance(config, dict):
        raise UsageError(f"{path} is not an lm-eval task file (no mapping of task settings).")
    output_type = config.get("output_type", "generate_until")
    if output_type != "generate_until":
        raise UsageError(
            f"{path} is a {output_type} task (task {config.get('task')!r}): it scores the "
            "log-likelihood of each choice, which the engines' chat and completions APIs "
            "cannot report, so evalgate cannot run it. Use a generate_until version of the "
            "task (one that asks the model to write its answer)."
        )
    raise UsageError(
        f"{path} is a generate_until task (task {config.get('task')!r}); evalgate runs only its "
        f"own tasks ({', '.join(BUILT_IN)}) for now."
    )


class _TaskLoader(yaml.SafeLoader):
    """lm-eval's task files tag functions (``!function utils.process_docs``): read the tag as
    its text, so a file can be looked at without importing its code."""


_TaskLoader.add_constructor(
    "!function",
    lambda loader, node: str(loader.construct_scalar(node)),  # type: ignore[arg-type]
)


@dataclass(frozen=True)
class Template:
    """A task file's ``{{question}}``/``{{answer}}`` template as a plain function of the doc.

    lm-eval compiles a jinja template from its string on every call (22k compilations for one
    GSM8K run, seconds of CPU); these templates only substitute fields, so a substitution gives
    the same text (a test checks it against lm-eval's jinja on every question)."""

    text: str

    def __call__(self, doc: dict[str, Any]) -> str:
        return render(self.text, doc)

    def __str__(self) -> str:
        return self.text


_FIELD = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def render(template: str, doc: dict[str, Any]) -> str:
    """Substitute each ``{{field}}`` (``{{question}}``, ``{{Question}}``, ``{{A}}``) in one pass."""
    return _FIELD.sub(lambda match: str(doc[match.group(1)]), template)


def lm_eval_config(spec: TaskSpec, dataset: Dataset) -> dict[str, Any]:
    """The config dict given to lm-eval, loading the data from where the Dataset says."""
    config = dict(spec.config)
    config["doc_to_text"] = Template(str(spec.config["doc_to_text"]))
    config["doc_to_target"] = Template(str(spec.config["doc_to_target"]))
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


def load_data(task: str, dataset_dir: Path | None, *, hub: bool) -> Dataset:
    """The data set a task asks: GSM8K (shipped, a folder or the hub) or the user's GPQA."""
    from evalgate.tasks.gpqa import TASK as GPQA
    from evalgate.tasks.gpqa import load_gpqa

    if task == GPQA:
        if hub:
            raise DatasetError(
                f"{GPQA} cannot be loaded from the hub by evalgate (the data set is gated): "
                "give --dataset-dir instead of --dataset-hub."
            )
        return load_gpqa(dataset_dir)
    return load_dataset(dataset_dir, hub=hub)
