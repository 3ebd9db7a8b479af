"""evalgate.thresholds: which floor applies to a run, and what a broken thresholds.json says."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalgate.errors import EvalgateError, ThresholdsError
from evalgate.schemas import validation_errors
from evalgate.thresholds import (
    check_task_keys,
    default_path,
    edits,
    load_thresholds,
    parse_thresholds,
    resolve_floor,
)
from tests.conftest import QUICK, json_values, temp_file
from tests.harness import HARNESS_YAML

pytestmark = pytest.mark.unit


# REFERENCE.md §3: the benchmark harness's per-model floors, default 0.90.
SHIPPED = [
    ("dsr1", 0.91),
    ("dsv4", 0.91),
    ("glm5", 0.94),
    ("glm5.1", 0.93),
    ("gptoss", 0.91),
    ("kimik2.5", 0.90),
    ("minimaxm2.5", 0.92),
    ("qwen3.5", 0.94),
]


@pytest.mark.parametrize(("prefix", "floor"), SHIPPED)
def test_shipped_floor_by_model_prefix(prefix, floor):
    found = resolve_floor(load_thresholds(), "served-name", {"model_prefix": prefix})

    assert found.value == floor
    assert found.matched == f"prefix:{prefix}"
    assert found.file == str(default_path())


def test_shipped_file_holds_exactly_the_harness_floors():
    data = load_thresholds().file

    assert data.default == {
        "gsm8k": 0.90,
        "gpqa_diamond_cot_n_shot": 0.30,
        "swebench_lite": 0.50,
    }
    assert {name: entry["gsm8k"] for name, entry in data.models.items()} == dict(SHIPPED)


def test_shipped_default_for_an_unknown_model():
    found = resolve_floor(load_thresholds(), "meta-llama/Llama-3.1-8B-Instruct")

    assert (found.value, found.matched) == (0.90, "default")


RULES = parse_thresholds(
    {
        "default": {"gsm8k": 0.90},
        "models": {
            "dsr1": {"gsm8k": 0.91},
            "glm5": {"gsm8k": 0.94},
            "glm5.1": {"gsm8k": 0.93},
            "deepseek-ai/DeepSeek-R1-0528": {"gsm8k": 0.95},
            "qwen": {"other_task": 0.5},
        },
        "overrides": [
            {"match": {"hardware": "mi355x"}, "thresholds": {"gsm8k": 0.88}},
            {"match": {"model_prefix": "dsr1", "precision": "fp4"}, "thresholds": {"gsm8k": 0.89}},
            {
                "match": {"model_prefix": "dsr1", "precision": "fp4", "hardware": "mi355x"},
                "thresholds": {"gsm8k": 0.87},
                "why": "fp4 on mi355x loses a point on dsr1",
            },
            {
                "match": {"framework": "sglang", "kv_cache_dtype": "fp8"},
                "thresholds": {"gsm8k": 0.86},
            },
            {"match": {"hardware": "b200"}, "thresholds": {"gsm8k": 0.85}},
            {"match": {"hardware": "b200"}, "thresholds": {"gsm8k": 0.84}},
            {"match": {"hardware": "h100"}, "thresholds": {"other_task": 0.1}},
            {"match": {"model": "glm5.1-fp8"}, "thresholds": {"gsm8k": 0.80}},
        ],
    },
    "rules.json",
)


RESOLUTION = [
    # (case, model, labels, floor, matched)
    (
        "exact served model name",
        "deepseek-ai/DeepSeek-R1-0528",
        {},
        0.95,
        "model:deepseek-ai/DeepSeek-R1-0528",
    ),
    (
        "exact model beats the model_prefix label",
        "deepseek-ai/DeepSeek-R1-0528",
        {"model_prefix": "glm5"},
        0.95,
        "model:deepseek-ai/DeepSeek-R1-0528",
    ),
    ("model_prefix label", "my-served-name", {"model_prefix": "dsr1"}, 0.91, "prefix:dsr1"),
    (
        "model_prefix label beats a name prefix",
        "glm5.1-int4",
        {"model_prefix": "dsr1"},
        0.91,
        "prefix:dsr1",
    ),
    ("longest name prefix wins", "glm5.1-int4", {}, 0.93, "prefix:glm5.1"),
    ("shorter name prefix", "glm5-int4", {}, 0.94, "prefix:glm5"),
    (
        "a label without a floor falls through",
        "glm5-int4",
        {"model_prefix": "nope"},
        0.94,
        "prefix:glm5",
    ),
    ("an entry without the task is skipped", "qwen3", {}, 0.90, "default"),
    ("default", "llama", {}, 0.90, "default"),
    ("no model at all", None, {}, 0.90, "default"),
    ("prefix matching is case-sensitive", "DSR1-fp8", {}, 0.90, "default"),
    ("override by hardware", "llama", {"hardware": "mi355x"}, 0.88, "override[0]:hardware=mi355x"),
    (
        "two keys beat one",
        "x",
        {"model_prefix": "dsr1", "precision": "fp4", "hardware": "b200"},
        0.89,
        "override[1]:model_prefix=dsr1,precision=fp4",
    ),
    (
        "three keys beat two and one",
        "x",
        {"model_prefix": "dsr1", "precision": "fp4", "hardware": "mi355x"},
        0.87,
        "override[2]:hardware=mi355x,model_prefix=dsr1,precision=fp4",
    ),
    (
        "framework and kv_cache_dtype",
        "x",
        {"framework": "sglang", "kv_cache_dtype": "fp8"},
        0.86,
        "override[3]:framework=sglang,kv_cache_dtype=fp8",
    ),
    (
        "between equals, the later entry wins",
        "x",
        {"hardware": "b200"},
        0.84,
        "override[5]:hardware=b200",
    ),
    (
        "every match key must equal",
        "x",
        {"framework": "sglang", "kv_cache_dtype": "auto"},
        0.90,
        "default",
    ),
    (
        "an override without the task is skipped",
        "dsr1-fp8",
        {"hardware": "h100"},
        0.91,
        "prefix:dsr1",
    ),
    ("override on the model name itself", "glm5.1-fp8", {}, 0.80, "override[7]:model=glm5.1-fp8"),
    (
        "an override beats the exact model",
        "deepseek-ai/DeepSeek-R1-0528",
        {"hardware": "mi355x"},
        0.88,
        "override[0]:hardware=mi355x",
    ),
]


@pytest.mark.parametrize(
    ("model", "labels", "floor", "matched"),
    [case[1:] for case in RESOLUTION],
    ids=[case[0] for case in RESOLUTION],
)
def test_resolve_floor(model, labels, floor, matched):
    found = resolve_floor(RULES, model, labels)

    assert found.value == floor
    assert found.matched == matched
    assert found.file == "rules.json"


def test_a_task_with_no_floor_anywhere_is_an_error():
    with pytest.raises(ThresholdsError) as caught:
        resolve_floor(RULES, "llama", {}, task="mmlu")

    assert caught.value.message == (
        "rules.json has no threshold for task 'mmlu' for model 'llama': add \"mmlu\" to "
        '"default".'
    )


BAD_FILES = [
    # (case, file text, JSON path and reason the message must name)
    ("a string", '{"default": {"gsm8k": "0.9"}}', "$.default.gsm8k: '0.9' is not of type 'number'"),
    (
        "above 1",
        '{"default": {"gsm8k": 1.5}}',
        "$.default.gsm8k: 1.5 is greater than the maximum of 1",
    ),
    (
        "zero",
        '{"default": {"gsm8k": 0}}',
        "$.default.gsm8k: 0 is less than or equal to the minimum of 0",
    ),
    ("negative", '{"default": {"gsm8k": -0.9}}', "$.default.gsm8k: -0.9 is less than or equal to"),
    (
        "a percentage",
        '{"default": {"gsm8k": 90}}',
        "$.default.gsm8k: 90 is greater than the maximum of 1",
    ),
    ("no default", '{"models": {"dsr1": {"gsm8k": 0.91}}}', "$: 'default' is a required property"),
    ("empty default", '{"default": {}}', "$.default: {} should be non-empty"),
    (
        "unknown top-level key",
        '{"default": {"gsm8k": 0.9}, "model": {"dsr1": {"gsm8k": 0.91}}}',
        "$: Additional properties are not allowed ('model' was unexpected)",
    ),
    (
        "a bad model floor",
        '{"default": {"gsm8k": 0.9}, "models": {"dsr1": {"gsm8k": "high"}}}',
        "$.models.dsr1.gsm8k: 'high' is not of type 'number'",
    ),
    (
        "an override matching an unknown label",
        '{"default": {"gsm8k": 0.9}, "overrides": [{"match": {"gpu": "b200"}, '
        '"thresholds": {"gsm8k": 0.8}}]}',
        "$.overrides[0].match: 'gpu' is not one of ['framework', 'hardware', 'kv_cache_dtype'",
    ),
    (
        "an override without thresholds",
        '{"default": {"gsm8k": 0.9}, "overrides": [{"match": {"hardware": "b200"}}]}',
        "$.overrides[0]: 'thresholds' is a required property",
    ),
    ("a list", "[0.9]", "$: [0.9] is not of type 'object'"),
]


@pytest.mark.parametrize(
    ("text", "says"), [case[1:] for case in BAD_FILES], ids=[case[0] for case in BAD_FILES]
)
def test_bad_file_names_the_json_path(tmp_path, text, says):
    path = tmp_path / "thresholds.json"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(ThresholdsError) as caught:
        load_thresholds(path)

    message = caught.value.message
    assert message.startswith(f"{path} is not a valid thresholds file: ")
    assert says in message
    assert "Thresholds are numbers in (0, 1]" in message
    assert caught.value.exit_code == 2


AMBIGUOUS_FILES = [
    # (case, file text, what the message must say): each would otherwise gate on a wrong floor
    (
        "a repeated task key",
        '{"default": {"gsm8k": 0.99, "gsm8k": 0.1}}',
        "repeats the key 'gsm8k' in one object ($.default)",
    ),
    (
        "a repeated model key",
        '{"default": {"gsm8k": 0.9}, "models": {"dsr1": {"gsm8k": 0.91}, "dsr1": {"gsm8k": 0.1}}}',
        "repeats the key 'dsr1' in one object ($.models)",
    ),
    (
        "a repeated top-level key",
        '{"default": {"gsm8k": 0.9}, "default": {"gsm8k": 0.1}}',
        "'default'",
    ),
    ("a NaN floor", '{"default": {"gsm8k": NaN}}', "$.default.gsm8k is NaN"),
    (
        "a NaN floor of a model whose name holds 'nan'",
        '{"default": {"gsm8k": 0.9}, "models": {"banana": {"gsm8k": NaN}}}',
        "$.models.banana.gsm8k is NaN",
    ),
    (
        "an Infinity floor",
        '{"default": {"gsm8k": Infinity}}',
        "$.default.gsm8k: inf is greater than the maximum of 1",
    ),
    (
        "a -Infinity model floor",
        '{"default": {"gsm8k": 0.9}, "models": {"x": {"gsm8k": -Infinity}}}',
        "-inf is less than or equal to the minimum of 0",
    ),
    (
        "an empty model key",
        '{"default": {"gsm8k": 0.9}, "models": {"": {"gsm8k": 0.1}}}',
        "$.models: '' should be non-empty",
    ),
    (
        "an empty override label",
        '{"default": {"gsm8k": 0.9}, "overrides": [{"match": {"hardware": ""}, '
        '"thresholds": {"gsm8k": 0.1}}]}',
        "$.overrides[0].match.hardware: '' should be non-empty",
    ),
]


@pytest.mark.parametrize(
    ("text", "says"),
    [case[1:] for case in AMBIGUOUS_FILES],
    ids=[case[0] for case in AMBIGUOUS_FILES],
)
def test_an_ambiguous_file_is_refused_not_read_one_way(tmp_path, text, says):
    path = tmp_path / "thresholds.json"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(ThresholdsError) as caught:
        load_thresholds(path)

    assert caught.value.message.startswith(f"{path} ")
    assert says in caught.value.message
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "default:\n  gsm8k: 0.99\n  gsm8k: 0.1\n",
            "repeats the key 'gsm8k' in one mapping (line 3)",
        ),
        ("default:\n  gsm8k: .nan\n", "$.default.gsm8k is NaN"),
        ('default:\n  gsm8k: 0.9\nmodels:\n  "":\n    gsm8k: 0.1\n', "should be non-empty"),
    ],
    ids=["a repeated key", "a NaN floor", "an empty model key"],
)
@pytest.mark.parametrize("suffix", [".yaml", ".txt"], ids=["yaml", "yaml fallback"])
def test_an_ambiguous_yaml_file_is_refused_too(tmp_path, text, says, suffix):
    path = tmp_path / f"thresholds{suffix}"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(ThresholdsError) as caught:
        load_thresholds(path)

    assert says in caught.value.message


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_floor_from_python_is_refused(value):
    with pytest.raises(ThresholdsError, match=r"\$\.default\.gsm8k(:| is)"):
        parse_thresholds({"default": {"gsm8k": value}}, "t.json")


def test_an_empty_model_key_from_python_is_refused():
    with pytest.raises(ThresholdsError, match="should be non-empty"):
        parse_thresholds({"default": {"gsm8k": 0.9}, "models": {"": {"gsm8k": 0.1}}}, "t.json")


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        (
            "thresholds.json",
            '{\n  "default": {"gsm8k": 0.9,}\n}\n',
            "not valid JSON (line 2 column",
        ),
        (
            "thresholds.yaml",
            "default:\n  gsm8k: 0.9\n    bad: [\n",
            "not valid YAML (line 3 column",
        ),
    ],
    ids=["json", "yaml"],
)
def test_invalid_json_or_yaml_names_the_file_and_line(tmp_path, name, text, says):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")

    with pytest.raises(ThresholdsError) as caught:
        load_thresholds(path)

    assert caught.value.message.startswith(f"{path} is {says}")
    assert caught.value.exit_code == 2


def test_missing_file_says_what_to_do(tmp_path):
    path = tmp_path / "nope.json"

    with pytest.raises(ThresholdsError) as caught:
        load_thresholds(path)

    assert caught.value.message == (
        f"Cannot read thresholds file {path}: No such file or directory. Pass --thresholds "
        "with an existing file, or leave it out to use the shipped one."
    )


def test_a_valid_file_loads_with_its_path(tmp_path):
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps({"default": {"gsm8k": 1}, "models": {}}), encoding="utf-8")

    found = resolve_floor(load_thresholds(path), "anything")

    assert (found.value, found.file) == (1.0, str(path))


@pytest.mark.parametrize("name", ["thresholds.yaml", "thresholds.yml", "thresholds"])
def test_the_harness_yaml_file_loads_as_it_is(tmp_path, name):
    path = tmp_path / name
    path.write_text(HARNESS_YAML, encoding="utf-8")

    loaded = load_thresholds(path)

    assert resolve_floor(loaded, "x", {"model_prefix": "glm5.1"}).value == 0.93
    assert resolve_floor(loaded, "x", task="gpqa_diamond_cot_n_shot").value == 0.30
    assert resolve_floor(loaded, "x", task="swebench_lite").value == 0.50


def test_the_shipped_file_has_the_harness_task_defaults_and_floors(tmp_path):
    path = tmp_path / "thresholds.yaml"
    path.write_text(HARNESS_YAML, encoding="utf-8")

    assert load_thresholds().file == load_thresholds(path).file


def test_a_yaml_file_breaking_the_schema_names_the_json_path(tmp_path):
    path = tmp_path / "thresholds.yaml"
    path.write_text("default:\n  gsm8k: '0.9'\n", encoding="utf-8")

    with pytest.raises(ThresholdsError) as caught:
        load_thresholds(path)

    assert "$.default.gsm8k: '0.9' is not of type 'number'" in caught.value.message
    assert caught.value.exit_code == 2


SCHEMA_CASES = [
    {"default": {"gsm8k": 0.9}, "$schema": "x", "models": {"a": {"gsm8k": 1}}},
    {"default": {"gsm8k": 0.9}, "$schema": 5},
    {"default": {"gsm8k": 0.9}, "models": []},
    {"default": {"gsm8k": 0.9}, "models": {"a": {}}},
    {"default": {"gsm8k": 0.9}, "overrides": {}},
    {"default": {"gsm8k": True}},
    {"default": {"gsm8k": 10**400}},
    {"default": {"": 0.5}},
    {"default": {"gsm8k": 0.9}, "overrides": [{"match": {}, "thresholds": {"gsm8k": 0.8}}]},
    {"default": {"gsm8k": 0.9}, "overrides": [{"match": {"model": 1}, "thresholds": {"x": 1}}]},
    {"default": {"gsm8k": 0.9}, "overrides": [{"match": {"model": "m"}, "thresholds": {}}]},
    {
        "default": {"gsm8k": 0.9},
        "overrides": [{"match": {"model": "m"}, "thresholds": {"x": 0.5}, "why": None}],
    },
    {
        "default": {"gsm8k": 0.9},
        "overrides": [{"match": {"framework": "v"}, "thresholds": {"x": 0.5}, "why": "w"}],
    },
    {
        "default": {"gsm8k": 0.9},
        "overrides": [{"match": {"model": "m"}, "thresholds": {"x": 0.5}, "x": 1}],
    },
]


@pytest.mark.parametrize("data", SCHEMA_CASES)
def test_the_typed_model_takes_what_the_schema_takes(data):
    """thresholds.py states the schema as a type: the two accept and refuse the same files."""
    fits = not validation_errors("thresholds", data)
    try:
        parse_thresholds(data, "t.json")
    except ThresholdsError as exc:
        assert not fits, exc.message
        assert "is not a valid thresholds file: $" in exc.message
    else:
        assert fits


def levenshtein(a: str, b: str) -> int:
    """The whole table, row by row: the reference the banded `edits` must agree with."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        row, last = [i], row
        for j, y in enumerate(b, 1):
            row.append(min(last[j] + 1, row[j - 1] + 1, last[j - 1] + (x != y)))
    return row[-1]


