"""`evalgate verify`: finding a sweep's results, gating each, checking the set, and the outputs.

Every result here is a real file in tmp_path: evalgate result.json documents built by
`result_doc` (checked against result.schema.json as they are made), and the benchmark harness's
own lm-eval `results_*.json` beside a `meta_env.json` in the format its `_write_lm_eval_meta_json`
writes (isl/osl as strings, `hw`, `infmax_model_prefix`, batches with `_conc<N>` suffixes).
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import structs

from evalgate.errors import ArtifactError, ExitCode, UsageError
from evalgate.evidence.artifacts import NOT_A_RESULT, read_result
from evalgate.evidence.model import Labels
from evalgate.gate.verdict import Score
from evalgate.schemas import validation_errors
from evalgate.verify import collect, expect, sweep
from tests.conftest import ROOT, finish, run_subprocess, start_subprocess
from tests.verify.sweeps import (
    answers,
    evalgate_sweep,
    found,
    lm_eval_doc,
    meta_env,
    parsed_thresholds,
    result_doc,
    sweep_of,
    write_harness,
    write_result,
)

# -- factories -----------------------------------------------------------------------------------


def em(
    value: float,
    n: int = 1319,
    filt: str = "strict-match",
    task: str = "gsm8k",
    metric: str = "exact_match",
) -> Score:
    return Score(task=task, metric=metric, filter=filt, value=value, stderr=None, n=n)


def em2(value: float, n: int = 1319, task: str = "gsm8k") -> tuple[Score, Score]:
    """Both filters GSM8K's gate needs, at one value."""
    return em(value, n, task=task), em(value, n, "flexible-extract", task)


# -- the factories make what the formats say ------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("status", ["pass", "fail", "error", "aborted", "running"])
def test_result_factory_is_schema_valid(status):
    assert validation_errors("result", result_doc(status=status)) == []


# -- reading ---------------------------------------------------------------------------------------


@pytest.mark.unit
def test_a_fifo_is_refused_not_waited_on(tmp_path):
    path = tmp_path / "result.json"
    os.mkfifo(path)
    with pytest.raises(ArtifactError, match="is not a regular file"):
        read_result(path)


# -- collecting ----------------------------------------------------------------------------------


@pytest.mark.unit
def test_runs_judged_as_they_are_read_give_the_verdict_of_runs_judged_after_reading(tmp_path):
    """verify gates each run as it is read; judging the collected runs after gives the same
    report; two configs whose names collide are told apart by their models either way."""
    sweep_of(tmp_path, 20)
    write_result(tmp_path / "run-000b", model="other/model", hardware="h0", conc=1)
    write_harness(tmp_path / "harness-a")
    write_result(tmp_path / "zz-dup", hardware="h4", conc=20)  # a second result of run-019
    write_result(tmp_path / "zz-low", hardware="h9", scores=(0.5, 0.5))
    root = str(tmp_path)
    after = sweep.judge_sweep(
        collect.collect([root]), sweep.Rule(parsed_thresholds()), paths=[root]
    )
    assert sweep.verify([root], parsed_thresholds()) == after
    counts = {o: after.count(o) for o in ("pass", "fail", "malformed", "duplicate")}
    assert counts == {"pass": 22, "fail": 1, "malformed": 1, "duplicate": 1}
    [duplicate] = [e for e in after.entries if e.outcome == "duplicate"]
    assert "h4" in duplicate.key and "conc=20" in duplicate.key
    keys = [e.key for e in after.entries if e.path and "run-000" in e.path]
    assert len(keys) == 2 and len(set(keys)) == 2 and any("model=other/model" in k for k in keys)


@pytest.mark.unit
def test_a_run_folder_with_runs_below_it_counts_each_once(tmp_path):
    sweep_of(tmp_path / "sweep", 8)
    write_result(tmp_path)  # the root is a run's folder, with runs in the folders below
    out = collect.collect([str(tmp_path)])
    assert len(out.found) == 8 and len(out.malformed) == 1  # the root's run, and 7 of the 8


@pytest.mark.unit
def test_collect_reads_an_evalgate_result(tmp_path):
    write_result(tmp_path / "a", kv="fp8", topology={"tp": 8, "dp_attention": False})
    out = collect.collect([str(tmp_path)])
    assert out.malformed == [] and out.empty == []
    [item] = out.found
    assert item.source == "evalgate"
    assert item.model == "deepseek-ai/DeepSeek-R1-0528"
    assert structs.asdict(item.labels) == {
        "model_prefix": "dsr1",
        "hardware": "b200",
        "framework": "vllm",
        "precision": "fp8",
        "kv_cache_dtype": "fp8",
        "isl": 1024,
        "osl": 1024,
        "concurrency": 64,
        "topology": {"tp": 8, "dp_attention": False},
    }
    assert [(s.filter, s.value, s.n) for s in item.scores] == [
        ("strict-match", 0.95, 1319),
        ("flexible-extract", 0.955, 1319),
    ]


@pytest.mark.unit
def test_collect_a_nonexistent_path_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        collect.collect([str(tmp_path / "nope")])


@pytest.mark.unit
def test_collect_an_empty_folder_is_reported_empty(tmp_path):
    out = collect.collect([str(tmp_path)])
    assert out.found == [] and out.malformed == [] and out.empty == [str(tmp_path)]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "is not valid JSON (line 1 column 2"),
        ("", "is not valid JSON"),
        (b"\xff\xfe{}", "is not UTF-8 text"),
        ('{"schema": "evalgate.result/1"}', f"{NOT_A_RESULT}: $: "),
        ("[]", f"{NOT_A_RESULT}: $: Expected `object`, got `array`"),
    ],
)
def test_collect_reports_a_malformed_result_with_path_and_reason(tmp_path, content, reason):
    path = tmp_path / "run" / "result.json"
    path.parent.mkdir()
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    out = collect.collect([str(tmp_path)])
    assert out.found == []
    [note] = out.malformed
    assert note.path == str(path)
    assert note.reason.startswith(str(path))
    assert reason in note.reason


@pytest.mark.unit
def test_collect_names_the_bad_field_of_a_schema_invalid_result(tmp_path):
    doc = result_doc()
    doc["scores"][0]["value"] = 1.5
    del doc["labels"]
    (tmp_path / "result.json").write_text(json.dumps(doc))
    [note] = collect.collect([str(tmp_path)]).malformed
    assert "$.scores[0].value: Expected `float` <= 1.0" in note.reason  # the first met
    doc["scores"][0]["value"] = 0.5
    (tmp_path / "result.json").write_text(json.dumps(doc))
    [note] = collect.collect([str(tmp_path)]).malformed
    assert "$: Object missing required field `labels`" in note.reason


@pytest.mark.unit
def test_collect_reads_a_harness_eval_with_its_metadata(tmp_path):
    write_harness(
        tmp_path / "eval_gptoss_conc32", meta_env(spec_decoding="mtp", kv_cache_dtype="fp8")
    )
    out = collect.collect([str(tmp_path)])
    assert out.malformed == []
    [item] = out.found
    assert item.source == "lm-eval"
    assert item.status is None
    assert item.model == "openai/gpt-oss-120b"
    assert structs.asdict(item.labels) == {
        "model_prefix": "gptoss",
        "hardware": "mi355x",
        "framework": "sglang",
        "precision": "fp4",
        "kv_cache_dtype": "fp8",
        "isl": 1024,
        "osl": 8192,
        "concurrency": 32,
        "topology": {"tp": 4, "ep": 1, "dp_attention": False, "spec_decoding": "mtp"},
    }
    assert [(s.task, s.filter, s.value, s.n) for s in item.scores] == [
        ("gsm8k", "strict-match", 0.95, 1319),
        ("gsm8k", "flexible-extract", 0.955, 1319),
    ]
    assert item.scores[0].stderr == pytest.approx(0.006003, abs=1e-6)  # as lm-eval wrote it


