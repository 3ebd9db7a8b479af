"""`--task FILE` is outside input: refused before anything is sent unless every key is known and
every field lm-eval renders is a plain ``{{field}}`` template. Black-box: the CLI in its own
process against task files and the loopback fake engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import load_result, run_args, run_subprocess
from tests.tasks.task_files import GOOD, PAYLOAD, floor_file, run_task, write_task

pytestmark = pytest.mark.loopback


def test_a_plain_task_file_runs(engine, tmp_path):
    code, text = run_task(engine, tmp_path, write_task(tmp_path, GOOD))
    assert code in (0, 1), text
    assert "Traceback" not in text


def test_a_task_file_is_named_by_its_path_until_read_then_by_its_task(tmp_path):
    """Every result names its task, also a run that stops before its eval: a file not read yet
    by the path given, a file read by the task it declares (the engine is down in both)."""
    down, key = "http://127.0.0.1:9", "sk-planted-4242"
    missing = tmp_path / key / "task.yaml"  # a path may hold anything: scrubbed
    args = run_args(down, tmp_path / "missing", "--task", str(missing), "--api-key", key)
    done = run_subprocess(*args)
    assert done.returncode == 2, done.stderr
    assert load_result(tmp_path / "missing")["task"] == str(tmp_path / "***" / "task.yaml")
    assert key not in (tmp_path / "missing" / "result.json").read_text()

    args = run_args(down, tmp_path / "read", "--task", str(write_task(tmp_path, GOOD)))
    done = run_subprocess(*args, "--thresholds", floor_file(tmp_path), cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    result = load_result(tmp_path / "read")
    assert (result["status"], result["eval"], result["task"]) == ("error", None, "arithmetic")


HOSTILE = [
    ("description", GOOD.replace('"Answer each question."', f'"{PAYLOAD}"'), "description"),
    ("gen_prefix", GOOD + f'gen_prefix: "{PAYLOAD}"\n', "gen_prefix"),
    ("doc_to_choice", GOOD + f'doc_to_choice: "{PAYLOAD}"\n', "doc_to_choice"),
    (
        "doc_to_decontamination_query",
        GOOD + f'should_decontaminate: true\ndoc_to_decontamination_query: "{PAYLOAD}"\n',
        "should_decontaminate",
    ),
    (
        "fewshot_config.doc_to_text",
        GOOD + f'fewshot_config:\n  sampler: default\n  doc_to_text: "{PAYLOAD}"\n',
        "fewshot_config.doc_to_text",
    ),
    (
        "fewshot_config.gen_prefix",
        GOOD + f'fewshot_config:\n  gen_prefix: "{PAYLOAD}"\n',
        "fewshot_config.gen_prefix",
    ),
    ("doc_to_text", GOOD.replace('"{{answer}}"', f'"{PAYLOAD}"'), "doc_to_target"),
    (
        "a !function in a filter list",
        GOOD.replace("      - function: take_first\n", "      - function: custom\n"
                     "        filter_fn: !function utils.evil\n"),
        "!function",
    ),
    (
        "a !function in a metric",
        GOOD.replace("    aggregation: mean\n", "    aggregation: !function utils.evil\n"),
        "!function",
    ),
    ("a metric loaded from elsewhere", GOOD.replace("exact_match", "./evil.py"), "./evil.py"),
    ("include", "include: other.yaml\n" + GOOD, "include"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "names"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_a_task_file_that_could_run_code_is_refused_before_anything_is_sent(
    engine, tmp_path, text, names
):
    code, out = run_task(engine, tmp_path, write_task(tmp_path, text))
    assert not (tmp_path / "PWNED").exists(), "the task file ran a command"
    assert code == 2, out
    assert names in out
    assert "Traceback" not in out
    assert engine.requests == []


def test_an_unknown_key_is_named(engine, tmp_path):
    code, out = run_task(
        engine, tmp_path, write_task(tmp_path, GOOD + "process_docs_v2: whatever\n")
    )
    assert code == 2, out
    assert "process_docs_v2" in out
    assert "keys evalgate knows" in out
    assert engine.requests == []


def test_the_keys_known_are_listed_in_one_order_whatever_the_hash_seed(engine, tmp_path):
    task = write_task(
        tmp_path, GOOD.replace("higher_is_better: true", "higher_is_better: true\n    bogus: 1")
    )
    outs = set()
    for seed in ("1", "2", "3"):
        args = run_args(engine.url, tmp_path / seed, "--task", str(task), "--min-samples", "0")
        done = run_subprocess(*args, env={"PYTHONHASHSEED": seed}, timeout=300, cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "bogus is not a key evalgate knows here (metric, aggregation," in done.stderr
        outs.add(done.stderr.split("knows here", 1)[1].split(")", 1)[0])
    assert len(outs) == 1, outs
    assert engine.requests == []


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


def test_a_yaml_alias_bomb_in_a_task_file_is_refused(engine, tmp_path):
    text = GOOD + "metadata:\n" + "".join("  " + line + "\n" for line in BOMB.splitlines())
    code, out = run_task(engine, tmp_path, write_task(tmp_path, text))
    assert code == 2, out
    assert "alias" in out
    assert engine.requests == []


def test_a_yaml_alias_bomb_in_a_thresholds_file_is_refused(engine, tmp_path):
    path = tmp_path / "floors.yaml"
    path.write_text("default:\n  gsm8k: 0.9\nmodels:\n" + "".join(
        "  " + line + "\n" for line in BOMB.splitlines()
    ), encoding="utf-8")  # fmt: skip
    done = run_subprocess(*run_args(engine.url, tmp_path / "out", "--thresholds", str(path)))
    assert done.returncode == 2, done.stderr
    assert "alias" in done.stderr
    assert engine.requests == []


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


def test_lm_evals_templates_are_sandboxed_for_a_payload_past_the_parser(tmp_path, monkeypatch):
    """The parser refuses the payload; were it to slip past, lm-eval renders it in jinja2's
    sandbox (the path `description` takes: ConfigurableTask.resolve_field)."""
    from jinja2.exceptions import SecurityError
    from lm_eval.api.task import ConfigurableTask

    from evalgate.eval.lm_eval import sandbox_templates

    monkeypatch.chdir(tmp_path)
    sandbox_templates()
    with pytest.raises(SecurityError):
        ConfigurableTask.resolve_field({"question": "q"}, PAYLOAD)
    assert not (tmp_path / "PWNED").exists()
    assert ConfigurableTask.resolve_field({"question": "q"}, "Q: {{question}}") == "Q: q"


def test_the_task_s_temperature_is_sent_and_recorded(engine, tmp_path):
    """A task whose generation_kwargs set temperature 0.6: every request the engine saw carries
    0.6, and result.json's eval.temperature (compare's protocol check reads it) says 0.6."""
    task = write_task(tmp_path, GOOD.replace("temperature: 0\n", "temperature: 0.6\n"))
    code, text = run_task(engine, tmp_path, task)
    assert code in (0, 1), text
    sent = [r.body for r in engine.log if r.path.endswith("/chat/completions")]
    assert sent, "no generation request reached the engine"
    assert {body["temperature"] for body in sent if isinstance(body, dict)} == {0.6}
    assert load_result(tmp_path / "out")["eval"]["temperature"] == 0.6


def test_a_single_stop_string_is_sent_as_one_stop_sequence(engine, tmp_path):
    """`until: "</s>"` (a string, as lm-eval also takes it): the probe and every eval request
    stop at "</s>", not at each of its characters."""
    task = write_task(tmp_path, GOOD.replace('until: ["</s>"]', 'until: "</s>"'))
    code, text = run_task(engine, tmp_path, task)
    assert code in (0, 1), text
    sent = [r.body for r in engine.log if r.path.endswith("/chat/completions")]
    assert len(sent) > 1, "the probe and the eval's requests should reach the engine"
    assert [body["stop"] for body in sent] == [["</s>"]] * len(sent)


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


def test_underscores_in_a_yaml_integer_are_not_counted_as_its_digits(engine, tmp_path):
    """308 digits with YAML's separators (9_9_9..., 615 characters) are the number JSON reads
    as 308 digits: read, not refused as "an integer of 308 digits, past what a float holds"."""
    number = "_".join("9" * 308)
    code, out = run_task(
        engine, tmp_path, write_task(tmp_path, GOOD + f"metadata:\n  n: {number}\n")
    )
    assert code in (0, 1), out
    assert "past what a float holds" not in out


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