@given(st.text("abc", max_size=8), st.text("abc", max_size=8))
@settings(max_examples=2000, deadline=None)
def test_edits_is_levenshtein_up_to_two(a, b):
    distance = levenshtein(a, b)
    assert edits(a, b) == (distance if distance <= 2 else None)


def test_edits_of_a_long_key_is_cut_short():
    assert edits("g" * 100_000, "gsm8k") is None
    assert edits("x" * 50_000 + "ab", "x" * 50_000 + "ba") == 2


KNOWN = {"default": {"gsm8k": 0.9, "swebench_lite": 0.5}}


@pytest.mark.parametrize(
    ("floors", "tasks", "refused"),
    [
        ({"gsm8K": 0.97}, (), ("gsm8K", "gsm8k", "only in case")),
        ({"gsm8": 0.97}, (), ("gsm8", "gsm8k", "by 1 edit(s)")),
        ({"gsm": 0.97}, (), ("gsm", "gsm8k", "by 2 edit(s)")),
        (
            {"gpqa_diamond_cot_n_sht": 0.4},
            (),
            ("gpqa_diamond_cot_n_sht", "gpqa_diamond_cot_n_shot", "by 1"),
        ),
        ({"swebench_lit": 0.5}, (), ("swebench_lit", "swebench_lite", "by 1")),
        ({"mytsak": 0.5}, ("mytask",), ("mytsak", "mytask", "by 2")),
        ({"gs": 0.97}, (), None),  # three edits: no misspelling
        ({"mmlu": 0.5}, (), None),
        ({"mytask": 0.5}, ("mytask",), None),
        ({"gsm8k": 0.95, "gpqa_diamond_cot_n_shot": 0.4}, (), None),
    ],
)
def test_a_key_near_a_known_task_is_refused(floors, tasks, refused):
    rules = parse_thresholds({**KNOWN, "models": {"m": floors}}, "t.json")
    if refused is None:
        check_task_keys(rules, tasks)
        return
    key, task, how = refused
    with pytest.raises(ThresholdsError) as caught:
        check_task_keys(rules, tasks)
    assert caught.value.message.startswith(
        f"t.json: $.models.m.{key} names no known task, but differs from the task {task!r} {how}"
    )