@pytest.mark.unit
def test_collect_reads_multinode_topology_and_unknown_labels(tmp_path):
    meta = meta_env(
        is_multinode=True,
        precision="unknown",
        infmax_model_prefix="unknown",
        prefill_tp=4,
        prefill_num_workers=2,
        decode_tp=8,
        decode_num_workers=1,
        decode_dp_attention="true",
        prefill_pp=2,
    )
    write_harness(tmp_path, meta)
    [item] = collect.collect([str(tmp_path)]).found
    assert item.labels.precision is None
    assert item.labels.model_prefix is None
    assert item.labels.topology == {
        "prefill_tp": 4,
        "prefill_ep": 1,
        "prefill_dp_attention": False,
        "prefill_num_workers": 2,
        "prefill_pp": 2,
        "decode_tp": 8,
        "decode_ep": 1,
        "decode_dp_attention": True,
        "decode_num_workers": 1,
    }


@pytest.mark.unit
def test_collect_finds_lm_eval_output_nested_under_the_model_name(tmp_path):
    write_harness(
        tmp_path / "job",
        results={"openai__gpt-oss-120b/results_2026-05-01T10-00-00.json": lm_eval_doc()},
    )
    [item] = collect.collect([str(tmp_path)]).found
    assert item.path.endswith("openai__gpt-oss-120b/results_2026-05-01T10-00-00.json")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("meta", "results", "reasons"),
    [
        (meta_env(), {}, ["meta_env.json has no lm-eval results*.json beside it"]),
        (
            meta_env(eval_exit_code=1),
            {"results_x.json": lm_eval_doc()},
            ["the harness recorded eval_exit_code = 1"],
        ),
        (meta_env(eval_exit_code=3), {}, ["the harness recorded eval_exit_code = 3"]),
    ],
)
def test_collect_turns_a_skipped_or_failed_harness_eval_into_an_errored_run(
    tmp_path, meta, results, reasons
):
    write_harness(tmp_path, meta, results)
    out = collect.collect([str(tmp_path)])
    assert [item.status for item in out.found] == ["error"] * len(reasons)
    for item, reason in zip(out.found, reasons, strict=True):
        assert reason in str(item.reason)
        assert item.labels.concurrency == 32


@pytest.mark.unit
def test_collect_expands_a_harness_batch_by_concurrency(tmp_path):
    meta = meta_env(
        conc=4,
        eval_concs=[4, 16, 64, 128],
        completed_eval_concs=[4, 16],
        failed_eval_concs=[64],
        eval_exit_code=1,
    )
    write_harness(
        tmp_path,
        meta,
        {
            "results_t_conc4.json": lm_eval_doc(),
            "results_t_conc16.json": lm_eval_doc(0.93, 0.94),
            "results_t_conc64.json": lm_eval_doc(),
            "results_t_conc256.json": lm_eval_doc(),
            "results_t.json": lm_eval_doc(),
        },
    )
    out = collect.collect([str(tmp_path)])
    by_conc = {item.labels.concurrency: item for item in out.found}
    assert sorted(by_conc) == [4, 16, 64, 128, 256]
    assert by_conc[4].status is None and by_conc[16].scores[0].value == 0.93
    assert by_conc[64].status == "error" and "failed_eval_concs" in str(by_conc[64].reason)
    assert by_conc[64].path.endswith("results_t_conc64.json")
    assert by_conc[128].status == "error"
    assert "no results*_conc128.json was staged" in str(by_conc[128].reason)
    assert by_conc[256].status is None  # not asked for: --expect decides whether it is wanted
    [note] = out.malformed
    assert note.path.endswith("results_t.json") and "no _conc<N> suffix" in note.reason


@pytest.mark.unit
@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        ([1, 2], "is not a JSON object but list"),
        (meta_env(conc="lots"), "conc is 'lots', not an integer"),
        (meta_env(eval_concs=[4, "8"]), "eval_concs is [4, '8'], not a list of positive integers"),
        (meta_env(model="", infmax_model_prefix="unknown"), "neither model nor model_prefix"),
    ],
)
def test_collect_reports_a_malformed_meta_env(tmp_path, meta, reason):
    write_harness(tmp_path, meta)
    out = collect.collect([str(tmp_path)])
    assert out.found == []
    [note] = out.malformed
    assert note.path == str(tmp_path / "meta_env.json")
    assert reason in note.reason
    assert "the 1 lm-eval result(s) it describes go unchecked" in note.reason


@pytest.mark.unit
@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ({"lm_eval_version": "0.4.13"}, 'has no "results" object'),
        ({**lm_eval_doc(), "n-samples": {}}, "n-samples.gsm8k.effective is None"),
        (
            {**lm_eval_doc(), "results": {"gsm8k": {"exact_match,strict-match": "0.9"}}},
            "results.gsm8k.exact_match,strict-match is '0.9', not a number in [0, 1]",
        ),
    ],
)
def test_collect_reports_a_malformed_lm_eval_file(tmp_path, doc, reason):
    write_harness(tmp_path, results={"results_x.json": doc})
    out = collect.collect([str(tmp_path)])
    [note] = out.malformed
    assert note.path == str(tmp_path / "results_x.json") and reason in note.reason


@pytest.mark.unit
def test_collect_lm_eval_without_metadata_is_malformed(tmp_path):
    (tmp_path / "results_x.json").write_text(json.dumps(lm_eval_doc()))
    [note] = collect.collect([str(tmp_path)]).malformed
    assert "is an lm-eval result with no meta_env.json beside it" in note.reason


@pytest.mark.unit
def test_collect_lists_a_results_file_that_is_not_lm_eval(tmp_path):
    write_harness(tmp_path)
    (tmp_path / "results_summary.json").write_text('{"rows": []}')
    out = collect.collect([str(tmp_path)])
    assert len(out.found) == 1
    [note] = out.ignored
    assert note.reason.endswith("is not an lm-eval result (no lm_eval_version)")


@pytest.mark.unit
def test_collect_does_not_count_an_evalgate_runs_own_lm_eval_output(tmp_path):
    write_result(tmp_path / "run")
    (tmp_path / "run" / "raw").mkdir()
    (tmp_path / "run" / "raw" / "results_x.json").write_text(json.dumps(lm_eval_doc()))
    (tmp_path / "run" / "meta_env.json").write_text(json.dumps(meta_env()))
    out = collect.collect([str(tmp_path)])
    assert [item.source for item in out.found] == ["evalgate"]
    assert out.malformed == [] and out.ignored == []


@pytest.mark.unit
def test_collect_takes_result_files_named_on_the_command_line(tmp_path):
    path = write_result(tmp_path / "a")
    other = tmp_path / "b.json"
    other.write_text(json.dumps(result_doc(conc=8)))
    out = collect.collect([str(path), str(other)])
    assert [item.labels.concurrency for item in out.found] == [64, 8]


@pytest.mark.unit
@pytest.mark.parametrize("name", ["meta_env.json", "results_2026.json"])
def test_collect_refuses_a_harness_file_on_its_own(tmp_path, name):
    (tmp_path / name).write_text("{}")
    with pytest.raises(UsageError, match=r"pass the folder that holds meta_env\.json"):
        collect.collect([str(tmp_path / name)])


# -- gating one result ---------------------------------------------------------------------------

