"""`evalgate` against the real engine stack: vLLM 0.32 on the CPU behind vllm-router.

What the loopback tier can only imitate, seen on real processes: the served limits and prompt
lengths evalgate discovers, vLLM's own rejection of an over-large budget (the original incident),
a prefill/decode pair whose router shows only the prefill's larger limit, whole GSM8K runs with
real answers, a GPQA-shaped run on made-up questions, and an engine killed mid-eval.

SmolLM2-135M's 5-shot prompts take about 1100-1750 tokens. It answers in the right format
(`... #### 24`) but almost always wrongly, so a run that completes ends in FAIL (exit 1).
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from evalgate.tasks.dataset import load_dataset, load_gpqa
from evalgate.tasks.spec import Prompt, build_prompts, load_task
from tests.conftest import load_result, load_samples, run_subprocess, start_subprocess

from . import stack
from .conftest import engine_args
from .stack import EngineStack, http_json, refusal, server_root

pytestmark = pytest.mark.engine


RUN_TIMEOUT = 600.0  # one `evalgate run` subprocess; the runs below take 20-60 s


FAILS_WITHIN = 30.0  # "fails within seconds", the process's own start-up included


# Prefill/decode: ISL + OSL + 256 = 3328 is above both served limits, so a budget derived from
# the router's card (the prefill's 3072, minus the prompt) exceeds the 1536 tokens the decode
# accepts as max_tokens, and only a clamp to the decode's limit gives a budget that works.
PD_LENGTHS = "--isl 2048 --osl 1024"


# lm-eval's gsm8k filters and exact_match normalisation (evalgate/tasks/gsm8k_evalgate_*.yaml)
STRICT = r"#### (\-?[0-9\.\,]+)"


FLEXIBLE = r"(-?[$0-9.,]{2,})|(-?[0-9]+)"


IGNORED = (",", r"\$", "(?s).*#### ", r"\.$")


def real_prompt_tokens(base_url: str, model: str, api: str, limit: int) -> list[int]:
    """Each eval prompt's length as the engine's own POST /tokenize counts it."""
    dataset = load_dataset()
    return tokenized(
        base_url, model, build_prompts(load_task(api), dataset.test, dataset.train, limit)
    )


def tokenized(base_url: str, model: str, prompts: Sequence[Prompt]) -> list[int]:
    """Each prompt's length as the engine's own POST /tokenize counts it."""
    counts = []
    for prompt in prompts:
        body: dict[str, Any] = {"model": model}
        if prompt.messages is not None:
            body |= {"messages": list(prompt.messages), "add_generation_prompt": True}
        else:
            body["prompt"] = prompt.text
        status, answer = http_json(f"{server_root(base_url)}/tokenize", body)
        assert status == 200, answer
        counts.append(int(answer["count"]))
    return counts


def extract(pattern: str, response: str, select: int) -> str:
    """lm-eval's regex filter: the selected match (its first non-empty group), or [invalid]."""
    found = re.findall(pattern, response)
    if not found:
        return "[invalid]"
    match = found[select]
    if isinstance(match, tuple):
        match = next((group for group in match if group), "[invalid]")
    return str(match).strip()


def exact_match(extracted: str, target: str) -> bool:
    def normal(text: str) -> str:
        for pattern in IGNORED:
            text = re.sub(pattern, "", text)
        return text.lower()

    return normal(extracted) == normal(target)


def verdict_line(document: dict[str, Any]) -> str:
    """The FAIL line `evalgate run` prints, rebuilt from the checks in result.json."""
    failed = [c for c in document["checks"] if not c["passed"]]
    listed = ", ".join(
        f"{c['filter']} {c['value']:.4f} (95% CI {c['low']:.4f}-{c['high']:.4f}, n={c['n']})"
        for c in failed
    )
    threshold = document["threshold"]
    return f"FAIL: {listed} below threshold {threshold['value']:.4f} ({threshold['matched']})"


