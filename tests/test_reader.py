"""The one reader (evidence/read.py): strict, typed, naming the JSON path, nesting bounded."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalgate.errors import ArtifactError, ExitCode
from evalgate.evidence.artifacts import read_result, read_samples
from evalgate.evidence.model import Result, Sample
from evalgate.reader import MAX_CHARS, MAX_DEPTH, Written, decode, decode_lines, read
from tests.conftest import NO_WAIT, config_file, load_result, run_args, run_subprocess
from tests.tasks.task_files import GOOD, floor_file, run_task, write_task
from tests.verify.sweeps import write_result

DOCUMENTS = Path(__file__).parent / "data" / "documents"


def result(tmp_path: Path, change: Any = None) -> Path:
    doc = json.loads((DOCUMENTS / "result.json").read_text())
    if change is not None:
        change(doc)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.unit
def test_a_wrong_type_is_refused_naming_its_json_path_first(tmp_path):
    path = result(tmp_path, lambda doc: doc["scores"][1].update(n="1319"))

    with pytest.raises(ArtifactError) as refused:
        read_result(path)

    assert refused.value.message == (
        f"{path} is not a valid evalgate result (result.schema.json): "
        "$.scores[1].n: Expected `int`, got `str`"
    )


@pytest.mark.unit
def test_a_sample_line_names_its_file_line_and_path(tmp_path):
    sample = json.loads((DOCUMENTS / "sample.json").read_text())
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps(sample) + "\n" + json.dumps(sample | {"doc_id": -1}) + "\n")

    with pytest.raises(ArtifactError, match=r"line 2 is not a valid evalgate sample: \$\.doc_id: "):
        read_samples(path)


@pytest.mark.unit
@pytest.mark.parametrize("field", ["doc_id", "completion_tokens", "repeat"])
def test_a_sample_line_with_an_integer_past_64_bits_is_refused_naming_its_line(tmp_path, field):
    """samples.jsonl is decoded in one pass; an integer past 64 bits still sends it line by line,
    where the reader names the line, and the type names the field and its bound."""
    sample = json.loads((DOCUMENTS / "sample.json").read_text())
    lines = [sample, sample | {"doc_id": 1, field: 2**64}]
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    said = rf"line 2 is not a valid evalgate sample: \$\.{field}: Expected `int` <= {2**63 - 1}$"
    with pytest.raises(ArtifactError, match=said):
        read_samples(path)


@pytest.mark.unit
def test_digits_inside_a_string_are_no_integer(tmp_path):
    sample = json.loads((DOCUMENTS / "sample.json").read_text())
    digits = "1" * 64  # a hash of digits, a long number in a question: text, not a number
    lines = [sample | {"prompt_sha256": digits}, sample | {"doc_id": 1, "question": digits}]
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert [s.prompt_sha256 for s in read_samples(path)] == [digits, sample["prompt_sha256"]]


@pytest.mark.unit
def test_a_repeated_doc_id_is_refused_naming_its_line(tmp_path):
    sample = json.loads((DOCUMENTS / "sample.json").read_text())
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps(sample) + "\n\n" + json.dumps(sample) + "\n")
    with pytest.raises(ArtifactError, match=r"samples.jsonl line 3 repeats doc_id "):
        read_samples(path)


@pytest.mark.unit
def test_nan_is_read_where_the_contract_states_no_bound(tmp_path):
    text = result(tmp_path).read_text()
    nan_stderr = tmp_path / "nan.json"
    nan_stderr.write_text(text.replace('"stderr": 0.006003', '"stderr": NaN', 1))
    assert str(read_result(nan_stderr).scores[0].stderr) == "nan"

    nan_value = tmp_path / "value.json"
    nan_value.write_text(text.replace('"value": 0.95,', '"value": NaN,', 1))
    with pytest.raises(ArtifactError, match=r"\$\.scores\[0\]\.value: Expected `float` >= 0.0"):
        read_result(nan_value)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.unit
@pytest.mark.parametrize(("depth", "refused"), [(MAX_DEPTH, False), (MAX_DEPTH + 1, True)])
def test_plain_values_are_held_to_the_depth_bound(depth, refused):
    if refused:
        with pytest.raises(ArtifactError, match=f"more than {MAX_DEPTH} levels deep"):
            decode(nested(depth), where="x.json")
    else:
        assert decode(nested(depth), where="x.json") == json.loads(nested(depth))


@pytest.mark.unit
@pytest.mark.parametrize("depth", [5_000, 1_000_000])
@pytest.mark.parametrize("kind", [Any, Result, dict[str, Any]])
def test_past_the_recursion_limit_any_file_is_malformed(tmp_path, depth, kind):
    path = tmp_path / "deep.json"
    path.write_text('{"schema": ' + nested(depth) + "}")

    with pytest.raises(ArtifactError, match=f"^{path} "):
        read(path, kind)


@pytest.mark.unit
def test_python_json_reads_what_msgspec_refuses_and_says_where_it_breaks(tmp_path):
    assert decode('{"x": Infinity}') == {"x": float("inf")}
    with pytest.raises(ArtifactError, match=r"^a\.json is not valid JSON \(line 2 column 1: "):
        decode('{"x":\n', where="a.json")


_TEXT = st.text(
    st.sampled_from(["a", "b", '"', "\\", ":", " ", "\n", "\u2019", "\x00"]), max_size=4
)


@st.composite
def _written(draw: st.DrawFn, depth: int = 0) -> str:
    """A JSON text as a writer may spell it: keys that may repeat, strings with quotes and
    backslashes (escaped as json does, or as \\u0022 and \\u005c), white space around colons."""
    kind = draw(
        st.sampled_from(
            ["object", "array", "string", "number"] if depth < 3 else ["string", "number"]
        )
    )
    if kind == "number":
        return str(draw(st.integers(-5, 5)))
    if kind == "string":
        return _spelled(draw(_TEXT), draw(st.booleans()))
    inner = _WRITTEN[depth + 1]
    if kind == "array":
        return "[" + ", ".join(draw(st.lists(inner, max_size=3))) + "]"
    keys = draw(st.lists(_TEXT, max_size=4))
    space = draw(st.sampled_from(["", " ", "\n  "]))
    pairs = [f"{_spelled(k, draw(st.booleans()))}{space}:{draw(inner)}" for k in keys]
    return "{" + ", ".join(pairs) + "}"


_WRITTEN = [_written(depth) for depth in range(4)]
"""_written at each depth (3, the deepest, is a string or a number), built once: hypothesis
works out each new strategy object afresh, and a new one per draw repeated that work."""


def _spelled(text: str, unicode: bool) -> str:
    """A string as JSON, its quotes and backslashes escaped with a backslash or as \\u."""
    escapes = {'"': "\\u0022", "\\": "\\u005c"} if unicode else {}
    return '"' + "".join(escapes.get(c) or json.dumps(c)[1:-1] for c in text) + '"'


def _repeats(text: str) -> bool:
    found = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        found.append(len({k for k, _ in items}) < len(items))
        return dict(items)

    json.loads(text, object_pairs_hook=pairs)
    return any(found)


@pytest.mark.unit
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_written(), min_size=1, max_size=3))
def test_a_repeated_key_is_refused_and_only_then(texts):
    for text in texts:
        if _repeats(text):
            with pytest.raises(ArtifactError, match="repeats the key"):
                decode(text, where="x.json")
        else:
            assert decode(text, where="x.json") == json.loads(text)
    lines = "\n".join(t.replace("\n", " ") for t in texts) + "\n"
    objects = [json.loads(t) for t in texts]
    if any(map(_repeats, texts)):
        with pytest.raises(ArtifactError, match=r"x\.jsonl line \d+ repeats the key"):
            decode_lines(lines.encode(), Any, "x.jsonl")
    else:
        assert decode_lines(lines.encode(), Any, "x.jsonl") == objects


SAMPLES = Written(Sample)


_KEYS = list(Sample.__struct_fields__)


@st.composite
def _sample_line(draw: st.DrawFn) -> str:
    """A samples.jsonl line as evalgate writes it (every key), its text fields spelled with
    quotes and backslashes either way, and maybe one key of the line or of an answer twice."""
    text = st.builds(_spelled, _TEXT, st.booleans())
    answers = {
        name: {"extracted": draw(text), "correct": draw(st.sampled_from(["true", "false"]))}
        for name in draw(st.lists(st.sampled_from(["strict", "flex", 'a"b\\']), max_size=2))
    }
    line = {
        **dict.fromkeys(_KEYS, "null"),
        "doc_id": str(draw(st.integers(0, 2**63 - 1))),
        "prompt_sha256": draw(text),
        "response": draw(st.one_of(text, st.just("null"))),
        "question": draw(text),
        "target": draw(text),
        "filters": "{" + ", ".join(_answer(k, a) for k, a in answers.items()) + "}",
    }
    pairs = [f'"{key}": {value}' for key, value in line.items()]
    if draw(st.booleans()):  # a key twice, whose values may agree
        twice = draw(st.sampled_from(pairs))
        pairs.insert(draw(st.integers(0, len(pairs))), twice)
    return "{" + ", ".join(pairs) + "}"


def _answer(name: str, fields: dict[str, str]) -> str:
    return _spelled(name, False) + ": {" + ", ".join(f'"{f}": {v}' for f, v in fields.items()) + "}"


@pytest.mark.unit
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_sample_line(), min_size=1, max_size=3))
def test_lines_written_as_evalgate_writes_are_read_in_one_pass_unless_a_key_repeats(lines):
    data = ("\n".join(lines) + "\n").encode()
    read_in_one_pass = SAMPLES.read(data)
    if any(map(_repeats, lines)):
        assert read_in_one_pass is None
        with pytest.raises(ArtifactError, match="repeats the key"):
            decode_lines(data, Sample, "x.jsonl")
    else:
        assert read_in_one_pass is not None
        assert [msgspec.structs.asdict(s) for s in read_in_one_pass] == [
            msgspec.structs.asdict(s) for s in decode_lines(data, Sample, "x.jsonl")
        ]
        assert all(isinstance(s, Sample) for s in read_in_one_pass)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("broken", "into"),
    [
        ('"filters": {}', '"filters": {"a": {"extracted": "1", "correct": true, "x": 1}}'),
        ('"cluster": null, ', ""),  # written before evalgate wrote every key
        ('"cluster": null', '"cluster": null, "new": 1'),  # written by a newer evalgate
        ('"doc_id": 5', '"doc_id": 9223372036854775808'),
        ('"doc_id": 5', '"doc_id": -1'),
        ('"completion_tokens": null', '"completion_tokens": NaN'),
        ('"completion_tokens": null', '"completion_tokens": 1' + "0" * 400),
        ('"target": "t"', '"target": "\\ud800"'),
        ('"target": "t"', '"target": "t'),
    ],
)
def test_lines_not_as_evalgate_writes_them_are_left_to_decode_lines(broken, into):
    line = "{" + ", ".join(f'"{k}": null' for k in _KEYS) + "}"
    for key, value in [("doc_id", "5"), ("prompt_sha256", '""'), ("question", '"q"')]:
        line = line.replace(f'"{key}": null', f'"{key}": {value}')
    line = line.replace('"target": null', '"target": "t"').replace(
        '"filters": null', '"filters": {}'
    )
    assert SAMPLES.read(f"{line}\n".encode()) is not None
    assert broken in line
    assert SAMPLES.read(f"{line}\n{line.replace(broken, into)}\n".encode()) is None


@pytest.mark.unit
def test_a_type_whose_strings_its_values_do_not_show_is_refused():
    class Open(msgspec.Struct):
        anything: Any

    with pytest.raises(TypeError, match="Open's strings cannot be counted"):
        Written(Open)


# Deeply nested JSON is malformed wherever evalgate reads JSON (issue 25, item 2).
#
# A file of a million nested brackets (or 5,000, or 150: past evalgate's bound of 100 levels but
# under the interpreter's recursion limit) given as an input is exit 2 naming the file; met by
# `verify` in a tree, it is MALFORMED and the rest of the tree is reported as usual. Before, each
# was "InternalError ... please report" (exit 4), and verify reported nothing.


DEPTHS = [150, 5_000, 1_000_000]


TOO_DEEP = "nests arrays and objects more than 100 levels deep"


def brackets(depth: int) -> str:
    return "[" * depth + "]" * depth


def inside(depth: int) -> str:
    """A document whose one value is nested `depth` deep (a config key, a threshold)."""
    return '{"default": ' + brackets(depth) + "}"


def good_run(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "result.json").write_text((DOCUMENTS / "result.json").read_text())
    return folder


@pytest.mark.unit
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("shape", [brackets, inside])
def test_context_refuses_a_deep_model_config(cli, tmp_path, depth, shape):
    config = tmp_path / "config.json"
    config.write_text(shape(depth))

    done = cli("context", "--model-config", str(config), "--isl", "1024", "--osl", "512")

    assert done.code == 2
    assert f"ContextError: {config} " in done.err
    assert "InternalError" not in done.err


@pytest.mark.loopback
@pytest.mark.parametrize("depth", [5_000, 1_000_000])
def test_run_refuses_a_deep_model_config_and_records_why(cli, engine, tmp_path, depth):
    config, out = tmp_path / "config.json", tmp_path / "out"
    config.write_text(brackets(depth))
    done = cli(*run_args(engine.url, out, model_config=config, num_concurrent=None))

    assert done.code == 2
    assert f"ContextError: {config} " in done.err
    result = load_result(out)
    assert (result["status"], result["error"]["type"]) == ("error", "ContextError")


@pytest.mark.unit
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("suffix", [".json", ".txt"])
def test_verify_refuses_deep_thresholds(cli, tmp_path, depth, suffix):
    good_run(tmp_path / "run")
    thresholds = tmp_path / f"thresholds{suffix}"
    thresholds.write_text(inside(depth))

    done = cli("verify", str(tmp_path / "run"), "--thresholds", str(thresholds))

    assert done.code == 2
    assert f"ThresholdsError: {thresholds} {TOO_DEEP}" in done.err


@pytest.mark.unit
@pytest.mark.parametrize("depth", [5_000, 1_000_000])
@pytest.mark.parametrize("where", ["result.json", "samples.jsonl"])
def test_compare_refuses_a_deep_run(cli, tmp_path, depth, where):
    base, cand = good_run(tmp_path / "a"), good_run(tmp_path / "b")
    for run in (base, cand):
        sample = json.loads((DOCUMENTS / "sample.json").read_text())
        (run / "samples.jsonl").write_text(json.dumps(sample) + "\n")
    (cand / where).write_text(brackets(depth) + "\n")

    done = cli("compare", str(base), str(cand))

    assert done.code == 2
    assert f"ArtifactError: {cand / where}" in done.err


def _deep_value(depth: int) -> str:
    """A valid result.json but for one value nested `depth` deep (chat_template_kwargs, which
    the contract leaves open)."""
    doc = json.loads((DOCUMENTS / "result.json").read_text())
    doc["eval"]["chat_template_kwargs"] = {"x": "@"}
    return json.dumps(doc).replace('"@"', brackets(depth))


@pytest.mark.loopback
def test_verify_reports_each_deep_file_malformed_and_the_rest_as_usual(tmp_path):
    tree, report = tmp_path / "tree", tmp_path / "verdict.json"
    good = good_run(tree / "good")
    deep = {
        tree / "deep" / "result.json": brackets(1_000_000),
        tree / "value" / "result.json": _deep_value(5_000),
        tree / "hooked" / "hook.json": brackets(5_000),
        tree / "harness" / "results_2026_conc4.json": brackets(1_000_000),
        tree / "staged" / "meta_env.json": inside(5_000),
    }
    for path, text in deep.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    hooked = good_run(tree / "hooked" / "conc4")

    done = run_subprocess("verify", str(tree), "--json", str(report))

    assert done.returncode == 1, done.stderr  # the malformed files fail the gate
    outcomes = {e["path"]: e["outcome"] for e in json.loads(report.read_text())["entries"]}
    assert outcomes[str(good / "result.json")] == "pass"
    assert outcomes[str(hooked / "result.json")] == "pass"
    for path in deep:
        assert outcomes[str(path)] == "malformed", path
    assert "InternalError" not in done.stderr


@pytest.mark.unit
@pytest.mark.parametrize("depth", [5_000, 1_000_000])
def test_verify_refuses_a_deep_expect_file(cli, tmp_path, depth):
    good_run(tmp_path / "run")
    manifest = tmp_path / "expect.json"
    manifest.write_text(brackets(depth))

    done = cli("verify", str(tmp_path / "run"), "--expect", str(manifest))

    assert done.code == 2
    assert f"UsageError: --expect: {manifest} {TOO_DEEP}" in done.err


@pytest.mark.loopback
@pytest.mark.parametrize("depth", [5_000, 1_000_000])
def test_run_refuses_a_deep_baseline_before_sending_anything(cli, engine, tmp_path, depth):
    baseline = good_run(tmp_path / "baseline")
    (baseline / "result.json").write_text(_deep_value(depth))
    done = cli(*run_args(engine.url, tmp_path / "out", baseline=baseline, num_concurrent=None))

    assert done.code == 2
    assert f"ArtifactError: {baseline / 'result.json'} " in done.err
    assert engine.requests == []


@pytest.mark.loopback
def test_run_into_a_folder_holding_a_deep_result_refuses_to_bury_it(cli, engine, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").write_text(brackets(1_000_000))
    done = cli(*run_args(engine.url, out, num_concurrent=None))

    assert done.code == 2
    assert "already holds a result (status unreadable)" in done.err
    assert (out / "result.json").read_text() == brackets(1_000_000)


@pytest.mark.loopback
@pytest.mark.parametrize("where", ["header", "answer"])
def test_resume_reads_a_journal_with_a_deep_line_as_far_as_it_is_json(cli, engine, tmp_path, where):
    out = tmp_path / "out"
    args = run_args(engine.url, out, limit=4, min_samples=0, num_concurrent=None)
    assert cli(*args).code == 0
    journal = (out / "journal.jsonl").read_text().splitlines()
    journal[0 if where == "header" else 2] = brackets(1_000_000)
    (out / "journal.jsonl").write_text("\n".join(journal) + "\n")
    result = load_result(out)
    (out / "result.json").write_text(json.dumps(result | {"status": "aborted"}))
    sent = len(engine.requests)

    done = cli(*args, "--resume")

    assert done.code == 0, done.err
    resumed = load_result(out)["eval"]["requests"]["resumed"]
    asked = len(engine.requests) - sent - 1  # the probe is sent again
    assert (resumed, asked) == ((0, 4) if where == "header" else (1, 3))


# A config file (--config) is read by the one YAML reader, with its limits.


@pytest.mark.loopback
def test_an_alias_bomb_is_refused_by_the_one_yaml_reader(tmp_path):
    """A billion laughs: nine levels of ten aliases would expand to 10^9 strings; the reader
    refuses the first alias, before anything is expanded."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 10):
        aliases = ",".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{aliases}]")
    config = config_file(tmp_path, "\n".join(lines) + "\n")

    done = run_subprocess("verify", str(tmp_path), "--config", config, timeout=60)

    assert done.returncode == 2, done.stderr
    assert "uses the alias *a0 (line 2): aliases are not accepted" in done.stderr
    assert "evalgate verify:" not in done.stdout  # refused before any result is read