FLOORS = {
    "default": {"gsm8k": 0.90},
    "models": {"dsr1": {"gsm8k": 0.91}},
    "overrides": [
        {"match": {"hardware": "mi355x", "precision": "fp4"}, "thresholds": {"gsm8k": 0.88}}
    ],
}


@pytest.mark.unit
@pytest.mark.parametrize(
    ("item", "outcome", "reason"),
    [
        (
            found(scores=(em(0.95), em(0.96, filt="flexible-extract"))),
            "pass",
            "strict-match 0.9500 (95% CI 0.9369-0.9605, n=1319), flexible-extract 0.9600",
        ),
        (
            found(scores=(em(0.95), em(0.85, filt="flexible-extract"))),
            "fail",
            "flexible-extract 0.8500 (95% CI 0.8297-0.8683, n=1319) below threshold 0.9100 "
            "(prefix:dsr1)",
        ),
        (
            found(scores=em2(0.92, n=50)),
            "inconclusive",
            "the 95% interval straddles the threshold and n < 1319",
        ),
        (found(scores=()), "fail", "no exact_match score was produced: nothing to gate"),
        (
            found(scores=(em(0.97),)),
            "fail",
            "no exact_match,flexible-extract score: the gsm8k gate needs every one of",
        ),
        (found(scores=(em(0.99, metric="acc"),)), "fail", "no exact_match score"),
        (
            found(status="error", reason="max_tokens=12288 cannot be greater than 2048"),
            "error",
            "run error in stage eval: max_tokens=12288 cannot be greater than 2048",
        ),
        (found(status="aborted", reason="interrupted"), "error", "run aborted in stage eval"),
        (
            found(status="running"),
            "error",
            "run interrupted: its result.json still says running, last recorded at stage eval",
        ),
        # the run failed on something other than its scores: truncation, failed requests
        (
            found(scores=em2(0.95), status="fail", reason="12% of answers truncated"),
            "fail",
            "the run failed: 12% of answers truncated",
        ),
        # the run failed on its scores at n = 50: verify's statistics decide
        (
            found(scores=em2(0.88, n=50), status="fail", failed_on_scores=True),
            "inconclusive",
            "straddles",
        ),
        (
            found(scores=em2(0.89), hardware="mi355x", precision="fp4", model_prefix="x"),
            "pass",
            "override[0]:hardware=mi355x,precision=fp4",
        ),
        (
            found(scores=em2(0.95, task="gsm8k_evalgate_chat"), model_prefix="qwen"),
            "pass",
            "threshold 0.9000 (default)",
        ),
        (found(scores=(em(0.95, task="mmlu"),)), "fail", "has no threshold for task 'mmlu'"),
    ],
)
def test_gate(item, outcome, reason):
    entry = sweep.Rule(parsed_thresholds(FLOORS)).gate(item, "key")
    assert entry.outcome == outcome
    assert reason in entry.reason


@pytest.mark.unit
def test_a_zero_written_minus_zero_and_a_score_that_is_not_a_number_fail_as_written():
    """-0.0 is a zero and fails as one, its reason showing the value as the file has it; a NaN
    fails (a value that is not a number is never a pass), and each is decided on its own."""
    rule = sweep.Rule(parsed_thresholds(FLOORS))
    zero, minus_zero, nan = (rule.gate(found(scores=em2(v)), "k") for v in (0.0, -0.0, math.nan))
    assert (zero.outcome, minus_zero.outcome, nan.outcome) == ("fail", "fail", "fail")
    assert "-0.0000" in minus_zero.reason and "-0.0000" not in zero.reason
    assert all(math.isnan(check.value) for check in nan.checks)
    assert rule.gate(found(scores=em2(0.95)), "k").outcome == "pass"  # the same rule, after them


@pytest.mark.unit
def test_gate_min_samples_zero_decides_on_the_point_estimate():
    item = found(scores=em2(0.92, n=50), model_prefix="kimi")
    assert sweep.Rule(parsed_thresholds(FLOORS)).gate(item, "k").outcome == "inconclusive"
    assert sweep.Rule(parsed_thresholds(FLOORS), min_samples=0).gate(item, "k").outcome == "pass"


@pytest.mark.unit
@settings(deadline=None)  # timing varies on a shared CI machine; the property does not
@given(
    values=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 3000)), max_size=2),
    threshold=st.floats(0.05, 1),
    min_samples=st.integers(0, 3000),
    status=st.sampled_from([None, "pass", "fail"]),
)
def test_gate_never_passes_a_score_clearly_below_nor_nothing(
    values, threshold, min_samples, status
):
    names = ("strict-match", "flexible-extract")
    scores = tuple(em(v, n, filt=names[i]) for i, (v, n) in enumerate(values))
    item = found(scores=scores, status=status, failed_on_scores=True)
    rule = sweep.Rule(parsed_thresholds({"default": {"gsm8k": threshold}}), min_samples)
    entry = rule.gate(item, "k")
    if not scores:
        assert entry.outcome == "fail"
    for check in entry.checks:
        if check.value < threshold and check.high < threshold:
            assert entry.outcome == "fail"
    if entry.outcome == "pass":
        assert entry.checks and all(c.outcome == "pass" for c in entry.checks)


# -- config keys ---------------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(
    ("model", "labels", "key"),
    [
        (
            "deepseek-ai/DeepSeek-R1",
            {
                "model_prefix": "dsr1",
                "hardware": "b200",
                "framework": "vllm",
                "precision": "fp8",
                "isl": 1024,
                "osl": 1024,
                "concurrency": 64,
            },
            "dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=64",
        ),
        (
            "m",
            {
                "kv_cache_dtype": "fp8",
                "concurrency": 4,
                "topology": {"prefill_tp": 4, "decode_dp_attention": True, "spec_decoding": "mtp"},
            },
            "m kv=fp8 conc=4 p.tp=4 d.dpa=true spec=mtp",
        ),
        (None, {}, "(unlabelled)"),
    ],
)
def test_config_key(model, labels, key):
    assert expect.config_key(model, Labels(**labels)) == key


@pytest.mark.unit
def test_one_job_gets_one_key_whichever_tool_spelled_its_topology():
    """evalgate's hook once recorded the job's variables as they are named (PREFILL_DP_ATTN
    "true"), the harness's meta_env.json names them prefill_dp_attention (true): one config."""
    from_variables = Labels(
        concurrency=4,
        topology={
            "prefill_tp": "4",
            "prefill_dp_attn": "true",
            "ep_size": 8,
            "is_multinode": "true",
        },
    )
    from_meta = Labels(
        concurrency=4, topology={"prefill_tp": 4, "prefill_dp_attention": True, "ep": 8}
    )
    key = expect.config_key("m", from_variables)
    assert key == expect.config_key("m", from_meta) == "m conc=4 p.tp=4 p.dpa=true ep=8"
    assert expect.config_identity("m", from_variables, None) == expect.config_identity(
        "m", from_meta, "gsm8k"
    )
    manifest = expect.parse_expectation([{"topology": {"prefill_dp_attn": "true"}}], "e")
    entry = sweep.Entry(key, "pass", "", "p", "evalgate", "m", from_meta)
    assert expect.check_set([entry], manifest) == []


