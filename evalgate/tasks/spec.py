"""The GSM8K task lm-eval runs: evalgate's own task files, pointed at the chosen data.

``tasks/gsm8k_evalgate_chat.yaml`` is the benchmark harness's protocol (its gsm8k task as its
job runs it: chat turns, its instruction line, its stops, top_p 1, the last ``#### n`` scored),
``tasks/gsm8k_evalgate_completions.yaml`` lm-eval's standard gsm8k prompt. Both are read here and
handed to lm-eval as a config dict, with the data set's location filled in; lm-eval's own index
of 14k built-in task files is never built.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from evalgate.tasks.dataset import GSM8K_TEST_SIZE, HUB_NAME, HUB_PATH, Dataset

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


def load_task(api: str) -> TaskSpec:
    """Read the task file for an API (chat or completions)."""
    path = tasks_dir() / f"gsm8k_evalgate_{api}.yaml"
    raw = path.read_bytes()
    return TaskSpec(api=api, config=yaml.safe_load(raw), sha256=hashlib.sha256(raw).hexdigest())


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


def render(template: str, doc: dict[str, Any]) -> str:
    """Substitute ``{{question}}`` and ``{{answer}}``."""
    return template.replace("{{question}}", str(doc["question"])).replace(
        "{{answer}}", str(doc["answer"])
    )


def lm_eval_config(spec: TaskSpec, dataset: Dataset) -> dict[str, Any]:
    """The config dict given to lm-eval, loading the data from where the Dataset says."""
    config = dict(spec.config)
    config["doc_to_text"] = Template(str(spec.config["doc_to_text"]))
    config["doc_to_target"] = Template(str(spec.config["doc_to_target"]))
    if dataset.source == "hub":
        config["dataset_path"] = HUB_PATH
        config["dataset_name"] = HUB_NAME
        config.pop("dataset_kwargs", None)
    else:
        config["dataset_path"] = "json"
        config["dataset_kwargs"] = {
            "data_files": {split: str(path.resolve()) for split, path in dataset.files.items()}
        }
    return config