@pytest.mark.loopback
def test_a_config_file_past_the_readers_size_is_refused_unread(tmp_path):
    config = config_file(tmp_path, "# " + "x" * MAX_CHARS + "\n")

    done = run_subprocess("context", "--config", config, *NO_WAIT)

    assert done.returncode == 2
    assert f"over the {MAX_CHARS:,} that a file of its kind can need" in done.stderr


# A task file (--task), its data rows and a thresholds file are read by the one reader, with its
# limits, before anything is sent: the CLI in its own process against the loopback fake engine.


BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


@pytest.mark.loopback
def test_a_yaml_alias_bomb_in_a_task_file_is_refused(engine, tmp_path):
    text = GOOD + "metadata:\n" + "".join("  " + line + "\n" for line in BOMB.splitlines())
    code, out = run_task(engine, tmp_path, write_task(tmp_path, text))
    assert code == 2, out
    assert "alias" in out
    assert engine.requests == []


@pytest.mark.loopback
def test_a_yaml_alias_bomb_in_a_thresholds_file_is_refused(engine, tmp_path):
    path = tmp_path / "floors.yaml"
    path.write_text("default:\n  gsm8k: 0.9\nmodels:\n" + "".join(
        "  " + line + "\n" for line in BOMB.splitlines()
    ), encoding="utf-8")  # fmt: skip
    done = run_subprocess(*run_args(engine.url, tmp_path / "out", "--thresholds", str(path)))
    assert done.returncode == 2, done.stderr
    assert "alias" in done.stderr
    assert engine.requests == []