def test_default_keys_are_tasks_and_an_override_key_is_checked():
    near = {"default": {"gsm8k": 0.9, "gsm8": 0.8}}
    check_task_keys(parse_thresholds({**near, "models": {"m": {"gsm8": 0.9}}}, "t.json"), ())
    override = {"match": {"hardware": "b200"}, "thresholds": {"GSM8K": 0.9}}
    with pytest.raises(ThresholdsError, match=r"\$\.overrides\[0\]\.thresholds\.GSM8K "):
        check_task_keys(parse_thresholds({**KNOWN, "overrides": [override]}, "t.json"), ())


def test_the_shipped_file_names_only_known_tasks():
    check_task_keys(load_thresholds(), ())


# Any thresholds file gives a floor in [0, 1] or a thresholds error; repeated or NaN floors refused.


threshold_values = st.one_of(
    st.floats(min_value=-1, max_value=2),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.integers(-1, 2),
    st.text(max_size=3),
    st.none(),
)


task_floors = st.dictionaries(st.sampled_from(["gsm8k", "other"]), threshold_values, max_size=2)


threshold_files = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"default": task_floors},
        optional={
            "models": st.dictionaries(st.sampled_from(["dsr1", "glm5", "fake", ""]), task_floors),
            "overrides": st.lists(
                st.fixed_dictionaries(
                    {
                        "match": st.dictionaries(
                            st.sampled_from(["model_prefix", "hardware", "precision"]),
                            st.sampled_from(["dsr1", "b200", "fp8", ""]),
                            max_size=2,
                        ),
                        "thresholds": task_floors,
                    },
                    optional={"why": st.text(max_size=10)},
                ),
                max_size=3,
            ),
        },
    ),
)