@pytest.mark.unit
def test_a_topology_is_written_as_its_values_are_whichever_came_first():
    """True and 1 are equal (one key for a cache that ignored their types): each is written as
    it is, in either order."""
    for first, second in (((True, "true"), (1, "1")), ((1, "1"), (True, "true"))):
        for value, shown in (first, second):
            assert expect.config_key("m", Labels(topology={"tp": value})) == f"m tp={shown}"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("task", "n", "outcome"),
    [
        ("gsm8k", 1319, "pass"),
        ("gsm8k_evalgate_chat", 1319, "pass"),
        ("gsm8k", 396, "inconclusive"),
        ("gpqa_diamond_cot_n_shot", 396, "pass"),
        ("gpqa_diamond_cot_n_shot", 198, "inconclusive"),
        ("swebench_lite", 300, "pass"),
    ],
)
def test_min_samples_defaults_to_each_tasks_full_size(task, n, outcome):
    """A full run of any gated task is decided on its score; a shorter one only beyond doubt."""
    rule = sweep.Rule(parsed_thresholds({"default": {task: 0.5}}))
    one = "extract_abcd" if task.startswith("gpqa") else "strict-match"  # GPQA's one filter
    scores = em2(0.52, n=n, task=task) if task.startswith("gsm8k") else (em(0.52, n, one, task),)
    entry = rule.gate(found(scores=scores), "k")
    assert entry.outcome == outcome, entry.reason
    assert entry.checks[0].threshold == 0.5


@pytest.mark.unit
def test_two_models_under_one_prefix_get_the_model_in_their_key():
    a, b = (
        sweep.Entry("dsr1 b200 conc=64", "pass", "", model=f.model, labels=f.labels)
        for f in (found(model="org/a"), found(model="org/b"))
    )
    assert [e.key for e in expect.told_apart([a, b])] == [
        "dsr1 b200 conc=64 model=org/a",
        "dsr1 b200 conc=64 model=org/b",
    ]
    assert [e.key for e in expect.told_apart([a, a])] == ["dsr1 b200 conc=64"] * 2


# -- the expected set ----------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(
    ("data", "count", "configs"),
    [
        (10, 10, ()),
        ({"count": 3}, 3, ()),
        (
            [{"model_prefix": "dsr1", "conc": 4}],
            None,
            ({"model_prefix": "dsr1", "concurrency": 4},),
        ),
        (
            {"configs": [{"hardware": "b200", "concurrency": [4, 8], "isl": [1024, 8192]}]},
            None,
            (
                {"hardware": "b200", "concurrency": 4, "isl": 1024},
                {"hardware": "b200", "concurrency": 4, "isl": 8192},
                {"hardware": "b200", "concurrency": 8, "isl": 1024},
                {"hardware": "b200", "concurrency": 8, "isl": 8192},
            ),
        ),
    ],
)
def test_parse_expectation(data, count, configs):
    expectation = expect.parse_expectation(data, "m.json")
    assert expectation.count == count
    assert expectation.configs == configs


@pytest.mark.unit
@pytest.mark.parametrize(
    ("data", "message"),
    [
        (0, "the expected count is out of range: give 1 to 10,000"),
        ([], "is neither a count nor a manifest"),
        ("ten", "is neither a count nor a manifest"),
        ([{"gpu": "b200"}], "entry 0 has unknown field(s) ['gpu']"),
        ([{"hardware": "b200"}, 7], "entry 1 is 7: each expected config is a non-empty object"),
        ([{}], "entry 0 is {}"),
        (
            [{"concurrency": 4}, {"concurrency": 4}],
            "lists the config {'concurrency': 4} twice (entries 0 and 1)",
        ),
        (
            [{"concurrency": [4, 8]}, {"concurrency": 8}],
            "lists the config {'concurrency': 8} twice (entries 0 and 1)",
        ),
        (
            [{"hardware": "b200", "concurrency": []}],
            "entry 0 gives concurrency as an empty list, which expects no config at all",
        ),
        (
            [{"isl": list(range(1, 101)), "osl": list(range(1, 102))}],
            "entry 0 expands to 10,100 configs (the product of its lists); a manifest names at "
            "most 10,000 in all",
        ),
        (
            [{"isl": list(range(1, 5001))}, {"osl": list(range(1, 5002))}],
            "entry 1 expands to 5,001 configs (the product of its lists), 10,001 with the "
            "entries before it",
        ),
        (
            [{"isl": list(range(1, 10_001))}, {"osl": 1}],
            "entry 1 expands to 1 config (the product of its lists), 10,001 with the entries",
        ),
        (
            [{"isl": "abc"}],
            "entry 0 gives isl as 'abc': give a whole number, e.g. 1024 or \"1024\"",
        ),
        ([{"concurrency": [4, True]}], "entry 0 gives concurrency as True: give a whole number"),
        ([{"osl": 1.5}], "entry 0 gives osl as 1.5: give a whole number"),
        ([{"isl": "x" * 5000}], "entry 0 gives isl as 'xxx"),
        ([{"isl": "x" * 5000}], "… (5,002 characters): give a whole number"),
        ([{"conc": 4, "concurrency": 8}], "entry 0 gives both conc and concurrency"),
        ([{"isl": [1, 1]}], "lists the config {'isl': 1} twice (a list)"),
    ],
)
def test_parse_expectation_rejects(data, message):
    with pytest.raises(UsageError) as raised:
        expect.parse_expectation(data, "m.json")
    assert message in raised.value.message


@pytest.mark.unit
def test_load_expectation(tmp_path):
    assert expect.load_expectation("12").count == 12
    manifest = tmp_path / "expect.json"
    manifest.write_text(json.dumps([{"concurrency": [1, 2]}]))
    assert len(expect.load_expectation(str(manifest)).configs) == 2
    with pytest.raises(UsageError, match="--expect: Cannot read "):
        expect.load_expectation(str(tmp_path / "none.json"))
    manifest.write_text("[{")
    with pytest.raises(UsageError, match="is not valid JSON"):
        expect.load_expectation(str(manifest))


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("count", "code", "said"),
    [
        ("10000", 1, "1 missing"),
        ("10001", 2, "the expected count is out of range: give 1 to 10,000"),
        ("9" * 5000, 2, "a number of 5,000 characters is not a whole number"),
    ],
    ids=["the most", "one more", "5,000 digits"],
)
def test_an_expected_count_past_its_range_is_a_usage_error_however_long(
    tmp_path, count, code, said
):
    """--expect N: 5,000 digits were exit 4 ("please report"), int() refusing past 4,300."""
    write_result(tmp_path / "run", conc=1)
    done = run_subprocess("verify", str(tmp_path), "--no-github", "--expect", count)
    assert done.returncode == code, done.stdout + done.stderr
    assert said in done.stdout + done.stderr
    assert "please report" not in done.stderr


MANIFEST_NUMBERS = [
    ("isl", "isl", "--isl"),
    ("osl", "osl", "--osl"),
    ("concurrency", "num_concurrent", "--num-concurrent"),
]
"""A manifest's numeric fields, each with the setting whose range it takes, and its flag."""


@pytest.mark.loopback
@pytest.mark.parametrize(("field", "setting", "flag"), MANIFEST_NUMBERS)
def test_a_manifest_number_takes_its_settings_largest_value_and_refuses_the_next(
    tmp_path, field, setting, flag
):
    """8c36240 took any integer (2,147,483,648, 0, -1), and a string of 5,000 digits was exit
    4 ("please report", int() refusing past 4,300 digits)."""
    from tests.test_numbers import RANGES as SETTING_RANGES

    largest, past, span = SETTING_RANGES[setting]
    write_result(
        tmp_path / "sweep" / "run", **{"conc" if field == "concurrency" else field: int(largest)}
    )
    manifest = tmp_path / "expect.json"

    def verify(value: Any) -> subprocess.CompletedProcess[str]:
        manifest.write_text(json.dumps([{field: value}]))
        return run_subprocess(
            "verify", str(tmp_path / "sweep"), "--no-github", "--expect", str(manifest)
        )

    took = verify(int(largest))
    assert took.returncode == 0, took.stdout + took.stderr
    assert "evalgate verify: PASS (exit 0)" in took.stdout
    for refused, shown in [
        (int(past), f"{int(past):,}"),
        (past, f"{int(past):,}"),
        (0, "0"),
        (-1, "-1"),
    ]:
        done = verify(refused)
        assert done.returncode == 2, done.stdout + done.stderr
        assert (
            f"{manifest} entry 0: {field} {shown} is out of range: give {span}, as {flag} takes"
            in done.stderr
        )
        assert "evalgate verify:" not in done.stdout  # refused before any result is read
    done = verify("9" * 5000)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"entry 0 gives {field} as '999" in done.stderr
    assert "(5,002 characters): give a whole number" in done.stderr


