"""evalgate.history.fit: the thresholds file fitted from recorded runs, read back by the thresholds
loader that --thresholds uses."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evalgate.history.fit import MIN_RUNS, RecordedRun, TooThin, differ, fit_thresholds, summary
from evalgate.schemas import validation_errors
from evalgate.thresholds import load_thresholds, parse_thresholds, resolve_floor

pytestmark = pytest.mark.unit

N = 1319
FILTERS = ("strict-match", "flexible-extract")


def runs(
    count: int, accuracy: float, *, seed: int, task: str = "gsm8k", **labels: str
) -> list[RecordedRun]:
    """`count` runs around `accuracy` (binomial noise only), both GSM8K filters a point apart."""
    made = []
    for right in np.random.default_rng(seed).binomial(N, accuracy, count).tolist():
        scores = {FILTERS[0]: (right - 13, N), FILTERS[1]: (right, N)}
        made.append(RecordedRun(task=task, scores=scores, **labels))
    return made


B200 = {"hardware": "b200", "framework": "vllm", "precision": "fp8", "kv_cache_dtype": "auto"}
MI355 = {"hardware": "mi355x", "framework": "sglang", "precision": "fp8", "kv_cache_dtype": "fp8"}


def written(tmp_path, fitted):
    """The fitted document written as a file and read back by the loader --thresholds uses."""
    path = tmp_path / "fitted.json"
    path.write_text(json.dumps(fitted.document, indent=2))
    return load_thresholds(path)


def test_the_fitted_file_is_one_the_thresholds_loader_accepts(tmp_path):
    history = [
        *runs(12, 0.95, seed=1, model_prefix="dsr1", model="deepseek-r1", **B200),
        *runs(9, 0.95, seed=2, model_prefix="dsr1", model="deepseek-r1", **MI355),
        *runs(7, 0.88, seed=3, model="my-org/new-model"),
    ]
    fitted = fit_thresholds(history, load_thresholds())
    assert validation_errors("thresholds", fitted.document) == []
    loaded = written(tmp_path, fitted)

    dsr1 = resolve_floor(loaded, "deepseek-r1", {"model_prefix": "dsr1", **B200})
    assert dsr1.matched == "prefix:dsr1"
    assert 0.91 < dsr1.value < 0.94  # the strict filter's mean is a point below 0.95
    new = resolve_floor(loaded, "my-org/new-model")
    assert new.matched == "model:my-org/new-model"
    assert 0.80 < new.value < 0.87  # below the 0.90 default: fitted to the model's own runs
    # the rest of the file in use carries over
    assert loaded.file.default == load_thresholds().file.default
    assert loaded.file.models["glm5"] == {"gsm8k": 0.94}


def test_the_summary_says_what_changed_from_the_file_in_use():
    history = runs(12, 0.95, seed=4, model_prefix="dsr1", **B200)
    fitted = fit_thresholds(history, load_thresholds())
    (change,) = fitted.changes
    assert (change.model, change.task, change.match) == ("dsr1", "gsm8k", {"model_prefix": "dsr1"})
    assert (change.before, change.before_from) == (0.91, "prefix:dsr1")
    assert change.after_from == "prefix:dsr1"
    assert change.after == change.fit.floor
    line = summary(fitted)[0]
    assert line.startswith(f"model_prefix=dsr1 gsm8k: 0.9100 (prefix:dsr1) -> {change.after:.4f}")
    assert "beta-binomial: 12 runs" in line


def test_a_model_too_thin_to_fit_says_so_and_keeps_its_floor(tmp_path):
    history = [
        *runs(MIN_RUNS - 2, 0.97, seed=5, model_prefix="glm5"),
        *runs(10, 0.95, seed=6, model_prefix="dsr1"),
    ]
    fitted = fit_thresholds(history, load_thresholds())
    thin = next(c for c in fitted.changes if c.model == "glm5")
    assert thin.fit == TooThin(MIN_RUNS - 2)
    assert (thin.before, thin.after) == (0.94, 0.94)
    lines = summary(fitted)
    assert any(
        line.startswith("model_prefix=glm5 gsm8k: 0.9400 (prefix:glm5) -> 0.9400 (prefix:glm5)")
        and f"too thin to fit: {MIN_RUNS - 2} runs, need {MIN_RUNS}" in line
        for line in lines
    )
    assert written(tmp_path, fitted).file.models["glm5"] == {"gsm8k": 0.94}


def test_groups_whose_runs_differ_get_overrides(tmp_path):
    history = [
        *runs(10, 0.96, seed=7, model_prefix="qwen3.5", **B200),
        *runs(10, 0.93, seed=8, model_prefix="qwen3.5", **MI355),
    ]
    fitted = fit_thresholds(history, load_thresholds())
    loaded = written(tmp_path, fitted)
    b200 = resolve_floor(loaded, "q", {"model_prefix": "qwen3.5", **B200})
    mi355 = resolve_floor(loaded, "q", {"model_prefix": "qwen3.5", **MI355})
    model = resolve_floor(loaded, "q", {"model_prefix": "qwen3.5", "hardware": "h100"})
    assert b200.matched.startswith("override[")
    assert mi355.matched.startswith("override[")
    # the model's floor, for a config not yet seen, spans both groups' runs: below either
    assert model.value < mi355.value < b200.value
    assert 0.92 < b200.value < 0.95  # the strict filter's mean is a point below: 0.95
    assert 0.88 < mi355.value < 0.92
    whys = [o.why for o in loaded.file.overrides]
    assert all(w.startswith("fitted: beta-binomial: 10 runs") for w in whys)
    assert len(whys) == 2


def test_groups_whose_runs_do_not_differ_share_the_models_floor():
    history = [
        *runs(10, 0.95, seed=9, model_prefix="gptoss", **B200),
        *runs(10, 0.95, seed=10, model_prefix="gptoss", **MI355),
    ]
    fitted = fit_thresholds(history, load_thresholds())
    assert fitted.document["overrides"] == []
    (change,) = fitted.changes
    assert change.note == "2 groups of runs, 0 with a floor of their own"


def test_differ_needs_runs_on_both_sides():
    low = runs(6, 0.90, seed=11, model="m")
    high = runs(6, 0.96, seed=12, model="m")
    assert differ(low, high)
    assert not differ(low, high[:1])
    assert not differ(low[:3], runs(6, 0.90, seed=13, model="m"))


def test_ix_policy_floors_at_the_default_of_the_file_in_use():
    history = runs(10, 0.88, seed=14, model_prefix="kimik2.5")
    fitted = fit_thresholds(history, load_thresholds(), policy="ix")
    (change,) = fitted.changes
    assert change.fit.floor == 0.90
    assert change.after == 0.90
    assert summary(fitted)[0].split("; ")[1].startswith("ix: 10 runs")


def test_the_floor_covers_both_filters():
    """The strict filter scores 13 answers below the flexible one: the floor is the strict's,
    fitted at half the tail (each filter must clear it)."""
    history = runs(10, 0.95, seed=15, model="m")
    fitted = fit_thresholds(history, load_thresholds())
    floor = fitted.document["models"]["m"]["gsm8k"]
    strict_mean = sum(r.scores["strict-match"][0] for r in history) / (10 * N)
    assert strict_mean - 0.03 < floor < strict_mean - 0.01
    assert fitted.changes[0].fit.tail == 0.005


def test_the_file_in_use_keeps_its_overrides_save_those_refitted():
    in_use = parse_thresholds(
        {
            "default": {"gsm8k": 0.90},
            "overrides": [
                {
                    "match": {"model_prefix": "dsr1", "hardware": "b200"},
                    "thresholds": {"gsm8k": 0.8},
                },
                {
                    "match": {"model_prefix": "x", **B200},
                    "thresholds": {"gsm8k": 0.5, "gpqa_diamond_cot_n_shot": 0.4},
                    "why": "old",
                },
            ],
        },
        "in use",
    )
    history = [
        *runs(10, 0.96, seed=16, model_prefix="x", **B200),
        *runs(10, 0.92, seed=17, model_prefix="x", **MI355),
    ]
    fitted = fit_thresholds(history, in_use)
    matches = [o["match"] for o in fitted.document["overrides"]]
    assert matches[0] == {"model_prefix": "dsr1", "hardware": "b200"}
    assert {"model_prefix": "x", **B200} in matches
    fitted_b200 = [
        o
        for o in fitted.document["overrides"]
        if o["why"].startswith("fitted") and o["match"] == {"model_prefix": "x", **B200}
    ]
    assert len(fitted_b200) == 1
    assert list(fitted_b200[0]["thresholds"]) == ["gsm8k"]
    assert fitted_b200[0]["thresholds"]["gsm8k"] > 0.9
    # the old override keeps the task not refitted, and its why
    old = {"match": {"model_prefix": "x", **B200}, "thresholds": {"gpqa_diamond_cot_n_shot": 0.4}}
    assert {**old, "why": "old"} in fitted.document["overrides"]
    assert len(matches) == 4


def test_runs_with_no_model_label_are_counted_and_left_out():
    fitted = fit_thresholds(runs(6, 0.9, seed=18), load_thresholds())
    assert fitted.changes == []
    assert summary(fitted) == ["6 runs have neither a model nor a model_prefix label: left out"]


@pytest.mark.parametrize("task", ["gpqa_diamond_cot_n_shot"])
def test_each_task_gets_its_own_floor(task):
    history = [
        *runs(8, 0.95, seed=19, model="m"),
        *runs(8, 0.55, seed=20, model="m", task=task),
    ]
    fitted = fit_thresholds(history, load_thresholds())
    floors = fitted.document["models"]["m"]
    assert set(floors) == {"gsm8k", task}
    assert 0.45 < floors[task] < 0.55 < floors["gsm8k"]
