"""One answer scored the moment it arrives, as lm-eval will score it after the eval: the
sequential test needs each verdict while the eval runs (docs/early-stop.md, "Read in dispatch
order").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evalgate.rules.verdict import GATED_METRIC
from evalgate.tasks.spec import TaskSpec, render

Filter = Callable[[str, dict[str, Any]], str]


def gated_filters(spec: TaskSpec) -> tuple[str, ...]:
    """The filters whose exact_match the gate reads, in the task file's order."""
    return tuple(str(entry["name"]) for entry in spec.config.get("filter_list", []))


class AnswerScorer:
    """Per filter: is this response right for this doc? (lm-eval's filters and exact_match.)"""

    def __init__(self, spec: TaskSpec) -> None:
        import lm_eval.filters  # noqa: F401 - importing it registers the filters
        from lm_eval.api.registry import get_filter, get_metric

        self._target = str(spec.config["doc_to_target"])
        self._pipelines = {
            str(entry["name"]): [
                get_filter(step["function"])(**{k: v for k, v in step.items() if k != "function"})
                for step in entry["filter"]
            ]
            for entry in spec.config.get("filter_list", [])
        }
        settings = next(m for m in spec.config["metric_list"] if m["metric"] == GATED_METRIC)
        self._metric = get_metric(GATED_METRIC)
        self._metric_kwargs = {
            key: value
            for key, value in settings.items()
            if key not in ("metric", "aggregation", "higher_is_better")
        }

    def __call__(self, doc: dict[str, Any], response: str) -> dict[str, bool]:
        """{filter: right} for one response."""
        gold = render(self._target, doc)
        found = {}
        for name, pipeline in self._pipelines.items():
            values: Any = [[response]]  # the filter's reading of the response
            for step in pipeline:
                values = list(step.apply(values, [doc]))
            score = self._metric(
                references=[gold], predictions=[str(values[0])], **self._metric_kwargs
            )
            found[name] = float(score[GATED_METRIC]) == 1.0
        return found
