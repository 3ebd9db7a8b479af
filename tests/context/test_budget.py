"""evalgate.context.budget: EVAL_MAX_MODEL_LEN, the output budget and the served limits, as
tables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalgate.context.budget import (
    Limit,
    choose_budget,
    derive_context,
    derive_max_model_len,
    served_limits_from_args,
)
from evalgate.errors import (
    ContextError,
)
from tests.conftest import QUICK, load_result
from tests.fakeengine import EngineBehaviour, FakeEngine
from tests.harness import (
    SERVED,
    cli_hook,
    collect_rows,
    harness_thresholds,
    set_job,
    uploaded,
    validate,
)

NATIVE_QWEN = Limit(262144, "config max_position_embeddings")


NATIVE_16K = Limit(16384, "config max_position_embeddings")


ROUTER = "http://router:8000/v1/models"


PREFILL = "http://prefill-0:8100/v1/models"


DECODE = "http://decode-0:8200/v1/models"


DERIVATIONS = [
    # (case, inputs, EVAL_MAX_MODEL_LEN, requested, steps that must appear, in order)
    (
        "isl+osl+margin under the native maximum",
        {"isl": 1024, "osl": 1024, "native": NATIVE_QWEN, "served": ()},
        2304,
        2304,
        ["ISL 1024 + OSL 1024 + margin 256 = 2304"],
    ),
    (
        "capped at the native maximum",
        {"isl": 8192, "osl": 8192, "native": NATIVE_16K, "served": ()},
        16384,
        16640,
        [
            "ISL 8192 + OSL 8192 + margin 256 = 16640",
            "capped at the native maximum 16384 (config max_position_embeddings)",
        ],
    ),
    (
        "acceptance: served 9472 fits exactly",
        {"isl": 8192, "osl": 1024, "native": NATIVE_QWEN, "served": (Limit(9472, ROUTER),)},
        9472,
        9472,
        [
            "ISL 8192 + OSL 1024 + margin 256 = 9472",
            f"within every served limit: 9472 ({ROUTER})",
        ],
    ),
    (
        "acceptance: served 8192 clamps",
        {"isl": 8192, "osl": 1024, "native": NATIVE_QWEN, "served": (Limit(8192, ROUTER),)},
        8192,
        9472,
        [
            "ISL 8192 + OSL 1024 + margin 256 = 9472",
            f"clamped to the served limit 8192 ({ROUTER}); served limits seen: 8192 ({ROUTER})",
        ],
    ),
    (
        "the smallest of several served limits wins, each listed",
        {
            "isl": 8192,
            "osl": 1024,
            "native": NATIVE_QWEN,
            "served": (Limit(9472, ROUTER), Limit(9472, PREFILL), Limit(4096, DECODE)),
        },
        4096,
        9472,
        [
            f"clamped to the served limit 4096 ({DECODE}); served limits seen: "
            f"9472 ({ROUTER}), 9472 ({PREFILL}), 4096 ({DECODE})"
        ],
    ),
    (
        "no native maximum: the served limit bounds the request",
        {"isl": 8192, "osl": 8192, "native": None, "served": (Limit(9472, ROUTER),)},
        9472,
        16640,
        ["ISL 8192 + OSL 8192 + margin 256 = 16640", "clamped to the served limit 9472"],
    ),
    (
        "no ISL/OSL: start from the native maximum, clamp to what is served",
        {"isl": None, "osl": None, "native": NATIVE_QWEN, "served": (Limit(32768, ROUTER),)},
        32768,
        None,
        [
            "ISL/OSL not given (0 or unset): starting from the native maximum 262144 "
            "(config max_position_embeddings)",
            "clamped to the served limit 32768",
        ],
    ),
    (
        "no ISL/OSL and no native maximum: the served limit",
        {"isl": None, "osl": None, "native": None, "served": (Limit(2048, ROUTER),)},
        2048,
        None,
        [
            "ISL/OSL not given (0 or unset): starting from the served limit",
            "within every served limit",
        ],
    ),
    (
        "no ISL/OSL, nothing served: the native maximum alone (the harness's agentic rows)",
        {"isl": None, "osl": None, "native": NATIVE_QWEN, "served": ()},
        262144,
        None,
        ["ISL/OSL not given (0 or unset): starting from the native maximum 262144"],
    ),
    (
        "OSL missing: ISL alone cannot size the context, the native maximum does",
        {"isl": 8192, "osl": None, "native": NATIVE_16K, "served": ()},
        16384,
        None,
        ["OSL not given (0 or unset), so ISL 8192 is not used: starting from the native"],
    ),
    (
        "override replaces the derivation",
        {"isl": 8192, "osl": 1024, "native": NATIVE_QWEN, "served": (), "override": 4096},
        4096,
        9472,
        ["EVAL_MAX_MODEL_LEN=4096 given explicitly"],
    ),
    (
        "override alone is enough",
        {"isl": None, "osl": None, "native": None, "served": (), "override": 3000},
        3000,
        None,
        ["EVAL_MAX_MODEL_LEN=3000 given explicitly"],
    ),
    (
        "override is still clamped to what is served",
        {
            "isl": None,
            "osl": None,
            "native": None,
            "served": (Limit(2048, ROUTER),),
            "override": 9000,
        },
        2048,
        None,
        ["EVAL_MAX_MODEL_LEN=9000 given explicitly", "clamped to the served limit 2048"],
    ),
    (
        "override may exceed the native maximum (the user said so)",
        {"isl": 1, "osl": 1, "native": NATIVE_16K, "served": (), "override": 20000},
        20000,
        258,
        ["EVAL_MAX_MODEL_LEN=20000 given explicitly"],
    ),
    (
        "margin 0",
        {"isl": 100, "osl": 50, "native": NATIVE_16K, "served": (), "margin": 0},
        150,
        150,
        ["ISL 100 + OSL 50 + margin 0 = 150"],
    ),
]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("inputs", "expected", "requested", "steps"),
    [case[1:] for case in DERIVATIONS],
    ids=[case[0] for case in DERIVATIONS],
)
def test_derive_max_model_len(inputs, expected, requested, steps):
    arguments = {"margin": 256, "override": None, **inputs}

    value, asked, taken = derive_max_model_len(**arguments)

    assert value == expected
    assert asked == requested
    positions = []
    for step in steps:
        matching = [i for i, line in enumerate(taken) if step in line]
        assert matching, f"{step!r} not in {taken}"
        positions.append(matching[0])
    assert positions == sorted(positions), taken


MISSING = [
    # (case, inputs, names that must appear, names that must not)
    (
        "nothing at all",
        {"isl": None, "osl": None, "native": None, "served": ()},
        ["ISL and OSL (--isl/--osl or ISL/OSL)", "native maximum", "served --max-model-len"],
        [],
    ),
    (
        "ISL/OSL given, no native maximum, nothing served",
        {"isl": 8192, "osl": 1024, "native": None, "served": ()},
        ["native maximum (--model-config or MODEL_PATH)", "served --max-model-len"],
        ["ISL and OSL"],
    ),
    (
        "OSL missing, nothing else",
        {"isl": 8192, "osl": None, "native": None, "served": ()},
        ["ISL and OSL", "native maximum", "served --max-model-len"],
        [],
    ),
]


@pytest.mark.parametrize(
    ("inputs", "named", "not_named"),
    [case[1:] for case in MISSING],
    ids=[case[0] for case in MISSING],
)
@pytest.mark.unit
def test_missing_inputs_are_named(inputs, named, not_named):
    with pytest.raises(ContextError) as caught:
        derive_max_model_len(margin=256, override=None, **inputs)

    message = caught.value.message
    assert message.startswith("Cannot derive EVAL_MAX_MODEL_LEN: missing ")
    for name in named:
        assert name in message
    for name in not_named:
        assert name not in message
    assert "--eval-max-model-len (EVAL_MAX_MODEL_LEN)" in message
    assert "never falls back to a default length" in message
    assert caught.value.exit_code == 2


PROMPT = Limit(900, "longest of 3 candidates, /tokenize")


BUDGETS = [
    # (case, inputs, max_tokens, steps, warnings)
    (
        "harness: ctx - 4096 above 4096",
        {"ctx": 9472, "policy": "harness"},
        5376,
        ["harness policy: ctx - 4096 = 5376"],
        [],
    ),
    (
        "harness: ctx / 2 at exactly 4096",
        {"ctx": 4096, "policy": "harness"},
        2048,
        ["harness policy: ctx / 2 = 2048"],
        [],
    ),
    (
        "harness: ctx / 2 below 4096",
        {"ctx": 2048, "policy": "harness"},
        1024,
        ["harness policy: ctx / 2 = 1024"],
        [],
    ),
    (
        "harness: odd ctx / 2 rounds down",
        {"ctx": 2049, "policy": "harness"},
        1024,
        ["harness policy: ctx / 2 = 1024"],
        [],
    ),
    (
        "harness: capped at 16384",
        {"ctx": 131072, "policy": "harness"},
        16384,
        ["harness policy: ctx - 4096 = 126976", "capped at 16384"],
        [],
    ),
    (
        "harness: just above 4096 leaves one token, with a warning",
        {"ctx": 4097, "policy": "harness"},
        1,
        ["harness policy: ctx - 4096 = 1"],
        ["max_tokens=1 is below 256"],
    ),
    (
        "fit: ctx minus the longest prompt",
        {"ctx": 9472, "policy": "fit", "prompt_tokens": PROMPT},
        8572,
        [
            "fit policy: ctx 9472 - longest prompt 900 tokens "
            "(longest of 3 candidates, /tokenize) = 8572"
        ],
        [],
    ),
    (
        "fit: capped",
        {"ctx": 131072, "policy": "fit", "prompt_tokens": PROMPT},
        16384,
        ["capped at 16384"],
        [],
    ),
    (
        "fit: a smaller cap",
        {"ctx": 9472, "policy": "fit", "prompt_tokens": PROMPT, "cap": 2048},
        2048,
        ["capped at 2048"],
        [],
    ),
    (
        "fit: under 256 warns",
        {"ctx": 1000, "policy": "fit", "prompt_tokens": PROMPT},
        100,
        ["= 100"],
        [
            "max_tokens=100 is below 256: long answers will be cut and scored wrong. "
            "Serve a larger --max-model-len for a meaningful score."
        ],
    ),
    (
        "fit: exactly 256 does not warn",
        {"ctx": 1156, "policy": "fit", "prompt_tokens": PROMPT},
        256,
        ["= 256"],
        [],
    ),
    (
        "forced: used as given, even above the context",
        {"ctx": 9472, "policy": "fit", "prompt_tokens": None, "forced": 12288},
        12288,
        ["max_tokens=12288 forced by --max-tokens (the probe checks it)"],
        [],
    ),
    (
        "forced: beats the harness policy and the cap",
        {"ctx": 2048, "policy": "harness", "forced": 100, "cap": 50},
        100,
        ["max_tokens=100 forced by --max-tokens"],
        [],
    ),
]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("inputs", "expected", "steps", "warnings"),
    [case[1:] for case in BUDGETS],
    ids=[case[0] for case in BUDGETS],
)
def test_choose_budget(inputs, expected, steps, warnings):
    arguments = {"prompt_tokens": None, "cap": 16384, "forced": None, **inputs}

    value, taken, warned = choose_budget(**arguments)

    assert value == expected
    for step in steps:
        assert any(step in line for line in taken), taken
    assert len(warned) == len(warnings), warned
    for expected_warning, warning in zip(warnings, warned, strict=True):
        assert expected_warning in warning


@pytest.mark.unit
def test_fit_with_no_room_to_answer():
    with pytest.raises(ContextError) as caught:
        choose_budget(ctx=900, prompt_tokens=PROMPT, policy="fit", cap=16384, forced=None)

    assert caught.value.message == (
        "The eval context 900 leaves no room to answer: the longest GSM8K prompt takes 900 "
        "tokens (longest of 3 candidates, /tokenize). Serve a larger --max-model-len, or raise "
        "ISL/OSL."
    )


@pytest.mark.unit
def test_fit_without_a_measured_prompt_says_what_to_do():
    with pytest.raises(ContextError) as caught:
        choose_budget(ctx=9472, prompt_tokens=None, policy="fit", cap=16384, forced=None)

    assert "none was measured" in caught.value.message
    assert "--budget-policy harness or give --max-tokens" in caught.value.message


def context(**changes):
    arguments = {
        "isl": 8192,
        "osl": 1024,
        "margin": 256,
        "native": NATIVE_QWEN,
        "served": [Limit(9472, ROUTER)],
        "override": None,
        "prompt_tokens": PROMPT,
        "policy": "fit",
        "cap": 16384,
        "forced_max_tokens": None,
        **changes,
    }
    return derive_context(**arguments)


@pytest.mark.unit
def test_acceptance_served_9472():
    result = context(native_steps=("config.json: smallest length key: ...",))

    assert result.eval_max_model_len == 9472
    assert result.max_tokens == 8572
    assert result.budget_policy == "fit"
    assert result.requested == 9472
    assert result.served_min == Limit(9472, ROUTER)
    assert result.steps[0] == "config.json: smallest length key: ..."
    assert result.steps[1] == "ISL 8192 + OSL 1024 + margin 256 = 9472"
    assert result.steps[-1].startswith("fit policy: ctx 9472 - longest prompt 900")
    assert result.warnings == ()
    assert not result.truncation_risk


@pytest.mark.unit
def test_acceptance_served_8192_clamps_and_says_so():
    result = context(served=[Limit(8192, ROUTER)])

    assert result.eval_max_model_len == 8192
    assert result.max_tokens == 8192 - 900
    assert any(step.startswith("clamped to the served limit 8192") for step in result.steps)


@pytest.mark.unit
def test_as_env_prints_shell_assignments():
    assert context().as_env() == "EVAL_MAX_MODEL_LEN=9472\nEVAL_MAX_TOKENS=8572\n"


@pytest.mark.unit
def test_the_incident_budget_is_flagged_as_truncating():
    # The harness's fallback budget 12288 against an engine serving 9472.
    result = context(forced_max_tokens=12288)

    assert result.budget_policy == "forced"
    assert result.max_tokens == 12288
    assert result.truncation_risk
    assert result.warnings == (
        "longest prompt 900 + max_tokens 12288 = 13188 exceeds the served limit 9472: "
        "answers may be cut silently at the limit",
    )


@pytest.mark.unit
def test_harness_policy_can_truncate_a_long_prompt():
    result = context(policy="harness", prompt_tokens=Limit(4500, "measured"))

    assert result.max_tokens == 5376
    assert result.truncation_risk
    assert (
        "longest prompt 4500 + max_tokens 5376 = 9876 exceeds the served limit 9472"
        in (result.warnings[-1])
    )


@pytest.mark.unit
def test_fit_policy_never_truncates():
    result = context(prompt_tokens=Limit(9000, "measured"))

    assert result.max_tokens == 472
    assert not result.truncation_risk


@pytest.mark.unit
def test_the_smallest_served_limit_bounds_truncation():
    result = context(
        served=[Limit(9472, PREFILL), Limit(2048, DECODE)], policy="harness", prompt_tokens=None
    )

    assert result.eval_max_model_len == 2048
    assert result.served_min == Limit(2048, DECODE)
    assert result.max_tokens == 1024
    assert not result.truncation_risk  # no measured prompt: nothing to compare


@pytest.mark.unit
def test_context_errors_propagate_from_either_stage():
    with pytest.raises(ContextError, match="missing"):
        context(isl=None, osl=None, native=None, served=[])
    with pytest.raises(ContextError, match="leaves no room"):
        context(prompt_tokens=Limit(9472, "measured"))


SERVER_ARGS = [
    ("vllm", "--model /models/dsr1 --max-model-len 9472 --tensor-parallel-size 8", [9472]),
    ("vllm with =", "--max-model-len=9472 --enforce-eager", [9472]),
    ("vllm underscores", "--max_model_len 4096", [4096]),
    ("sglang", "--model-path /m --context-length 8192 --tp 8", [8192]),
    ("sglang with =", "--context-length=8192", [8192]),
    ("trtllm-serve", "/models/gptoss --max_seq_len 2048 --max_batch_size 64", [2048]),
    ("several flags, in order", "--max-model-len 9472 --context-length 4096", [9472, 4096]),
    ("extra spaces", "--max-model-len    1024", [1024]),
    ("multi-line script", "vllm serve m \\\n  --max-model-len 16384 \\\n  --port 8000", [16384]),
    ("no flag", "--model m --tensor-parallel-size 8", []),
    ("empty", "", []),
    ("other lengths are not the served length", "--max-num-batched-tokens 8192", []),
    ("old vLLM's --max-seq-len-to-capture is not it", "--max-seq-len-to-capture 8192", []),
]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "expected"),
    [case[1:] for case in SERVER_ARGS],
    ids=[case[0] for case in SERVER_ARGS],
)
def test_served_limits_from_args(args, expected):
    found = served_limits_from_args(args, "PREFILL_SERVER_CONFIG")

    assert [limit.value for limit in found] == expected
    assert all(limit.source == "PREFILL_SERVER_CONFIG" for limit in found)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "expected"), [("--max-model-len 32k", 32000), ("--max-model-len 32K", 32768)]
)
def test_served_limit_in_vllm_human_readable_form(args, expected):
    assert [limit.value for limit in served_limits_from_args(args, "x")] == [expected]


# The benchmark harness's agentic rows as it runs them today (InferenceX main of 2026-08-21): ISL,
# OSL and max-model-len '0' ("not given"): the context is the model's native maximum, clamped to
# what the engines serve, and the harness's budget. Each job runs `evalgate hook` with only the
# job's own variables; the staged files are read by the harness's rules (tests/harness.py).

MODEL_CONFIGS = Path(__file__).parent / "data" / "model_configs"
NATIVE = 163840  # DeepSeek-R1's max_position_embeddings (yarn: already scaled)
HARNESS_BUDGET = min(NATIVE - 4096, 16384)


def model_dir(tmp_path: Path) -> Path:
    """A MODEL_PATH holding DeepSeek-R1's config.json, as the job's runner stages the model."""
    folder = tmp_path / "DeepSeek-R1"
    folder.mkdir()
    shutil.copy(MODEL_CONFIGS / "deepseek-r1.json", folder / "config.json")
    return folder


AGENTIC = {"ISL": "0", "OSL": "0", "EVAL_MAX_MODEL_LEN": "0", "TP": "8"}


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
@pytest.mark.parametrize("zero", ["0", "", "0k"])
def test_nothing_that_gives_a_context_is_still_a_clear_error(cli, monkeypatch, zero):
    """ISL=0 and no model config and no engine: nothing to start from, exit 2, nothing guessed."""
    for name in ("ISL", "OSL", "EVAL_MAX_MODEL_LEN"):
        monkeypatch.setenv(name, zero)
    result = cli("context", "--model", "m")
    assert result.code == 2
    assert "ContextError: Cannot derive EVAL_MAX_MODEL_LEN: missing ISL and OSL" in result.err
    assert "never falls back to a default length" in result.err


@pytest.mark.loopback
def test_a_negative_isl_is_still_refused(cli, monkeypatch):
    monkeypatch.setenv("ISL", "-1")
    result = cli("context", "--model", "m", "--osl", "8")
    assert result.code == 2
    assert "--isl = -1 (set by --isl or EVALGATE_ISL or ISL)" in result.err
    assert "out of range: give 1 to 2,147,483,647" in result.err


# Server arguments give positive limits or name the unreadable one, whatever they say.


server_words = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["--max-model-len", "--max_model_len", "--context-length", "--port", "="]),
    st.from_regex(r"\A[0-9]{1,6}[kKmM]?\Z"),
)


@QUICK
@given(st.one_of(st.text(max_size=80), st.lists(server_words, max_size=6).map(" ".join)))
@pytest.mark.unit
def test_server_arguments_give_positive_limits_or_name_the_unreadable_one(args):
    try:
        limits = served_limits_from_args(args, "--server-config #1")
    except ContextError as exc:
        assert exc.message.startswith("--server-config #1 holds --")
        assert exc.exit_code == 2
        return
    for limit in limits:
        assert limit.value > 0
        assert limit.source == "--server-config #1"