@pytest.mark.loopback
@pytest.mark.parametrize("kind", ["task", "thresholds"])
def test_deeply_nested_yaml_is_refused(engine, tmp_path, kind):
    deep = "[" * 100_000 + "]" * 100_000
    if kind == "task":
        code, out = run_task(engine, tmp_path, write_task(tmp_path, GOOD + f"metadata: {deep}\n"))
    else:
        path = tmp_path / "floors.yaml"
        path.write_text(f"default: {deep}\n", encoding="utf-8")
        done = run_subprocess(*run_args(engine.url, tmp_path / "out", "--thresholds", str(path)))
        code, out = done.returncode, done.stderr
    assert code == 2, out
    assert "nested" in out
    assert "Traceback" not in out and "InternalError" not in out


@pytest.mark.loopback
@pytest.mark.parametrize("digits", [309, 5000])
@pytest.mark.parametrize("kind", ["task", "thresholds.yaml", "thresholds.json"])
def test_an_integer_past_what_a_float_holds_is_refused_the_same_in_yaml_and_json(
    engine, tmp_path, kind, digits
):
    """One bound for both readers: 5,000 digits in YAML crashed (exit 4, InternalError) where
    the same in JSON was exit 2."""
    number = "9" * digits
    if kind == "task":
        code, out = run_task(
            engine, tmp_path, write_task(tmp_path, GOOD + f"metadata:\n  n: {number}\n")
        )
    else:
        path = tmp_path / f"floors.{kind.split('.')[1]}"
        body = f'{{"default": {{"gsm8k": 0.9}}, "n": {number}}}'
        path.write_text(
            body if kind.endswith("json") else f"default: {{gsm8k: 0.9}}\nn: {number}\n"
        )
        done = run_subprocess(*run_args(engine.url, tmp_path / "out", "--thresholds", str(path)))
        code, out = done.returncode, done.stderr
    assert code == 2, out
    assert f"holds an integer of {digits:,} digits" in out
    assert "past what a float holds" in out
    assert "InternalError" not in out and engine.requests == []