def error_line(stderr: str, kind: str) -> str:
    return next(line for line in stderr.splitlines() if line.startswith(f"{kind}: "))


def refused_at_probe(
    running: EngineStack, out: Path, *extra: str, raw: Sequence[str] = ()
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`evalgate run` through `running`'s router that the engine's 400 stops at the probe within
    seconds (exit 3): the process, and its result.json."""
    started = time.monotonic()
    done = run_subprocess(
        *engine_args("run", running.router_url, running.model, *extra, out=out, raw=raw),
        timeout=RUN_TIMEOUT,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 3, done.stderr
    assert elapsed < FAILS_WITHIN, f"took {elapsed:.1f} s"
    document = load_result(out)
    assert (document["status"], document["stage"]) == ("error", "probe")
    assert document["probe"]["status_code"] == 400
    return done, document


def gated_fail(
    running: EngineStack, out: Path, questions: int, *extra: str, raw: Sequence[str] = ()
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], list[dict[str, Any]]]:
    """`evalgate run` of `questions` questions, 2 in flight, through `running`'s router, which
    gets every answer and gates them: FAIL (assert_gated_fail). The process, result.json and
    samples.jsonl."""
    limit = f"--limit {questions} --num-concurrent 2"
    done = run_subprocess(
        *engine_args("run", running.router_url, running.model, limit, *extra, out=out, raw=raw),
        timeout=RUN_TIMEOUT,
    )
    return (done, *assert_gated_fail(done, out, questions))


def assert_gated_fail(
    done: subprocess.CompletedProcess[str], out: Path, questions: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run that got every answer and gated them: FAIL (exit 1), every artifact consistent."""
    assert done.returncode == 1, done.stderr
    document = load_result(out)
    assert document["status"] == "fail" and document["stage"] == "done"
    assert document["exit_code"] == 1 and document["error"] is None
    assert done.stdout.splitlines()[-1] == verdict_line(document)
    assert document["threshold"]["value"] == 0.9 and document["threshold"]["matched"] == "default"
    requests = document["eval"]["requests"]
    assert requests["total"] == requests["completed"] == questions
    assert requests["failed"] == 0
    scores = {score["filter"]: score for score in document["scores"]}
    assert set(scores) == {"strict-match", "flexible-extract"}
    assert all(score["n"] == questions for score in scores.values())
    assert not any(check["passed"] for check in document["checks"])
    assert len(document["checks"]) == 2

    samples = load_samples(out)
    assert sorted(s["doc_id"] for s in samples) == list(range(questions))
    max_tokens = document["eval"]["max_tokens"]
    for sample in samples:
        assert sample["error"] is None
        assert sample["response"].strip(), sample
        assert sample["finish_reason"] in ("stop", "length"), sample
        assert 0 < sample["completion_tokens"] <= max_tokens
        if sample["finish_reason"] == "length":  # cut by evalgate's budget, not by the engine
            assert sample["completion_tokens"] == max_tokens, sample
        for name, pattern, select in (
            ("strict-match", STRICT, 0),
            ("flexible-extract", FLEXIBLE, -1),
        ):
            verdict = sample["filters"][name]
            assert verdict["extracted"] == extract(pattern, sample["response"], select), sample
            assert verdict["correct"] == exact_match(verdict["extracted"], sample["target"])
    for name, score in scores.items():  # the scores are the samples' verdicts
        right = sum(sample["filters"][name]["correct"] for sample in samples)
        assert score["value"] == pytest.approx(right / questions), name
    assert requests["truncated"] == sum(s["finish_reason"] == "length" for s in samples)
    journal = (out / "journal.jsonl").read_text().splitlines()
    assert len(journal) == 1 + questions  # the fingerprint, then one line per answer
    assert json.loads((out / "lm_eval_results.json").read_text())
    return document, samples


@pytest.mark.parametrize("api", ["chat", "completions"])
@pytest.mark.parametrize("via", ["engine", "router"])
def test_context_reads_the_served_limit_and_real_prompt_tokens(engine_single, cli, via, api):
    url = engine_single.engine_url if via == "engine" else engine_single.router_url
    assert url is not None
    longest = max(real_prompt_tokens(url, engine_single.model, api, 8))
    assert 1000 < longest < 2048  # 5-shot GSM8K in SmolLM2's tokens

    result = cli(
        *engine_args(
            "context --json -",
            url,
            engine_single.model,
            f"--api {api} --isl 1024 --osl 1024 --limit 8",
        )
    )
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert document["served"] == [{"value": 2048, "source": "/v1/models of the endpoint"}]
    assert document["requested"] == 2304
    assert document["eval_max_model_len"] == 2048
    assert document["prompt_tokens"] == {"value": longest, "source": "/tokenize"}
    assert document["budget_policy"] == "fit"
    assert document["max_tokens"] == 2048 - longest
    assert document["steps"] == [
        "ISL 1024 + OSL 1024 + margin 256 = 2304",
        "clamped to the served limit 2048 (/v1/models of the endpoint); "
        "served limits seen: 2048 (/v1/models of the endpoint)",
        f"fit policy: ctx 2048 - longest prompt {longest} tokens (/tokenize) = {2048 - longest}",
    ]
    assert document["warnings"] == []
    assert f"{url} is ready" in result.err


def test_probe_accepts_the_derived_budget_through_the_router(engine_single, cli):
    router = engine_single.router_url
    longest = max(real_prompt_tokens(router, engine_single.model, "chat", 8))
    result = cli(
        *engine_args(
            "probe --json -", router, engine_single.model, "--isl 1024 --osl 1024 --limit 8"
        )
    )
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert document["outcome"] == "ok"
    assert document["prompt_tokens"] == longest
    assert document["max_tokens"] == document["context"]["max_tokens"] == 2048 - longest
    assert document["latency_s"] > 0  # recorded; how long a cold engine takes is the bench's
    assert "probe accepted in " in result.err
    assert f" s (max_tokens {2048 - longest})" in result.err


def test_over_large_budget_fails_at_the_probe_with_vllms_own_words(engine_single, tmp_path):
    out = tmp_path / "run"
    done, document = refused_at_probe(
        engine_single, out, "--isl 1024 --osl 1024 --max-tokens 12288"
    )

    # What vLLM itself answers to that budget, asked directly.
    assert engine_single.engine_url is not None
    vllm_message = refusal(engine_single.engine_url, engine_single.model, 12288)
    assert vllm_message == (
        "max_tokens=12288 cannot be greater than max_model_len=2048. Please request fewer "
        "output tokens. (parameter=max_tokens, value=12288)"
    )

    assert document["exit_code"] == 3
    assert document["error"]["type"] == "ProbeError"
    probe = document["probe"]
    assert probe["outcome"] == "rejected" and probe["status_code"] == 400
    assert probe["engine_message"] == vllm_message
    assert probe["max_tokens"] == 12288
    prompt = probe["prompt_tokens"]
    assert 1000 < prompt < 2048
    assert document["context"]["budget_policy"] == "forced"
    assert document["eval"] is None and document["scores"] == []
    assert not (out / "journal.jsonl").exists()  # not one eval request was sent
    assert document["timings"]["probe"] < 5

    line = error_line(done.stderr, "ProbeError")
    assert line.startswith(
        f"ProbeError: The engine rejected the pre-flight request (HTTP 400: {vllm_message})."
    )
    assert line.endswith(
        f"Drop --max-tokens 12288 to let evalgate derive the budget (about {2048 - prompt} "
        f"here), or serve a --max-model-len of at least {12288 + prompt}."
    )
    assert line.removeprefix("ProbeError: ") == document["reason"]
    assert done.stdout == ""  # no verdict: the error is said once, on stderr
    assert "stage: probe" in done.stderr.splitlines()


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_full_run_through_the_router_fails_the_gate_on_real_answers(engine_single, tmp_path, api):
    questions = 5
    router = engine_single.router_url
    longest = max(real_prompt_tokens(router, engine_single.model, api, questions))
    out = tmp_path / "run"
    done, document, samples = gated_fail(
        engine_single, out, questions, f"--api {api} --isl 1024 --osl 256"
    )

    engine = document["endpoint"]["engine"]
    assert engine["owned_by"] == "vllm" and engine["version"] == "0.32.0"
    context = document["context"]
    assert context["eval_max_model_len"] == 1024 + 256 + 256
    assert context["prompt_tokens"] == {"value": longest, "source": "/tokenize"}
    assert document["probe"]["outcome"] == "ok"
    assert document["eval"]["api"] == api and document["eval"]["questions"] == questions
    assert document["eval"]["max_tokens"] == context["max_tokens"] == 1536 - longest
    assert any(re.search(STRICT, sample["response"]) for sample in samples)  # "#### N" answers
    assert f"gsm8k: {questions}/{questions} answered" in done.stderr.splitlines()


GPQA = "gpqa_diamond_cot_n_shot"


ABCD = r"(?i)\b\(?([A-D])\)?\b"  # the task's extract_abcd filter, its last match


MADE_UP = [  # in gpqa_diamond.csv's columns; of clearly different lengths, for the longest prompt
    ("What colour is the made-up fruit zibble?", "blue", "red", "green", "yellow"),
    (
        "A made-up planet, Quorb, has three moons that each take a different number of days to "
        "circle it. Which of these is the number of moons of Quorb?",
        "three",
        "one",
        "seven",
        "twelve",
    ),
    ("How many legs has a made-up tri-pod stool?", "3", "4", "5", "6"),
]


def write_gpqa(folder: Path) -> Path:
    folder.mkdir()
    columns = ["Question", "Correct Answer", *(f"Incorrect Answer {n}" for n in (1, 2, 3))]
    with (folder / "gpqa_diamond.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows(MADE_UP)
    return folder


def test_gpqa_shaped_run_through_the_router(engine_single, tmp_path):
    """The harness's GPQA task on the real stack: every (question, repeat) asked once, the probe
    at the task's own longest prompt. SmolLM2 mostly picks wrongly, so the verdict may go
    either way; an error may not."""
    data = write_gpqa(tmp_path / "data")
    asked = 2 * len(MADE_UP)  # every question twice, its choices shuffled each time
    router = engine_single.router_url
    dataset = load_gpqa(data)
    prompts = build_prompts(load_task("chat", GPQA), dataset.test, dataset.train, asked)
    counts = tokenized(router, engine_single.model, prompts)
    longest = max(counts)
    out = tmp_path / "run"
    done = run_subprocess(
        *engine_args(
            "run",
            router,
            engine_single.model,
            f"--task {GPQA} --dataset-dir {data} --limit {asked} --min-samples 0",
            "--isl 256 --osl 64 --max-tokens 64 --num-concurrent 2",
            out=out,
        ),
        timeout=RUN_TIMEOUT,
    )
    assert done.returncode in (0, 1), done.stderr
    document = load_result(out)
    assert document["exit_code"] == done.returncode and document["error"] is None
    assert document["status"] == ("pass" if done.returncode == 0 else "fail")
    assert document["eval"]["task"] == GPQA
    assert document["threshold"] == document["threshold"] | {"value": 0.3, "matched": "default"}
    assert "threshold 0.3000 (default)" in done.stdout

    probe = document["probe"]
    assert probe["outcome"] == "ok"
    assert probe["prompt_tokens"] == longest == document["context"]["prompt_tokens"]["value"]
    assert counts[probe["doc_id"]] == longest
    assert probe["max_tokens"] == document["eval"]["max_tokens"] == 64

    requests = document["eval"]["requests"]
    assert requests["total"] == requests["completed"] == asked and requests["failed"] == 0
    samples = load_samples(out)
    assert sorted(s["doc_id"] for s in samples) == list(range(asked))
    assert Counter(s["question"] for s in samples) == {row[0]: 2 for row in MADE_UP}
    for sample in samples:
        assert sample["error"] is None and sample["target"] in set("ABCD"), sample
        verdict = sample["filters"]["extract_abcd"]
        assert verdict["extracted"] == extract(ABCD, sample["response"], -1), sample
        assert verdict["correct"] == (verdict["extracted"].upper() == sample["target"])
    [score] = document["scores"]
    assert (score["filter"], score["n"]) == ("extract_abcd", asked)
    right = sum(s["filters"]["extract_abcd"]["correct"] for s in samples)
    assert score["value"] == pytest.approx(right / asked)


def journal_answers(out: Path) -> int:
    try:
        return max(len((out / "journal.jsonl").read_text().splitlines()) - 1, 0)
    except FileNotFoundError:
        return 0


class Killed(NamedTuple):
    """An `evalgate run` whose engine (or worker) was SIGKILLed once it had answered."""

    returncode: int
    stdout: str
    stderr: str
    after_kill: float
    """Seconds from the kill to the run's exit."""
    answered_before: int


KILLED_RUN = 40


"""Questions in a run whose engine (or worker) is killed mid-eval, 2 in flight."""


def kill_mid_eval(
    running: EngineStack,
    out: Path,
    pid_file: str,
    *,
    timeout: int,
    gives_up_within: float,
    wait: float,
    raw: Sequence[str] = (),
) -> tuple[Killed, dict[str, Any], list[dict[str, Any]]]:
    """`evalgate run` through `running`'s router in its own process (two attempts of at most
    `timeout` s each); once its journal has an answer (within `wait` s), SIGKILL the process
    group named in `pid_file` (in the stack's run directory). The run ends with exit 4 at the
    eval within `gives_up_within` s of the kill, saying why once, on stderr: how it ended, its
    result.json and its samples."""
    lengths = f"--isl 1024 --osl 1024 --limit {KILLED_RUN} --num-concurrent 2"
    attempts = f"--max-attempts 2 --timeout {timeout}"
    arguments = engine_args(
        "run", running.router_url, running.model, lengths, attempts, out=out, raw=raw
    )
    # start_subprocess drops the stack's EVALGATE_* variables the autouse clean_env left.
    process = start_subprocess(*arguments)
    try:
        deadline = time.monotonic() + wait
        while journal_answers(out) < 1:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, f"no answer within {wait:.0f} s"
            time.sleep(0.2)
        answered_before = journal_answers(out)
        os.killpg(int((running.run_dir / pid_file).read_text()), signal.SIGKILL)
        killed = time.monotonic()
        stdout, stderr = process.communicate(timeout=120)
        after_kill = time.monotonic() - killed
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    run = Killed(process.returncode, stdout, stderr, after_kill, answered_before)
    assert run.returncode == 4, stderr
    assert after_kill < gives_up_within, f"took {after_kill:.1f} s to give up after the kill"
    document = load_result(out)
    assert (document["status"], document["stage"]) == ("error", "eval")
    assert error_line(stderr, "EvalFailedError") == f"EvalFailedError: {document['reason']}"
    assert stdout == ""  # no verdict: the error is said once, on stderr
    return run, document, load_samples(out)


@pytest.fixture
def dedicated_single(
    engine_installed: None, tmp_path_factory: pytest.TempPathFactory, monkeypatch: Any
) -> Iterator[EngineStack]:
    """A single topology of its own (other ports, its own run directory): its engine gets
    killed, which the session's shared stacks must never be."""
    monkeypatch.setenv("EVALGATE_ENGINE_RUN", str(tmp_path_factory.mktemp("dedicated-stack")))
    monkeypatch.setenv("EVALGATE_SINGLE_ROUTER_PORT", "18010")
    monkeypatch.setenv("EVALGATE_SINGLE_METRICS_PORT", "18095")
    monkeypatch.setenv("EVALGATE_SINGLE_ENGINE_PORT", "18110")
    running = stack.up("single")
    try:
        yield running
    finally:
        stack.down("single")  # the environment still names the dedicated run directory


def test_engine_killed_mid_eval_is_an_eval_error_with_evidence(dedicated_single, tmp_path):
    out = tmp_path / "run"
    run, document, samples = kill_mid_eval(
        dedicated_single, out, "engine.pid", timeout=60, gives_up_within=60, wait=300
    )

    assert document["exit_code"] == 4
    assert document["error"]["type"] == "EvalFailedError"
    reason = document["reason"]
    # The router's answers to requests in flight at the kill name the engine it lost.
    gone = re.escape(str(dedicated_single.engine_url).removesuffix("/v1"))
    assert re.fullmatch(
        rf"(The worker {gone} behind the router is unreachable: the engine went away during "
        r"the eval\. )?"
        r"\d+ request\(s\) failed after 2 attempt\(s\) each \(allowed: 0, "
        r"--max-failed-requests\); last: question \d+: .+\. A failed request cannot be "
        r"scored, so the run cannot be gated\.",
        reason,
    ), reason
    requests = document["eval"]["requests"]
    assert requests["total"] == KILLED_RUN
    assert requests["failed"] >= 1
    assert run.answered_before <= requests["completed"] < KILLED_RUN
    assert document["scores"] == [] and document["checks"] == []

    # samples: the answers received before the kill, and the failures
    answered = [s for s in samples if s["error"] is None]
    failed = [s for s in samples if s["error"] is not None]
    assert len(answered) == requests["completed"] and len(failed) == requests["failed"]
    assert all(s["response"] and s["filters"] == {} for s in answered)
    assert all(s["response"] is None for s in failed)
    # Retryable failures (the router's 5xx, or no answer at all), never an engine's 4xx verdict.
    assert all(re.match(r"HTTP 5\d\d: |no answer: ", s["error"]) for s in failed), failed
    assert journal_answers(out) == requests["completed"]


def test_pd_context_reads_each_workers_limit(engine_pd, cli):
    assert engine_pd.prefill_url is not None and engine_pd.decode_url is not None
    longest = max(real_prompt_tokens(engine_pd.router_url, engine_pd.model, "chat", 5))
    result = cli(
        *engine_args(
            "context --json -",
            engine_pd.router_url,
            engine_pd.model,
            f"{PD_LENGTHS} --limit 5",
            f"--worker-url {engine_pd.prefill_url} --worker-url {engine_pd.decode_url}",
        )
    )
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert document["served"] == [
        {"value": 3072, "source": "/v1/models of the endpoint"},
        {"value": 3072, "source": f"/v1/models of worker {engine_pd.prefill_url}"},
        {"value": 1536, "source": f"/v1/models of worker {engine_pd.decode_url}"},
    ]
    assert document["eval_max_model_len"] == 1536
    assert document["prompt_tokens"] == {"value": longest, "source": "/tokenize"}
    assert document["max_tokens"] == 1536 - longest
    assert document["steps"][1].startswith(
        f"clamped to the served limit 1536 (/v1/models of worker {engine_pd.decode_url})"
    )


def workers_given(running: EngineStack, how: str) -> list[str]:
    """The decode's limit, told to evalgate as worker URLs or as server arguments."""
    if how == "worker-url":
        assert running.prefill_url is not None and running.decode_url is not None
        return ["--worker-url", running.prefill_url, "--worker-url", running.decode_url]
    return [
        "--server-config",
        f"--port 18200 --max-model-len {running.prefill_max_model_len} --enforce-eager",
        "--server-config",
        f"--port 18201 --max-model-len {running.decode_max_model_len} --enforce-eager",
    ]


@pytest.mark.parametrize("how", ["worker-url", "server-config"])
def test_pd_given_the_workers_clamps_to_the_decode_and_completes(engine_pd, tmp_path, how):
    assert engine_pd.decode_max_model_len == 1536 < engine_pd.router_max_model_len == 3072
    questions = 5
    longest = max(real_prompt_tokens(engine_pd.router_url, engine_pd.model, "chat", questions))
    raw = workers_given(engine_pd, how)
    _, document, _ = gated_fail(engine_pd, tmp_path / "run", questions, PD_LENGTHS, raw=raw)

    context = document["context"]
    assert context["eval_max_model_len"] == 1536
    assert context["max_tokens"] == document["eval"]["max_tokens"] == 1536 - longest
    assert sorted(limit["value"] for limit in context["served"]) == [1536, 3072, 3072]
    assert context["steps"][1].startswith("clamped to the served limit 1536")
    assert document["probe"]["outcome"] == "ok"  # the longest prompt plus the budget fits
    assert not any("exceeds" in warning for warning in document["warnings"])


def test_pd_router_only_the_probe_catches_the_decodes_rejection(engine_pd, tmp_path):
    """A budget the router's card allows (forced, as the harness's rule would give) is more than
    the decode takes: the decode's own rejection, caught by the probe in seconds."""
    longest = max(real_prompt_tokens(engine_pd.router_url, engine_pd.model, "chat", 5))
    budget = 3072 - longest  # what the router's card allows...
    assert budget > 1536  # ...and more than the decode takes as max_tokens
    extra = f"{PD_LENGTHS} --limit 5 --num-concurrent 2 --max-tokens {budget}"
    done, document = refused_at_probe(engine_pd, tmp_path / "run", extra)

    decode_message = (
        f"max_tokens={budget} cannot be greater than max_model_len=1536. Please request fewer "
        f"output tokens. (parameter=max_tokens, value={budget})"
    )
    assert document["exit_code"] == 3
    assert document["probe"]["engine_message"] == decode_message
    assert document["context"]["served"] == [
        {"value": 3072, "source": "/v1/models of the endpoint"},
        {"value": 1536, "source": "/tokenize of the endpoint"},
    ]
    assert document["eval"] is None
    line = error_line(done.stderr, "ProbeError")
    assert f"(HTTP 400: {decode_message})" in line
    assert f"Drop --max-tokens {budget} to let evalgate derive the budget" in line


def test_pd_router_only_a_budget_the_decode_would_cut_is_never_silent(engine_pd, cli):
    longest = max(real_prompt_tokens(engine_pd.router_url, engine_pd.model, "chat", 5))
    budget = 1024 + 1024 + 256 - longest  # within the router's 3072
    assert budget <= 1536 < longest + budget  # the decode accepts it, then cuts answers short
    status, body = http_json(
        f"{server_root(engine_pd.router_url)}/tokenize",
        {"model": engine_pd.model, "prompt": "Hello"},
    )
    assert status == 200 and body["max_model_len"] == 1536  # the router's /tokenize tells

    result = cli(
        *engine_args(
            "probe --json -",
            engine_pd.router_url,
            engine_pd.model,
            "--isl 1024 --osl 1024 --limit 5",
        )
    )
    assert result.code == 0, result.err
    document = json.loads(result.out)
    # The decode's limit, told by the router's /tokenize, clamps the context.
    assert {"value": 1536, "source": "/tokenize of the endpoint"} in document["context"]["served"]
    assert document["context"]["eval_max_model_len"] == 1536
    fits = document["prompt_tokens"] + document["max_tokens"] <= 1536
    warned = document["outcome"] == "truncation_risk" and "answers may be truncated" in result.err
    assert fits or warned, document
