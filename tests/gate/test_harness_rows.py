"""The benchmark harness's rows as it runs them today (InferenceX main of 2026-08-21):

- agentic rows run GSM8K with ISL, OSL and max-model-len '0' ("not given"): the context is the
  model's native maximum, clamped to what the engines serve, and the harness's budget;
- a single-node job's topology is its EP_SIZE and DP_ATTENTION, written alike by both layouts
  (the harness itself writes ep 1 and dp_attention false there).

Each job runs `evalgate hook` with only the job's own variables; the staged files are read by the
harness's rules (tests/harness.py's collector and validator) and by `evalgate verify`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import load_result
from tests.fakeengine import EngineBehaviour, FakeEngine
from tests.harness import (
    SERVED,
    as_uploaded,
    cli_hook,
    collect_rows,
    harness_thresholds,
    set_job,
    uploaded,
    validate,
)
from tests.test_thresholds import HARNESS_YAML

pytestmark = pytest.mark.loopback

MODEL_CONFIGS = Path(__file__).parents[1] / "context" / "data" / "model_configs"
NATIVE = 163840  # DeepSeek-R1's max_position_embeddings (yarn: already scaled)
HARNESS_BUDGET = min(NATIVE - 4096, 16384)


def model_dir(tmp_path: Path) -> Path:
    """A MODEL_PATH holding DeepSeek-R1's config.json, as the job's runner stages the model."""
    folder = tmp_path / "DeepSeek-R1"
    folder.mkdir()
    shutil.copy(MODEL_CONFIGS / "deepseek-r1.json", folder / "config.json")
    return folder


# -- agentic rows: ISL, OSL and max-model-len '0' ------------------------------------------------

AGENTIC = {"ISL": "0", "OSL": "0", "EVAL_MAX_MODEL_LEN": "0", "TP": "8"}


def test_an_agentic_row_runs_at_the_native_maximum_with_the_harness_budget(
    cli, tmp_path, monkeypatch
):
    out = tmp_path / "job"
    behaviour = EngineBehaviour(model=SERVED, max_model_len=NATIVE, accuracy=0.95)
    with FakeEngine(behaviour) as engine:
        set_job(monkeypatch, engine.port, MODEL_PATH=str(model_dir(tmp_path)), **AGENTIC)
        result = cli_hook(cli, out, "--layout", "harness", "--budget-policy", "harness")
        budgets = {r.body["max_tokens"] for r in engine.requests if r.body}
    assert result.code == 0, result.text
    assert budgets == {HARNESS_BUDGET}  # the probe's and every question's
    context = load_result(out / "evalgate" / "conc-4")["context"]
    assert context["eval_max_model_len"] == NATIVE and context["max_tokens"] == HARNESS_BUDGET
    assert context["requested"] is None
    source = "config.json: config max_position_embeddings"
    assert context["native"] == {"value": NATIVE, "source": source}

    # The harness's workflow takes the files as its own.
    assert len(uploaded(out)) == 3  # meta_env.json, one results and one samples file
    meta = json.loads((out / "meta_env.json").read_text())
    assert (meta["isl"], meta["osl"], meta["is_multinode"]) == ("0", "0", False)
    [row] = collect_rows(out)
    assert (row["isl"], row["osl"], row["conc"], row["strict"], row["n"]) == (0, 0, 4, 0.95, 40)
    assert validate(out, harness_thresholds(), [4]) == []


def test_a_served_length_below_the_native_maximum_clamps_the_context(cli, tmp_path, monkeypatch):
    """The engine serves 32768 of DeepSeek-R1's 163840: the context (and so the harness's
    budget) follows what is served, not the config."""
    out = tmp_path / "job"
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=32768)) as engine:
        set_job(monkeypatch, engine.port, MODEL_PATH=str(model_dir(tmp_path)), **AGENTIC)
        result = cli_hook(cli, out, "--budget-policy", "harness")
    assert result.code == 0, result.text
    context = load_result(out / "conc-4")["context"]
    assert context["eval_max_model_len"] == 32768
    assert context["max_tokens"] == min(32768 - 4096, 16384)


def test_context_explains_the_native_maximum_when_isl_is_zero(cli, tmp_path, monkeypatch):
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=NATIVE)) as engine:
        set_job(monkeypatch, engine.port, MODEL_PATH=str(model_dir(tmp_path)), **AGENTIC)
        result = cli("context", "--explain", "--format", "text", "--budget-policy", "harness")
    assert result.code == 0, result.text
    assert result.out.startswith(
        f"EVAL_MAX_MODEL_LEN {NATIVE}\nmax_tokens         {HARNESS_BUDGET} (harness)\n"
    )
    steps = [line.split(". ", 1)[1] for line in result.out.splitlines()[2:]]
    assert steps == [
        "config.json: smallest length key: max_position_embeddings=163840",
        "config.json: rope type yarn: length already scaled, factor ignored",
        "ISL/OSL not given (0 or unset): starting from the native maximum 163840 "
        "(config.json: config max_position_embeddings)",
        "within every served limit: 163840 (/v1/models of the endpoint)",
        "harness policy: ctx - 4096 = 159744",
        "capped at 16384",
    ]


@pytest.mark.parametrize("zero", ["0", "", "0k"])
def test_nothing_that_gives_a_context_is_still_a_clear_error(cli, monkeypatch, zero):
    """ISL=0 and no model config and no engine: nothing to start from, exit 2, nothing guessed."""
    for name in ("ISL", "OSL", "EVAL_MAX_MODEL_LEN"):
        monkeypatch.setenv(name, zero)
    result = cli("context", "--model", "m")
    assert result.code == 2
    assert "ContextError: Cannot derive EVAL_MAX_MODEL_LEN: missing ISL and OSL" in result.err
    assert "never falls back to a default length" in result.err


def test_a_negative_isl_is_still_refused(cli, monkeypatch):
    monkeypatch.setenv("ISL", "-1")
    result = cli("context", "--model", "m", "--osl", "8")
    assert result.code == 2
    assert "--isl = -1 (set by --isl or EVALGATE_ISL or ISL)" in result.err
    assert "out of range: give 1 to 2,147,483,647" in result.err


# -- single-node topology: both layouts, one key ------------------------------------------------

DEP8 = {"ISL": "1024", "OSL": "1024", "TP": "8", "EP_SIZE": "8", "DP_ATTENTION": "true"}


def test_a_single_node_job_is_labelled_by_its_ep_size_and_dp_attention(cli, tmp_path, monkeypatch):
    harness, ours = tmp_path / "harness", tmp_path / "evalgate"
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=4096)) as engine:
        set_job(monkeypatch, engine.port, **DEP8)
        assert cli_hook(cli, harness, "--layout", "harness").code == 0
        assert cli_hook(cli, ours, "--min-samples", "0").code == 0
    theirs_meta = json.loads((harness / "meta_env.json").read_text())
    ours_meta = json.loads((ours / "conc-4" / "meta_env.json").read_text())
    for meta in (theirs_meta, ours_meta):
        assert (meta["tp"], meta["ep"], meta["dp_attention"]) == (8, 8, True)
        assert (meta["prefill_ep"], meta["decode_ep"], meta["decode_dp_attention"]) == (8, 8, True)
    topology = {"tp": 8, "ep": 8, "dp_attention": True}
    assert load_result(harness / "evalgate" / "conc-4")["labels"]["topology"] == topology
    assert load_result(ours / "conc-4")["labels"]["topology"] == topology
    [row] = collect_rows(harness)
    assert (row["dp_attention"], row["prefill"]) == (True, (8, 8, True, 1))

    # evalgate verify names the job alike from the harness's files and from either layout's.
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text(HARNESS_YAML)
    harness_only = as_uploaded(harness, tmp_path / "harness-files")
    keys = set()
    for folder in (harness_only, harness / "evalgate", ours):
        written = tmp_path / f"{folder.name}.json"
        done = cli("verify", str(folder), "--no-github", "--min-samples", "0", "--thresholds",
                   str(thresholds), "--json", str(written))  # fmt: skip
        assert done.code == 0, done.text
        keys |= {entry["key"] for entry in json.loads(written.read_text())["entries"]}
    assert keys == {"dsr1 b200 sglang fp8 isl=1024 osl=1024 conc=4 tp=8 ep=8 dpa=true"}


def test_without_ep_size_or_dp_attention_the_job_keeps_the_harness_defaults(
    cli, tmp_path, monkeypatch
):
    out = tmp_path / "job"
    with FakeEngine(EngineBehaviour(model=SERVED, max_model_len=4096)) as engine:
        set_job(monkeypatch, engine.port, ISL="1024", OSL="1024", TP="4")
        assert cli_hook(cli, out, "--min-samples", "0").code == 0
    meta = json.loads((out / "conc-4" / "meta_env.json").read_text())
    assert (meta["tp"], meta["ep"], meta["dp_attention"]) == (4, 1, False)
    topology = load_result(out / "conc-4")["labels"]["topology"]
    assert topology == {"tp": 4, "ep": 1, "dp_attention": False}
