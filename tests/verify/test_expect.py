"""A config's identity includes its task (verify/expect.py): a GSM8K run and a GPQA-diamond run of
one model, hardware and topology are two results in verify's table, in --expect and in every report
(docs/verify.md, "How a config and a run are identified").

Black-box: real `evalgate run`s (each its own process) against the loopback engine, then
`evalgate verify` as its own process, every report read back.
"""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from evalgate.errors import ExitCode, UsageError
from evalgate.evidence.model import Labels
from evalgate.schemas import validation_errors
from evalgate.verify import expect, sweep
from tests.conftest import ROOT, SETTING_RANGES, run_subprocess
from tests.tasks.task_files import GPQA_TASK as GPQA
from tests.verify.conftest import GPQA_KEY, GSM8K_KEY, verify_reports
from tests.verify.sweeps import DSR1_CONFIG, found, write_result


@pytest.mark.loopback
def test_two_tasks_of_one_config_are_two_results_in_every_report(task_sweeps, tmp_path):
    code, out, reports = verify_reports(task_sweeps, tmp_path)

    assert code == 0, out
    rows = [re.match(r"(PASS) +(.+?)  +\d", line) for line in out.splitlines()]
    assert [row.groups() for row in rows if row] == [("PASS", GSM8K_KEY), ("PASS", GPQA_KEY)]
    assert "DUPLICATE" not in out
    assert "2 results for 2 configs: 2 pass" in out
    document = json.loads((reports / "verdict.json").read_text())
    assert validation_errors("verdict", document) == []
    assert document["schema"] == "evalgate.verdict/2"
    assert sorted((e["key"], e["task"], e["outcome"]) for e in document["entries"]) == [
        (GSM8K_KEY, "gsm8k", "pass"),
        (GPQA_KEY, GPQA, "pass"),
    ]
    cases = ET.parse(reports / "junit.xml").iter("testcase")  # noqa: S314 - evalgate's own output
    assert sorted(case.get("name", "") for case in cases) == [GSM8K_KEY, GPQA_KEY]
    summary = (reports / "summary.md").read_text()
    assert GPQA_KEY in summary and "duplicate" not in summary.lower()
    page = (reports / "page.html").read_text()
    assert GPQA_KEY in page and "duplicate" not in page.lower()


@pytest.mark.loopback
def test_an_expect_entry_without_a_task_means_gsm8k(task_sweeps, tmp_path):
    manifest = tmp_path / "expected.json"
    manifest.write_text(json.dumps([{"model_prefix": "fake", "concurrency": 4}]))

    code, out, reports = verify_reports(task_sweeps, tmp_path, "--expect", str(manifest))

    assert code == 1, out
    document = json.loads((reports / "verdict.json").read_text())
    problems = [(e["outcome"], e["key"]) for e in document["entries"] if e["source"] is None]
    assert problems == [("unexpected", GPQA_KEY)]


@pytest.mark.loopback
def test_an_expect_entry_naming_both_tasks_expects_both(task_sweeps, tmp_path):
    manifest = tmp_path / "expected.json"
    tasks = ["gsm8k", GPQA]
    manifest.write_text(json.dumps([{"model_prefix": "fake", "concurrency": 4, "task": tasks}]))

    code, out, _ = verify_reports(task_sweeps, tmp_path, "--expect", str(manifest))

    assert code == 0, out


# The expected set: config keys, manifests read and checked against what a sweep holds.


@pytest.mark.unit
@pytest.mark.parametrize(
    ("model", "labels", "key"),
    [
        (
            "deepseek-ai/DeepSeek-R1",
            {**DSR1_CONFIG, "concurrency": 64},
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


@pytest.mark.unit
def test_the_documented_manifest_parses():
    text = (ROOT / "docs" / "verify.md").read_text()
    block = text.split("```json\n")[1].split("```")[0]
    expectation = expect.parse_expectation(json.loads(block), "docs")
    assert len(expectation.configs) == 5 + 4


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