labels = st.fixed_dictionaries(
    {},
    optional={
        "model_prefix": st.sampled_from(["dsr1", "glm5", "x"]),
        "hardware": st.sampled_from(["b200", "h100"]),
        "precision": st.sampled_from(["fp8", "bf16"]),
    },
)


@QUICK
@given(threshold_files, st.sampled_from(["fake-model", "dsr1-fp8", "glm5", None]), labels)
def test_a_thresholds_file_gives_a_floor_in_0_1_or_a_thresholds_error(data, model, found):
    try:
        floor = resolve_floor(parse_thresholds(data, "t.json"), model, found)
    except EvalgateError as exc:
        assert exc.exit_code == 2
        assert exc.message.startswith("t.json ")
        return
    assert 0 < floor.value <= 1
    assert floor.file == "t.json"
    assert "" not in data.get("models", {})


floor_pairs = st.lists(
    st.tuples(st.sampled_from(["gsm8k", "other"]), st.sampled_from(["0.5", "0.95", "NaN"])),
    min_size=1,
    max_size=4,
)


@QUICK
@given(floor_pairs)
def test_a_thresholds_text_with_a_repeated_or_nan_floor_is_always_refused(pairs):
    """Whatever order and values: a file that could be read two ways never gives a floor."""
    text = '{"default": {' + ", ".join(f'"{k}": {v}' for k, v in pairs) + "}}"
    path = temp_file(text.encode())
    keys = [key for key, _ in pairs]
    ambiguous = len(set(keys)) < len(keys) or any(v == "NaN" for _, v in pairs)
    try:
        thresholds = load_thresholds(path)
    except EvalgateError as exc:
        assert ambiguous
        assert exc.exit_code == 2
        return
    assert not ambiguous
    assert thresholds.file.default == {k: float(v) for k, v in pairs}