def _entries(*concs: int) -> list[sweep.Entry]:
    return [
        sweep.Entry(
            f"dsr1 conc={c}",
            "pass",
            "",
            f"{c}/result.json",
            "evalgate",
            "m",
            Labels(model_prefix="dsr1", concurrency=c),
        )
        for c in concs
    ]


@pytest.mark.unit
def test_check_set_duplicates_even_without_an_expectation():
    [problem] = expect.check_set(_entries(4, 8, 8), None)
    assert problem.outcome == "duplicate" and problem.key == "dsr1 conc=8"
    assert "2 results for one config: 8/result.json, 8/result.json" in problem.reason


@pytest.mark.unit
def test_check_set_missing_and_unexpected():
    expectation = expect.parse_expectation(
        [{"model_prefix": "dsr1", "concurrency": [4, 8, 16]}], "sweep.json"
    )
    problems = expect.check_set(_entries(4, 8, 32), expectation)
    assert [(p.outcome, p.key) for p in problems] == [
        ("missing", "dsr1 conc=16"),
        ("unexpected", "dsr1 conc=32"),
    ]
    assert "expected config dsr1 conc=16 (--expect sweep.json) has no result" in problems[0].reason


@pytest.mark.unit
def test_check_set_an_entry_matching_two_configs_is_ambiguous():
    expectation = expect.parse_expectation([{"model_prefix": "dsr1"}], "e.json")
    [problem] = expect.check_set(_entries(4, 8), expectation)
    assert problem.outcome == "duplicate"
    assert "matches 2 configs: dsr1 conc=4; dsr1 conc=8" in problem.reason


@pytest.mark.unit
@pytest.mark.parametrize(("count", "outcome"), [(3, None), (4, "missing"), (2, "unexpected")])
def test_check_set_count(count, outcome):
    problems = expect.check_set(
        _entries(1, 2, 3), expect.Expectation(str(count), count=count, configs=())
    )
    assert [p.outcome for p in problems] == ([outcome] if outcome else [])
    if outcome:
        assert f"expected {count} configs (--expect {count}), found 3" in problems[0].reason


@pytest.mark.unit
def test_check_set_matches_topology_as_a_subset():
    entry = sweep.Entry(
        "k", "pass", "", "p", "evalgate", "m", Labels(concurrency=4, topology={"tp": 8, "ep": 1})
    )
    ok = expect.parse_expectation([{"topology": {"tp": 8}}], "e")
    wrong = expect.parse_expectation([{"topology": {"tp": 4}}], "e")
    assert expect.check_set([entry], ok) == []
    assert [p.outcome for p in expect.check_set([entry], wrong)] == ["missing", "unexpected"]


# -- end to end through `evalgate verify` ---------------------------------------------------------


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_an_empty_folder_fails_and_says_so(tmp_path, cli):
    code, out, _ = cli("verify", str(tmp_path))
    assert code == ExitCode.FAIL
    assert f"no eval results found under {tmp_path}" in out
    assert out.rstrip().endswith(f"FAIL (exit 1): no eval results found under {tmp_path}")


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_one_empty_path_among_others_fails(tmp_path, cli):
    write_result(tmp_path / "a")
    (tmp_path / "b").mkdir()
    code, out, _ = cli("verify", str(tmp_path / "a"), str(tmp_path / "b"))
    assert code == ExitCode.FAIL
    assert f"no eval results found under {tmp_path / 'b'}" in out


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{tmp}/nope"], "UsageError: {tmp}/nope does not exist."),
        (
            ["{tmp}", "--thresholds", "{tmp}/missing.json"],
            "ThresholdsError: Cannot read thresholds file {tmp}/missing.json",
        ),
        (["{tmp}", "--expect", "{tmp}/missing.json"], "UsageError: --expect: Cannot read "),
        (
            ["{tmp}", "--expect", "{tmp}/result.json"],
            "UsageError: --expect {tmp}/result.json is neither a count nor a manifest",
        ),
    ],
)
def test_usage_errors_exit_2(tmp_path, cli, args, message):
    write_result(tmp_path)
    code, _, err = cli("verify", *[a.format(tmp=tmp_path) for a in args])
    assert code == ExitCode.USAGE
    assert message.format(tmp=tmp_path) in err


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_a_bad_thresholds_file_exits_2(tmp_path, cli):
    write_result(tmp_path / "r")
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps({"default": {"gsm8k": 1.5}}))
    code, _, err = cli("verify", str(tmp_path / "r"), "--thresholds", str(bad))
    assert code == ExitCode.USAGE
    assert "ThresholdsError: " in err and "is not a valid thresholds file" in err


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_bad_min_samples_is_a_usage_error(tmp_path, cli):
    code, _, err = cli("verify", tmp_path, "--min-samples", "-1")
    assert code == 2
    assert "-1 is out of range: give 0 to 2,147,483,647" in err