@pytest.mark.loopback
def test_underscores_in_a_yaml_integer_are_not_counted_as_its_digits(engine, tmp_path):
    """308 digits with YAML's separators (9_9_9..., 615 characters) are the number JSON reads
    as 308 digits: read, not refused as "an integer of 308 digits, past what a float holds"."""
    number = "_".join("9" * 308)
    code, out = run_task(
        engine, tmp_path, write_task(tmp_path, GOOD + f"metadata:\n  n: {number}\n")
    )
    assert code in (0, 1), out
    assert "past what a float holds" not in out


@pytest.mark.loopback
def test_the_largest_integer_a_float_holds_is_read_in_a_task_file(engine, tmp_path):
    """308 digits: read (the task runs); 309 are refused, above."""
    code, out = run_task(
        engine, tmp_path, write_task(tmp_path, GOOD + f"metadata:\n  n: {'9' * 308}\n")
    )
    assert code in (0, 1), out
    assert "holds an integer" not in out


REPEATED = [
    # (case, file name, text, what the refusal says): one rule for every file a run reads
    ("the task file", "task.yaml",
     GOOD.replace("num_fewshot: 1\n", "num_fewshot: 1\nnum_fewshot: 0\n"),
     "repeats the key 'num_fewshot' in one mapping (line 14)"),
    ("a data row", "test.jsonl",
     '{"question": "What is 1 + 1?", "answer": "#### 2", "answer": "#### 3"}\n',
     "line 1 repeats the key 'answer' in one object ($)"),
    ("a JSON thresholds file", "floor.json",
     '{"default": {"arithmetic": 0.99, "arithmetic": 0.01}}',
     "repeats the key 'arithmetic' in one object ($.default)"),
    ("a YAML thresholds file", "floor.yaml", "default:\n  arithmetic: 0.99\n  arithmetic: 0.01\n",
     "repeats the key 'arithmetic' in one mapping (line 3)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "text", "says"), [r[1:] for r in REPEATED], ids=[r[0] for r in REPEATED]
)
@pytest.mark.loopback
def test_a_repeated_key_is_refused_in_every_file_a_run_reads(engine, tmp_path, name, text, says):
    """msgspec and a plain YAML load keep the last of a repeated key: each file is read by the
    one reader, which refuses it naming the key, before anything is sent."""
    task = write_task(tmp_path, GOOD)
    (tmp_path / name).write_text(text, encoding="utf-8")
    floor = tmp_path / name if name.startswith("floor") else Path(floor_file(tmp_path))
    args = run_args(engine.url, tmp_path / "out", "--task", str(task), "--min-samples", "0")

    done = run_subprocess(*args, "--thresholds", str(floor), timeout=300, cwd=tmp_path)

    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "InternalError" not in done.stderr
    assert engine.requests == []


# Hostile thresholds files, model configs and result trees: each is a clear error with its exit
# code (2 for an input), in bounded time and memory, with nothing run and nothing lost.


BIG = "1" + "0" * 400
"""An integer of 401 digits: fine for Python, past any float and any count evalgate writes."""


THRESHOLDS = [
    ("a 5,000-digit integer", "t.json", '{"default": {"gsm8k": 1' + "0" * 5000 + "}}",
     "holds an integer of 5,001 digits, past what a float holds"),
    ("the same integer in YAML", "t.yaml", "default: {gsm8k: 1" + "0" * 5000 + "}\n",
     "holds an integer of 5,001 digits (line 1), past what a float holds"),
    ("a YAML 1.1 boolean key", "t.yaml", "default: {gsm8k: 0.5}\nmodels: {no: {gsm8k: 0.5}}\n",
     "has the key 'no' (line 2), which YAML reads as bool, not text: quote it"),
    ("an integer key", "t.yaml", "default: {gsm8k: 0.5}\nmodels: {123: {gsm8k: 0.5}}\n",
     "has the key '123' (line 2), which YAML reads as int"),
    ("a null key", "t.yaml", "default: {gsm8k: 0.5}\nmodels: {~: {gsm8k: 0.5}}\n",
     "which YAML reads as NoneType"),
    ("a !!set", "t.yaml", "default: !!set {gsm8k}\n", "uses the tag tag:yaml.org,2002:set"),
    ("60,000 small values", "t.yaml", "default: {gsm8k: 0.5}\nx: [" + "[]," * 60_000 + "]\n",
     "holds more than 50,000 values"),
    ("a JSON file over 4 MiB", "t.json",
     '{"default": {"gsm8k": 0.5}, "models": {' + ",".join(
         f'"m{i}": {{"gsm8k": 0.5}}' for i in range(200_000)) + "}}",
     "bytes, over the 4,194,304"),
]  # fmt: skip


@pytest.mark.unit
@pytest.mark.parametrize(
    ("name", "text", "says"), [t[1:] for t in THRESHOLDS], ids=[t[0] for t in THRESHOLDS]
)
def test_a_hostile_thresholds_file_is_exit_2_naming_it(cli, tmp_path, name, text, says):
    good_run(tmp_path / "run")
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")

    done = cli("verify", str(tmp_path / "run"), "--thresholds", str(path))

    assert done.code == 2, done.err
    assert f"ThresholdsError: {path} " in done.err
    assert says in done.err


@pytest.mark.loopback
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_thresholds_file_that_is_not_a_regular_file_is_refused_unread(tmp_path, kind):
    good_run(tmp_path / "run")
    path = tmp_path / "fifo.json"
    if kind == "fifo":
        os.mkfifo(path)  # a read would wait for a writer forever
    else:
        path = Path(os.devnull)

    done = run_subprocess("verify", str(tmp_path / "run"), "--thresholds", str(path), timeout=60)

    assert done.returncode == 2, done.stderr
    assert f"ThresholdsError: {path} is not a regular file" in done.stderr


@pytest.mark.unit
def test_a_thresholds_error_quoting_a_huge_value_stays_short(cli, tmp_path):
    good_run(tmp_path / "run")
    path = tmp_path / "t.json"
    path.write_text('{"default": {"gsm8k": 0.5}, "models": {"x": [' + "[]," * 300_000 + "[]]}}")

    done = cli("verify", str(tmp_path / "run"), "--thresholds", str(path))

    assert done.code == 2
    assert "$.models.x: [[], [], " in done.err
    assert len(done.err) < 5_000


CONFIGS = [
    ("a 401-digit length", '{"max_position_embeddings": ' + BIG + "}",
     "config.json holds an integer of 401 digits, past what a float holds: it is malformed"),
    ("a 401-digit rope factor",
     '{"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": ' + BIG + "}}",
     "config.json holds an integer of 401 digits"),
    ("a rope factor scaling past any float",
     '{"max_position_embeddings": 1e308, "rope_scaling": {"type": "linear", "factor": 1e308}}',
     "config.json: max_position_embeddings scaled by rope_scaling.factor 1e+308 is past any "
     "length"),
]  # fmt: skip


@pytest.mark.unit
@pytest.mark.parametrize(("text", "says"), [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS])
def test_a_model_config_with_numbers_past_a_float_is_exit_2(cli, tmp_path, text, says):
    config = tmp_path / "config.json"
    config.write_text(text)

    done = cli("context", "--model-config", str(config), "--isl", "1024", "--osl", "512")

    assert done.code == 2, done.err
    assert "ContextError: " in done.err and says in done.err
    assert "InternalError" not in done.err


@pytest.mark.unit
def test_verify_reports_a_result_holding_an_integer_past_64_bits_malformed(cli, tmp_path):
    """And the rest of the tree as usual (before: InternalError, nothing reported)."""
    good = good_run(tmp_path / "tree" / "good")
    bad = good_run(tmp_path / "tree" / "bad")
    text = (bad / "result.json").read_text()
    (bad / "result.json").write_text(text.replace('"n": 1319', f'"n": {BIG}', 1))
    verdict = tmp_path / "verdict.json"

    done = cli("verify", str(tmp_path / "tree"), "--json", str(verdict))

    assert done.code == 1, done.err
    outcomes = {e["path"]: e["outcome"] for e in json.loads(verdict.read_text())["entries"]}
    assert outcomes == {
        str(good / "result.json"): "pass",
        str(bad / "result.json"): "malformed",
    }
    assert f"$.eval.early_stop.filters[0].n: Expected `int` <= {2**63 - 1}" in done.out


@pytest.mark.unit
def test_verify_reports_lm_eval_results_with_a_count_past_a_float_malformed(cli, tmp_path):
    """The harness's own lm-eval output: a plain document, its integers bounded by a float."""
    from tests.verify.sweeps import lm_eval_doc, write_harness

    good = good_run(tmp_path / "tree" / "good")
    doc = lm_eval_doc()
    doc["n-samples"]["gsm8k"]["effective"] = int(BIG)
    name = "results_2026-05-01T10-00-00.000001.json"
    bad = write_harness(tmp_path / "tree" / "harness", results={name: doc}) / name
    verdict = tmp_path / "verdict.json"

    done = cli("verify", str(tmp_path / "tree"), "--json", str(verdict))

    assert done.code == 1, done.err
    outcomes = {e["path"]: e["outcome"] for e in json.loads(verdict.read_text())["entries"]}
    assert (outcomes[str(good / "result.json")], outcomes[str(bad)]) == ("pass", "malformed")
    assert "holds an integer of 401 digits, past what a float holds" in done.out


# Hostile environments, end to end: signals, closed and full streams, full and read-only disks.


@pytest.mark.loopback
def test_verify_of_a_fifo_named_result_json_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / "result.json")
    done = run_subprocess("verify", str(tmp_path), "--no-github", timeout=60)

    assert done.returncode == 1, done.stderr
    assert "is not a regular file (a FIFO, a device or a socket)" in done.stdout


# A FIFO is refused, not waited on; a manifest or result repeating a key is refused.


@pytest.mark.unit
def test_a_fifo_is_refused_not_waited_on(tmp_path):
    path = tmp_path / "result.json"
    os.mkfifo(path)
    with pytest.raises(ArtifactError, match="is not a regular file"):
        read_result(path)


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
