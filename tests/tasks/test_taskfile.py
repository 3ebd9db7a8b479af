"""`--task FILE` is outside input (tasks/taskfile.py): refused before anything is sent unless every
key is known and every field lm-eval renders is a plain ``{{field}}`` template. Black-box: the CLI
in its own process against task files (tests/tasks/task_files.py) and the loopback fake engine.
The one reader's limits on the file: tests/test_reader.py."""

from __future__ import annotations

import pytest

from tests.conftest import load_result, run_args, run_subprocess
from tests.tasks.task_files import (
    GOOD,
    PAYLOAD,
    cli_run_task,
    edited,
    floor_file,
    run_task,
    write_task,
)

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


# Hostile task files: a task lm-eval would fail on is refused before anything is sent.


PATTERN = 'regex_pattern: "#### (\\\\-?[0-9]+)"'


TAKE_FIRST = "      - function: take_first\n"


EM = "    higher_is_better: true\n"


TASKS = [
    ("a Jinja global as a field", edited('"Answer each question."', '"{{ cycler }}"'),
     "test.jsonl line 1 has no field 'cycler', which description names"),
    ("a field no row has", edited("Question: {{question}}", "Q: {{nosuch}}"),
     "test.jsonl line 1 has no field 'nosuch', which doc_to_text names"),
    ("a bare name no row has", edited('"Question: {{question}}\\nAnswer:"', "Hello"),
     "has no field 'Hello', which doc_to_text names"),
    ("three braces", edited('"Answer each question."', '"{{{question}}}"'), "uses Jinja beyond"),
    ("a keyword as a field", edited('"Answer each question."', '"{{ not }}"'), "uses Jinja beyond"),
    ("a number as a field", edited('"Answer each question."', '"{{ 1 }}"'), "uses Jinja beyond"),
    ("a filter option lm-eval does not take",
     edited(TAKE_FIRST, TAKE_FIRST + "        bogus: 1\n"), "bogus is not a key evalgate knows"),
    ("a filter named by a list", edited("function: take_first\n", "function: [take_first]\n"),
     "filter_list[0].filter[1] must name one of lm-eval's text filters"),
    ("take_first_k without k", edited("function: take_first\n", "function: take_first_k\n"),
     "filter_list[0].filter[1] has no k, which take_first_k needs"),
    ("map without a default",
     edited(TAKE_FIRST, "      - function: map\n        mapping_dict: {a: b}\n" + TAKE_FIRST),
     "has no default_value, which map needs"),
    ("a regex that does not compile", edited(PATTERN, 'regex_pattern: "(("'),
     "regex_pattern is not a regular expression (missing )"),
    ("a nested repeat", edited(PATTERN, 'regex_pattern: "^(\\\\s*\\\\S+\\\\s*)*!$"'),
     "regex_pattern repeats a part that itself repeats or branches"),
    ("overlapping alternatives repeated", edited(EM, EM + "    regexes_to_ignore: ['(a|aa)+b']\n"),
     "regexes_to_ignore[0] repeats a part that itself repeats or branches"),
    ("a match index past the first and the last",
     edited(PATTERN, PATTERN + "\n        group_select: 1"), "group_select must be 0 or -1"),
    ("more shots than examples", edited("num_fewshot: 1", "num_fewshot: 50"),
     "num_fewshot is 50, but"),
    ("repeats 0", GOOD + "repeats: 0\n", "repeats must be 1"),
    ("repeats 2", GOOD + "repeats: 2\n", "repeats must be 1"),
    ("an infinite temperature", edited("temperature: 0", "temperature: .inf"),
     "generation_kwargs.temperature must be a finite number (it is inf)"),
    ("a NaN top_p", edited("temperature: 0", "temperature: 0\n  top_p: .nan"),
     "generation_kwargs.top_p must be a finite number (it is nan)"),
    ("a !function as a key", GOOD + "metadata: {? !function evil.x : 1}\n",
     "runs Python code (metadata.evil.x)"),
    ("a !!set in metadata", GOOD + "metadata: !!set {a, b}\n",
     "uses the tag tag:yaml.org,2002:set"),
    ("60,000 values in metadata", GOOD + "metadata: {x: [" + "[]," * 60_000 + "]}\n",
     "holds more than 50,000 values"),
    ("an integer key", GOOD + "1: x\n", "has the key '1' (line 28), which YAML reads as int"),
    ("a file over 4 MiB", GOOD + "metadata: {x: '" + "a" * 4_200_000 + "'}\n",
     "bytes, over the 4,194,304"),
    ("multi_choice_regex on rows without choices",
     edited("function: regex\n", "function: multi_choice_regex\n"),
     "test.jsonl line 1 has no field 'choices', which the multi_choice_regex filter names"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "says"), [t[1:] for t in TASKS], ids=[t[0] for t in TASKS])
def test_a_task_file_lm_eval_would_fail_on_is_refused_before_anything_is_sent(
    cli, engine, tmp_path, text, says
):
    done = cli_run_task(cli, engine, tmp_path, text)

    assert done.code == 2, done.err
    assert says in done.err
    assert "InternalError" not in done.err and "please report" not in done.err
    assert engine.requests == []