def mixed_tree(root: Path) -> dict[str, Path]:
    """One of everything the issue names: passing, failing, errored, malformed, harness."""
    paths = {
        "pass": write_result(root / "dsr1-conc64"),
        "fail": write_result(
            root / "dsr1-conc32",
            conc=32,
            scores=(0.86, 0.87),
            status="fail",
            reason="below threshold",
        ),
        "error": write_result(
            root / "dsr1-conc16",
            conc=16,
            status="error",
            stage="probe",
            reason="max_tokens=12288 cannot be greater than max_model_len=2048",
            error={"type": "ProbeError", "message": "rejected"},
        ),
    }
    bad = root / "dsr1-conc8" / "result.json"
    bad.parent.mkdir()
    bad.write_text('{"schema": "evalgate.result/1", "status": "pass"')
    paths["malformed"] = bad
    write_harness(
        root / "gptoss-batch",
        meta_env(conc=4, eval_concs=[4, 8], completed_eval_concs=[4, 8], failed_eval_concs=[]),
        {"results_2026_conc4.json": lm_eval_doc(), "results_2026_conc8.json": lm_eval_doc()},
    )
    paths["harness"] = root / "gptoss-batch" / "results_2026_conc4.json"
    return paths


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_a_mixed_tree_lists_everything_and_fails(tmp_path, cli, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    summary.write_text("earlier step\n")
    paths = mixed_tree(tmp_path / "artifacts")
    junit_path, json_path = tmp_path / "out" / "junit.xml", tmp_path / "out" / "verdict.json"
    code, out, err = cli(
        "verify", str(tmp_path / "artifacts"), "--junit", str(junit_path), "--json", str(json_path)
    )
    assert code == ExitCode.FAIL, err

    # the terminal: every item, with its reason (and its path when it is a problem)
    assert "PASS          dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=64" in out
    assert "FAIL          dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=32" in out
    assert (
        "strict-match 0.8600 (95% CI 0.8402-0.8777, n=1319), flexible-extract 0.8700 "
        "(95% CI 0.8508-0.8871, n=1319) below threshold 0.9100 (prefix:dsr1)"
    ) in out
    assert (
        "run error in stage probe: max_tokens=12288 cannot be greater than "
        "max_model_len=2048 (ProbeError)"
    ) in out
    assert str(paths["error"]) in out
    assert f"{paths['malformed']} is not valid JSON" in out
    assert (
        "PASS          gptoss mi355x sglang fp4 isl=1024 osl=8192 conc=4 tp=4 ep=1 dpa=false" in out
    )
    assert (
        "evalgate verify: FAIL (exit 1): 6 results for 5 configs: 3 pass, 1 fail, "
        "1 error, 1 malformed"
    ) in out

    # GitHub: annotations on stdout, a markdown table appended to the job summary
    assert f"::error file={paths['fail']},title=evalgate verify fail%3A dsr1 b200 vllm fp8 " in out
    assert f"::error file={paths['malformed']}," in out
    assert out.count("::error ") == 3
    text = summary.read_text()
    assert text.startswith("earlier step\n### ❌ evalgate verify: FAIL\n")
    assert_markdown_tables(text)
    assert (
        "| ❌ fail | dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=32 | 0.8600 ±0.0096 strict-match"
        in text
    )
    assert "<details><summary>3 passing</summary>" in text

    # JUnit: one testcase per config, the problems marked
    suite = ET.parse(junit_path).getroot()  # noqa: S314 - evalgate's own output
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert len(cases) == 6
    assert suite.get("tests") == "6" and suite.get("failures") == "1" and suite.get("errors") == "2"
    assert cases["dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=32"].find("failure") is not None
    assert (
        cases["dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=16"].find("error").get("type") == "error"
    )
    assert cases[str(paths["malformed"])].find("error").get("type") == "malformed"
    passing = cases["dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=64"]
    assert passing.find("failure") is None and passing.find("error") is None
    assert passing.get("file") == str(paths["pass"])

    # the verdict document
    document = json.loads(json_path.read_text())
    assert validation_errors("verdict", document) == []
    assert document["verdict"] == "fail" and document["exit_code"] == 1
    assert document["counts"] == {
        "pass": 3,
        "fail": 1,
        "inconclusive": 0,
        "error": 1,
        "malformed": 1,
        "missing": 0,
        "unexpected": 0,
        "duplicate": 0,
        "empty": 0,
        "regression": 0,
        "expired": 0,
    }
    [failed] = [e for e in document["entries"] if e["outcome"] == "fail"]
    assert failed["checks"][0]["ci_low"] == pytest.approx(0.8402, abs=1e-4)
    assert failed["labels"]["concurrency"] == 32


def assert_markdown_tables(text: str) -> None:
    """Every table is a header, a separator and rows with as many cells as the header."""
    lines = text.splitlines()
    tables = [i for i, line in enumerate(lines) if line.startswith("|---")]
    assert tables
    for at in tables:
        width = lines[at - 1].count(" | ") + 1
        assert lines[at] == "|" + "---|" * width
        row = at + 1
        while row < len(lines) and lines[row].startswith("| "):
            cells = lines[row].replace("\\|", "").strip("|").split(" | ")
            assert len(cells) == width, lines[row]
            row += 1
        assert row > at + 1


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_expect_names_the_missing_config(tmp_path, cli):
    for conc in (4, 8, 32):
        write_result(tmp_path / f"c{conc}", conc=conc)
    manifest = tmp_path / "expect.json"
    manifest.write_text(
        json.dumps([{"model_prefix": "dsr1", "hardware": "b200", "concurrency": [4, 8, 16, 32]}])
    )
    code, out, _ = cli("verify", str(tmp_path), "--expect", str(manifest))
    assert code == ExitCode.FAIL
    assert (f"expected config dsr1 b200 conc=16 (--expect {manifest}) has no result") in out
    assert "MISSING      dsr1 b200 conc=16" in out


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_expect_a_count(tmp_path, cli):
    for conc in (4, 8):
        write_result(tmp_path / f"c{conc}", conc=conc)
    code, out, _ = cli("verify", str(tmp_path), "--expect", "3")
    assert code == ExitCode.FAIL
    assert "expected 3 configs (--expect 3), found 2" in out
    assert cli("verify", str(tmp_path), "--expect", "2")[0] == ExitCode.PASS


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_expect_unexpected_and_duplicate(tmp_path, cli):
    write_result(tmp_path / "a", conc=4)
    write_result(tmp_path / "b", conc=4)
    write_result(tmp_path / "c", conc=128)
    manifest = tmp_path / "expect.json"
    manifest.write_text(json.dumps({"configs": [{"model_prefix": "dsr1", "conc": 4}]}))
    code, out, _ = cli("verify", str(tmp_path), "--expect", str(manifest))
    assert code == ExitCode.FAIL
    assert "2 results for one config: " in out
    assert "dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=128 is not in the expected set" in out


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_a_small_sample_is_inconclusive(tmp_path, cli):
    write_result(tmp_path, n=50, scores=(0.92, 0.92), prefix="kimik2.5")  # threshold 0.90
    code, out, _ = cli("verify", str(tmp_path))
    assert code == ExitCode.INCONCLUSIVE == 5
    assert "INCONCLUSIVE kimik2.5" in out
    assert "95% interval straddles the threshold and n < 1319" in out
    assert "evalgate verify: INCONCLUSIVE (exit 5)" in out
    code, out, _ = cli("verify", str(tmp_path), "--min-samples", "0")
    assert code == ExitCode.PASS


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_a_full_run_passes(tmp_path, cli):
    write_result(tmp_path / "run", scores=(0.95, 0.95), prefix="kimik2.5")
    code, out, _ = cli("verify", str(tmp_path))
    assert code == ExitCode.PASS
    assert "evalgate verify: PASS (exit 0): 1 results for 1 configs: 1 pass" in out
    assert "::" not in out  # no annotations outside GitHub Actions


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_inconclusive_and_failure_together_fail(tmp_path, cli):
    write_result(tmp_path / "a", n=50, scores=(0.92, 0.92), conc=1)
    write_result(tmp_path / "b", scores=(0.5, 0.5), conc=2)
    assert cli("verify", str(tmp_path))[0] == ExitCode.FAIL


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_thresholds_from_the_environment(tmp_path, cli, monkeypatch):
    write_result(tmp_path / "r", scores=(0.95, 0.95))
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps({"default": {"gsm8k": 0.99}}))
    monkeypatch.setenv("EVALGATE_THRESHOLDS", str(strict))
    code, out, _ = cli("verify", str(tmp_path / "r"))
    assert code == ExitCode.FAIL
    assert "below threshold 0.9900 (default)" in out


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_no_github_output_when_turned_off(tmp_path, cli, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    write_result(tmp_path / "r", scores=(0.5, 0.5))
    code, out, _ = cli("verify", str(tmp_path / "r"), "--no-github")
    assert code == ExitCode.FAIL
    assert "::error" not in out and not summary.exists()


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_quiet_prints_problems_and_the_verdict_only(tmp_path, cli):
    write_result(tmp_path / "a", conc=4)
    write_result(tmp_path / "b", conc=8, scores=(0.5, 0.5))
    code, out, _ = cli("verify", str(tmp_path), "-q")
    assert code == ExitCode.FAIL
    assert "conc=4" not in out and "conc=8" in out and "RESULT" not in out


@pytest.mark.loopback
def test_verify_imports_nothing_heavy(tmp_path):
    write_result(tmp_path / "r")
    script = (
        "import argparse, sys\n"
        "from evalgate.cli import verify as cli_verify\n"
        "parser = argparse.ArgumentParser()\n"
        "cli_verify.add_arguments(parser)\n"
        "code = cli_verify.command(parser.parse_args(sys.argv[1:]))\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'lm_eval', 'datasets', 'torch', 'pandas', 'numpy', 'httpx', 'openai', 'aiohttp'})\n"
        "print('HEAVY', heavy)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout


@pytest.mark.unit
def test_collect_reads_an_evalgate_hook_staging_folder(tmp_path):
    """`evalgate hook` stages conc-<N>/ (result.json, meta_env.json) and hook.json."""
    stage = tmp_path / "stage"
    hook_meta = {
        "framework": "vllm",
        "precision": "fp8",
        "model": "deepseek-ai/DeepSeek-R1-0528",
        "model_prefix": "dsr1",
        "hardware": "b200",
        "isl": 1024,
        "osl": 1024,
        "kv_cache_dtype": None,
        "is_multinode": False,
    }
    write_result(stage / "conc-4", conc=4)
    (stage / "conc-4" / "meta_env.json").write_text(json.dumps({**hook_meta, "conc": 4}))
    (stage / "conc-8").mkdir()  # stopped before its result.json was written
    (stage / "conc-8" / "meta_env.json").write_text(json.dumps({**hook_meta, "conc": 8}))
    (stage / "hook.json").write_text(
        json.dumps(
            {
                "concurrencies": [4, 8, 16],
                "completed": [4],
                "stopped": "error at stage eval: boom",
                "runs": [
                    {
                        "concurrency": 4,
                        "status": "pass",
                        "exit_code": 0,
                        "stage": "done",
                        "reason": "ok",
                        "result": "conc-4/result.json",
                    },
                    {
                        "concurrency": 8,
                        "status": "error",
                        "exit_code": 4,
                        "stage": "eval",
                        "reason": "boom",
                        "result": None,
                    },
                    {
                        "concurrency": 16,
                        "status": "not run",
                        "reason": "not run: an earlier run stopped the hook "
                        "(error at stage eval: boom)",
                    },
                ],
            }
        )
    )
    out = collect.collect([str(stage)])
    assert out.malformed == []
    by_conc = {item.labels.concurrency: item for item in out.found}
    assert sorted(by_conc) == [4, 8, 16]
    assert by_conc[4].status == "pass" and by_conc[4].source == "evalgate"
    assert by_conc[8].status == "error"
    assert "meta_env.json has no lm-eval results" in str(by_conc[8].reason)
    assert by_conc[16].status == "skipped"
    assert by_conc[16].labels.model_prefix == "dsr1" and by_conc[16].model == by_conc[4].model
    entry = sweep.Rule(parsed_thresholds()).gate(by_conc[16], "k")
    assert entry.outcome == "error"
    assert entry.reason == (
        "run skipped: not run: an earlier run stopped the hook (error at stage eval: boom)"
    )


@pytest.mark.unit
def test_collect_reports_a_malformed_hook_summary(tmp_path):
    write_result(tmp_path / "conc-4")
    (tmp_path / "hook.json").write_text('{"runs": 3}')
    [note] = collect.collect([str(tmp_path)]).malformed
    assert note.reason.startswith(
        f"{tmp_path / 'hook.json'} is not an evalgate hook summary: "
        "$.runs: Expected `array`, got `int`"
    )


# -- the documented examples run -----------------------------------------------------------------


def example_inputs(step: dict[str, Any], green: bool) -> dict[str, str]:
    """The example's `with:` for the gate step, its `last-green != '' && 'A' || ''` choices
    made: A when a green sweep was found, else empty."""
    inputs = {}
    for name, value in step["with"].items():
        choice = re.fullmatch(
            r"\$\{\{ steps\.last-green\.outputs\.run-id != '' && '([^']*)' \|\| '' \}\}", str(value)
        )
        inputs[name] = (choice.group(1) if green else "") if choice else str(value)
    return inputs


@pytest.mark.loopback
@pytest.mark.parametrize("green", [True, False], ids=["against-last-green", "first-sweep"])
def test_the_example_workflow_runs(tmp_path, green):
    """The example's gate step through action.yml, as a runner runs it
    (tests/project/test_action.py), with the evalgate of this checkout (`install: false`)."""
    from tests.project.test_action import checkout_env, run_action

    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((ROOT / "examples" / "github-actions-verify.yml").read_text())
    [step] = [
        s for s in workflow["jobs"]["verify-evals"]["steps"] if s.get("name") == "Gate the sweep"
    ]
    inputs = example_inputs(step, green)
    assert inputs == {
        "results": "eval-artifacts",
        "thresholds": "thresholds.json",
        "expect": ".github/expected-evals.json",
        "baseline": "baseline-artifacts" if green else "",
        "waivers": ".github/eval-waivers.yaml" if green else "",
    }
    dsr1 = {"model_prefix": "dsr1", "hardware": "b200", "kv_cache_dtype": None}
    right = answers()
    for name in ("eval-artifacts", "baseline-artifacts"):  # full runs: answers to pair
        runs = dict.fromkeys((4, 8, 16, 32, 64), right)
        evalgate_sweep(tmp_path / name, name, runs, labels=dsr1)
    (tmp_path / ".github").mkdir()
    waiver = "- {config: dsr1 b200 vllm fp8 isl=1024 osl=1024 conc=4, reason: r, who: w, "
    (tmp_path / ".github" / "eval-waivers.yaml").write_text(waiver + "until: 2999-01-01}\n")
    manifest = [
        {
            "model_prefix": "dsr1",
            "hardware": "b200",
            "framework": "vllm",
            "precision": "fp8",
            "isl": 1024,
            "osl": 1024,
            "concurrency": [4, 8, 16, 32, 64],
        }
    ]
    (tmp_path / ".github" / "expected-evals.json").write_text(json.dumps(manifest))
    (tmp_path / "thresholds.json").write_text(json.dumps({"default": {"gsm8k": 0.9}}))
    run = run_action(inputs | {"install": "false"}, tmp_path, checkout_env())
    assert run.exit_code == ExitCode.PASS, run.log
    assert run.outputs["verdict"] == "pass"
    against = "; against the baseline: 5 equivalent" if green else ""
    assert f"5 results for 5 configs: 5 pass{against}" in run.summary
    assert "```mermaid\nxychart-beta horizontal\n" in run.summary
    assert (tmp_path / run.outputs["junit"]).exists()
    verdict = json.loads((tmp_path / run.outputs["json"]).read_text())
    assert (verdict["baseline"] is not None) == green
    page = (tmp_path / run.outputs["html"]).read_text(encoding="utf-8")
    assert "<title>evalgate verify: PASS</title>" in page
    [upload] = [
        s
        for s in workflow["jobs"]["verify-evals"]["steps"]
        if "upload-artifact" in s.get("uses", "")
    ]
    assert upload["if"] == "always()"
    assert run.outputs["html"] in upload["with"]["path"].split()


@pytest.mark.unit
def test_the_documented_manifest_parses():
    text = (ROOT / "docs" / "verify.md").read_text()
    block = text.split("```json\n")[1].split("```")[0]
    expectation = expect.parse_expectation(json.loads(block), "docs")
    assert len(expectation.configs) == 5 + 4


@pytest.mark.unit
def test_collect_searches_overlapping_paths_once(tmp_path):
    path = write_result(tmp_path / "a" / "run")
    out = collect.collect([str(tmp_path), str(tmp_path / "a"), str(path), str(tmp_path)])
    assert [item.path for item in out.found] == [str(path)]
    assert out.empty == []


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_a_manifest_listing_one_config_twice_is_refused_not_met_by_one_result(tmp_path, cli):
    write_result(tmp_path / "runs" / "a", conc=4)
    manifest = tmp_path / "expect.json"
    manifest.write_text(json.dumps([{"concurrency": 4}, {"concurrency": 4}]))

    code, out, err = cli("verify", str(tmp_path / "runs"), "--expect", str(manifest))

    assert code == ExitCode.USAGE
    assert "lists the config {'concurrency': 4} twice" in err
    assert "PASS" not in out


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_a_manifest_whose_lists_multiply_past_any_sweep_is_refused_before_it_is_expanded(
    tmp_path, cli
):
    write_result(tmp_path / "runs" / "a", conc=4)
    manifest = tmp_path / "expect.json"
    axes = {name: list(range(1, 1001)) for name in ("isl", "osl", "concurrency")}
    manifest.write_text(json.dumps([{"model_prefix": ["dsr1", "gptoss"], **axes}]))

    code, out, err = cli("verify", str(tmp_path / "runs"), "--expect", str(manifest))

    assert code == ExitCode.USAGE
    assert "entry 0 expands to 2,000,000,000 configs (the product of its lists)" in err
    assert "List the configs the sweep ran." in err
    assert "PASS" not in out


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
@pytest.mark.parametrize("flag", ["--junit", "--json", "GITHUB_STEP_SUMMARY"])
@pytest.mark.parametrize("where", ["under a file", "a folder"])
def test_an_unwritable_output_is_refused_before_any_verdict_is_printed(
    tmp_path, cli, monkeypatch, flag, where
):
    write_result(tmp_path / "runs" / "a")
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder\n")
    target = blocker / "out.xml" if where == "under a file" else tmp_path
    args = [str(tmp_path / "runs")]
    if flag == "GITHUB_STEP_SUMMARY":
        monkeypatch.setenv("GITHUB_ACTIONS", "true")
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    else:
        args += [flag, str(target)]

    code, out, err = cli("verify", *args)

    assert code == ExitCode.USAGE
    assert out == ""  # no verdict printed that the exit code would then contradict
    assert f"Cannot write {target}: " in err and f"({flag}). Pass a writable path." in err


@pytest.mark.loopback
@pytest.mark.parametrize("flag", ["--junit", "--json", "--html"])
def test_a_report_whose_write_fails_midway_leaves_the_old_report_whole(tmp_path, flag):
    """A write cut off partway (here the file-size limit, as a full disk or a kill would) never
    leaves half a report: the earlier report stays as it was, and no temporary file is left."""
    write_result(tmp_path / "runs" / "a")
    target = tmp_path / "reports" / "report"
    target.parent.mkdir()
    target.write_text("the earlier report\n")
    limit = 256  # every report of one result is longer

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-long write fails, not kills
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = finish(
        start_subprocess(
            "verify",
            str(tmp_path / "runs"),
            flag,
            str(target),
            env={"PYTHONDONTWRITEBYTECODE": "1"},
            preexec_fn=limited,
        ),
        120,
    )

    # the verdict's exit code stands, and the verdict line, printed last, says what is missing
    assert done.code == ExitCode.PASS, done.err
    assert f"ArtifactError: Cannot write {target}: File too large ({flag})." in done.err
    assert done.out.splitlines()[-1].startswith("evalgate verify: PASS (exit 0): ")
    assert done.out.splitlines()[-1].endswith(f"; not written (see above): {flag} {target}")
    assert target.read_text() == "the earlier report\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report"]


VERIFY = (sys.executable, "-m", "evalgate.cli", "verify")


@pytest.mark.loopback
def test_a_report_to_a_fifo_is_written_through_it_not_replaced_by_a_file(tmp_path):
    """`--json /dev/stdout`, `--json >(jq .)`: a stream is written as it is; replacing it with a
    file would lose the report (and, as root, /dev/stdout itself)."""
    write_result(tmp_path / "runs" / "a")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open first: verify's open never waits
    try:
        done = run_subprocess("verify", str(tmp_path / "runs"), "--json", str(fifo))
        written = os.read(reader, 1 << 16).decode()  # one result's verdict fits the pipe
    finally:
        os.close(reader)

    assert done.returncode == ExitCode.PASS, done.stderr
    assert json.loads(written)["verdict"] == "pass"
    assert fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "runs"]


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_a_report_through_a_link_is_written_to_the_file_it_names_keeping_its_mode(tmp_path, cli):
    write_result(tmp_path / "runs" / "a")
    shared = tmp_path / "shared" / "verdict.json"
    shared.parent.mkdir()
    shared.write_text("the earlier report\n")
    shared.chmod(0o600)
    link = tmp_path / "verdict.json"
    link.symlink_to(shared)

    code, _, err = cli("verify", str(tmp_path / "runs"), "--json", str(link))

    assert code == ExitCode.PASS, err
    assert link.is_symlink()
    assert json.loads(shared.read_text())["verdict"] == "pass"
    assert shared.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in shared.parent.iterdir()) == ["verdict.json"]


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
def test_a_report_through_a_link_to_an_input_is_refused(tmp_path, cli):
    result = write_result(tmp_path / "runs" / "a")
    before = result.read_bytes()
    link = tmp_path / "report.json"
    link.symlink_to(result)

    code, out, err = cli("verify", str(tmp_path / "runs"), "--json", str(link))

    assert code == ExitCode.USAGE
    assert f"--json {link} takes the name of a run's evidence" in err
    assert out == ""
    assert result.read_bytes() == before and link.is_symlink()


@pytest.mark.usefixtures("verify_only")
@pytest.mark.unit
@pytest.mark.parametrize("flag", ["--json", "--junit"])
def test_a_report_that_would_overwrite_an_input_is_refused(tmp_path, cli, flag):
    result = write_result(tmp_path / "runs" / "a")
    before = result.read_bytes()

    code, out, err = cli("verify", str(tmp_path / "runs"), flag, str(result))

    assert code == ExitCode.USAGE
    assert f"{flag} {result} takes the name of a run's evidence" in err
    assert out == ""
    assert result.read_bytes() == before


@pytest.mark.loopback
def test_a_manifest_or_a_result_repeating_a_key_is_refused(tmp_path):
    """msgspec keeps the last of a repeated key: the one reader counts the keys itself."""
    path = write_result(tmp_path / "runs" / "a")
    manifest = tmp_path / "expect.json"
    manifest.write_text('{"count": 1, "count": 2}')

    refused = run_subprocess("verify", str(tmp_path / "runs"), "--expect", str(manifest))
    assert refused.returncode == ExitCode.USAGE
    assert f"--expect: {manifest} repeats the key 'count' in one object ($)" in refused.stderr

    text = path.read_text()
    path.write_text(text.replace('"status": "pass"', '"status": "error", "status": "pass"', 1))
    assert path.read_text() != text
    malformed = run_subprocess("verify", str(tmp_path / "runs"))
    assert malformed.returncode == ExitCode.FAIL, malformed.stdout  # malformed, as verify fails it
    assert "repeats the key 'status' in one object ($)" in malformed.stdout


@pytest.mark.loopback
def test_a_job_summary_that_cannot_be_written_keeps_the_verdicts_exit_code(tmp_path):
    """GITHUB_STEP_SUMMARY on a full disk (/dev/full): the verdict printed is the exit code, and
    the verdict line, printed last, names the report it could not write."""
    write_result(tmp_path / "runs" / "a")
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": "/dev/full"}

    done = run_subprocess(
        "verify", str(tmp_path / "runs"), "--json", str(tmp_path / "verdict.json"), env=env
    )

    assert done.returncode == ExitCode.PASS, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("evalgate verify: PASS (exit 0): ")
    assert last.endswith("; not written (see above): GITHUB_STEP_SUMMARY /dev/full")
    assert "ArtifactError: Cannot write /dev/full: No space left on device" in done.stderr
    assert json.loads((tmp_path / "verdict.json").read_text())["verdict"] == "pass"
