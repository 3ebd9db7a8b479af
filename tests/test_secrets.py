"""Secrets: a planted API key or URL password is sent to the engine, and shown nowhere else.

The key comes by --api-key, EVALGATE_API_KEY or OPENAI_API_KEY; the password as user:password in
--base-url and --worker-url. Each test checks that the fake engine really received it (the
Authorization header of every request), then searches everything a user or CI could keep:
stdout, stderr, evalgate's log records, every file in the output folder (artifacts, journal,
temporary files), the returned outcome, the error and its chained causes, and the output of
`evalgate context --explain --json` and `evalgate probe --json`. Pass and error paths both.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import traceback
from pathlib import Path
from urllib.parse import quote

import msgspec
import pytest

from evalgate import scrub
from evalgate.engine.wire import MAX_MESSAGE_CHARS
from evalgate.errors import ExitCode
from evalgate.eval.replies import MAX_CHARS_PER_TOKEN
from evalgate.run import run_gate
from evalgate.schemas import validation_errors
from evalgate.settings.values import Settings
from evalgate.verify.html import SHOWN_CHARS
from tests.conftest import (
    DOCS,
    MODEL,
    PLANTED_BASIC,
    PLANTED_KEY,
    PLANTED_PASSWORD,
    PLANTED_RUN,
    PLANTED_USER,
    assert_nowhere,
    deadline,
    eval_client,
    load_result,
    load_samples,
    run_args,
    run_settings,
    run_subprocess,
    with_password,
)
from tests.fakeengine import NOT_PROBE, EngineBehaviour, FakeEngine, Fault, unused_port
from tests.verify.sweeps import answers, baseline_answers, evalgate_sweep, thresholds

pytestmark = pytest.mark.loopback


def files_text(folder: Path) -> str:
    """Every file under `folder`, hidden and temporary ones included, as text."""
    return "\n".join(
        path.read_bytes().decode("utf-8", "replace")
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    )


POINT = ["--min-samples", "0"]  # secrets, not statistics: the point estimate decides


# -- the key ------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["--api-key", "EVALGATE_API_KEY", "OPENAI_API_KEY"])
def test_a_planted_key_is_sent_and_found_nowhere(engine, auth_headers, cli, tmp_path, source):
    out = tmp_path / "run"
    args = ["-v", "-v", *run_args(engine.url, out, *POINT, json="-", **PLANTED_RUN)]
    with pytest.MonkeyPatch.context() as patch:
        if source == "--api-key":
            args += ["--api-key", PLANTED_KEY]
        else:
            patch.setenv(source, PLANTED_KEY)

        code, stdout, stderr = cli(*args, within=30, engine=engine)

    assert code == 0
    assert json.loads(stdout)["status"] == "pass"
    paths = {path for path, _ in auth_headers}
    assert {"/v1/models", "/tokenize", "/v1/chat/completions"} <= paths
    # every request carried it
    assert {auth for _, auth in auth_headers} == {f"Bearer {PLANTED_KEY}"}
    assert_nowhere(stdout, stderr, files_text(out))


FAILURES = [
    # (case, fault, exit code, stage)
    (
        "the probe rejected",
        lambda: Fault("error", status=400, nth={1}, message="bad request"),
        3,
        "probe",
    ),
    (
        "the eval stopped by a 400",
        lambda: Fault("error", status=400, questions={DOCS[4].question}, message="bad request"),
        4,
        "eval",
    ),
    ("connections reset in the eval", lambda: Fault("reset", nth=NOT_PROBE), 4, "eval"),
    (
        "/v1/models unauthorized",
        lambda: Fault("error", status=401, paths={"/v1/models"}),
        3,
        "readiness",
    ),
]


@pytest.mark.parametrize("case", [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES])
def test_no_secret_in_the_errors_of_a_failed_run(engine, auth_headers, cli, tmp_path, case):
    make_fault, code, stage = case
    engine.inject(make_fault())
    out = tmp_path / "run"
    url = with_password(engine.url)

    args = run_args(url, out, api_key=PLANTED_KEY, **PLANTED_RUN)
    got, stdout, stderr = cli("-v", "-v", *args, within=30, engine=engine)

    assert got == code
    assert f"stage: {stage}" in stderr
    result = load_result(out)
    assert result["stage"] == stage
    assert result["endpoint"] is None or result["endpoint"]["base_url"] == engine.url
    # user:password wins, as in httpx
    assert auth_headers and {auth for _, auth in auth_headers} == {PLANTED_BASIC}
    assert_nowhere(stdout, stderr, files_text(out))


# -- secrets the engine echoes back (issue 26, 1) -------------------------------------------------


def test_a_key_the_engine_echoes_back_is_scrubbed_from_every_output(engine, cli, tmp_path):
    """OpenAI's 401 names the key it refused: the message is kept, the key is not."""
    engine.inject(
        Fault(
            "error",
            status=401,
            paths={"/v1/models"},
            message=f"Incorrect API key provided: {PLANTED_KEY}. You can find your API key at ...",
        )
    )
    out = tmp_path / "run"

    args = run_args(engine.url, out, api_key=PLANTED_KEY, **PLANTED_RUN)
    code, stdout, stderr = cli(*args, within=30, engine=engine)

    assert code == 3
    assert "HTTP 401: Incorrect API key provided: ***. You can find" in stderr
    assert stdout == ""  # the error is said once, on stderr
    result = load_result(out)
    assert "Incorrect API key provided: ***." in result["reason"]
    assert_nowhere(stdout, stderr, files_text(out))


def test_url_passwords_the_engine_echoes_are_scrubbed_from_samples_and_journal(
    engine, cli, tmp_path
):
    """A proxy's 403 names the URL with its password; an answer quotes a worker's URL: neither
    password reaches samples.jsonl, journal.jsonl, result.json or the terminal (each of
    --base-url and --worker-url)."""
    url = with_password(engine.url)
    worker = engine.url.replace("http://", "http://w0rker:wk-PLANTED-789@", 1)
    engine.behaviour.trailer = f"\n(via {worker})"
    engine.inject(
        Fault(
            "error",
            status=403,
            questions={DOCS[4].question},
            message=f"forbidden: {url}/chat/completions",
        )
    )
    out = tmp_path / "run"

    args = run_args(url, out, *POINT, worker_url=worker, **PLANTED_RUN)
    code, stdout, stderr = cli(*args, within=30, engine=engine)

    assert code == 4  # a 4xx stops the eval; the answers so far are kept
    port = engine.url.rsplit(":", 1)[1]
    samples = load_samples(out)
    [failed] = [s for s in samples if s["error"]]
    # the user info as a whole ("user:password") is masked
    assert failed["error"] == f"HTTP 403: forbidden: http://***@127.0.0.1:{port}/chat/completions"
    answered = [s["response"] for s in samples if s["response"]]
    assert answered and all(a.endswith(f"(via http://***@127.0.0.1:{port})") for a in answered)
    journal = (out / "journal.jsonl").read_text(encoding="utf-8")
    assert "(via http://***@127.0.0.1:" in journal  # the answers; a failure is not journalled
    for text in (stdout, stderr, files_text(out)):
        assert "wk-PLANTED-789" not in text
    assert_nowhere(stdout, stderr, files_text(out))


def test_an_answer_is_scored_as_the_engine_sent_it_and_stored_scrubbed(engine, cli, tmp_path):
    """Scrubbing comes after scoring: an answer ending in the key ends in its digits for the
    flexible filter (the last number), though samples.jsonl shows the key masked."""
    engine.behaviour.trailer = f"\n{PLANTED_KEY}"
    out = tmp_path / "run"

    args = run_args(engine.url, out, *POINT, api_key=PLANTED_KEY, **PLANTED_RUN)
    code, _, _ = cli(*args, within=30, engine=engine)

    assert code == 1  # flexible-extract reads -123: every answer wrong
    samples = load_samples(out)
    assert {s["filters"]["flexible-extract"]["extracted"] for s in samples} == {"-123"}
    assert all(s["filters"]["strict-match"]["correct"] for s in samples)
    assert all(s["response"].endswith("\n***") for s in samples)
    assert_nowhere(files_text(out))


def test_a_placeholder_key_is_sent_but_not_scrubbed(engine, cli, tmp_path):
    """vLLM's convention `EMPTY` (a listed placeholder) is no secret: scrubbing it
    would shred ordinary text."""
    engine.behaviour.trailer = "\nEMPTY"
    out = tmp_path / "run"

    args = run_args(engine.url, out, *POINT, api_key="EMPTY", **PLANTED_RUN)
    code, _, _ = cli(*args, within=30, engine=engine)

    assert code == 0
    samples = load_samples(out)
    assert all(s["response"].endswith("\nEMPTY") for s in samples)


def test_no_secret_when_the_endpoint_is_never_ready(cli, tmp_path):
    url = with_password(f"http://127.0.0.1:{unused_port()}/v1")
    out = tmp_path / "run"

    args = run_args(url, out, api_key=PLANTED_KEY, **PLANTED_RUN)
    code, stdout, stderr = cli("-v", "-v", *args, within=30)

    assert code == 3
    assert "was not ready after" in stderr
    assert "http://127.0.0.1:" in stderr  # the URL is named, without its password
    assert_nowhere(stdout, stderr, files_text(out))


# -- the library: log records, the outcome, exceptions -----------------------------------------


@pytest.mark.parametrize("fails", [False, True], ids=["pass", "eval error"])
def test_no_secret_in_evalgates_logs_outcome_or_exception_chain(
    engine, auth_headers, tmp_path, caplog, fails
):
    if fails:
        engine.inject(Fault("error", status=400, questions={DOCS[4].question}))
    caplog.set_level(logging.DEBUG, logger="evalgate")
    url = with_password(engine.url)
    given = {"worker_urls": [url], "api_key": PLANTED_KEY, "min_samples": 0}
    settings = run_settings(url, tmp_path / "run", **given, **PLANTED_RUN)

    with deadline(30, engine):
        outcome = run_gate(settings)

    assert outcome.exit_code == (4 if fails else 0)
    assert caplog.records  # evalgate did log, at DEBUG
    chain = "".join(traceback.format_exception(outcome.error)) if outcome.error else ""
    assert outcome.result.endpoint.worker_urls == [engine.url]
    assert_nowhere(
        caplog.text,
        repr(outcome),
        json.dumps(msgspec.to_builtins(outcome.result)),
        chain,
        files_text(tmp_path / "run"),
    )
    assert PLANTED_KEY not in repr(settings) and PLANTED_KEY not in str(settings)


def test_the_eval_client_keeps_url_credentials_out_of_every_log(engine, auth_headers, caplog):
    """The eval's own requests: the URL the HTTP library gets has no password (whatever it
    logs); the credentials go as basic auth, as before."""
    caplog.set_level(logging.DEBUG)  # every logger: aiohttp, asyncio, evalgate
    client = eval_client(with_password(engine.url), api_key=PLANTED_KEY, timeout=2, attempts=1)
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"Question: {DOCS[0].question}\nAnswer:"}],
        "max_tokens": 200,
    }

    async def ask() -> str:
        try:
            return (await client.complete(body)).text
        finally:
            await client.close()

    with deadline(10, engine):
        text = asyncio.run(ask())

    assert text.endswith("#### 18")
    assert auth_headers == [("/v1/chat/completions", PLANTED_BASIC)]
    assert_nowhere(caplog.text)


def test_no_logger_at_all_shows_url_credentials(engine, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    # None: the default
    given = PLANTED_RUN | {"timeout": None, "max_attempts": None, "min_samples": 0}
    settings = run_settings(with_password(engine.url), tmp_path / "run", **given)

    with deadline(30, engine):
        outcome = run_gate(settings)

    assert outcome.exit_code == 0
    assert_nowhere(caplog.text)


def test_the_settings_repr_hides_url_credentials():
    settings = Settings(base_url=with_password("http://127.0.0.1:8000/v1"), api_key=PLANTED_KEY)

    assert_nowhere(repr(settings), str(settings))


# -- the other commands -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    [
        ("context", ["--explain", "--json", "-"]),
        ("context", ["--explain"]),
        ("probe", ["--json", "-"]),
    ],
    ids=["context --explain --json -", "context --explain (env)", "probe --json -"],
)
def test_context_and_probe_output_holds_no_secret(engine, auth_headers, cli, monkeypatch, case):
    command, extra = case
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_KEY)
    url = with_password(engine.url)

    options = PLANTED_RUN | {"command": command, "worker_url": url}
    if command == "context":  # no probe there: no --timeout, --max-attempts
        options |= {"timeout": None, "max_attempts": None}

    args = run_args(url, None, *extra, **options)
    code, stdout, stderr = cli("-v", "-v", *args, within=30, engine=engine)

    assert code == 0
    assert stdout.strip()
    if "--json" in extra:
        # `context --explain --json` prints the steps after the document, on stdout too
        document, _ = json.JSONDecoder().raw_decode(stdout)
        served = document["context"]["served"] if command == "probe" else document["served"]
        assert f"/v1/models of worker {engine.url}" in [s["source"] for s in served]
    assert auth_headers and {auth for _, auth in auth_headers} == {PLANTED_BASIC}
    assert_nowhere(stdout, stderr)


def test_the_hook_stages_no_secret(engine, auth_headers, cli, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_KEY)
    monkeypatch.setenv("ROUTER_URL", engine.url)
    stage = tmp_path / "run"

    args = run_args(None, stage, *POINT, command="hook", concurrency=2, **PLANTED_RUN)  # ROUTER_URL
    code, stdout, stderr = cli(*args, within=30, engine=engine)

    assert code == 0
    assert {p.name for p in (stage / "conc-2").iterdir()} >= {"result.json", "meta_env.json"}
    assert {auth for _, auth in auth_headers} == {f"Bearer {PLANTED_KEY}"}
    assert_nowhere(stdout, stderr, files_text(stage))


# -- bad input that holds a secret ---------------------------------------------------------------


def test_a_settings_error_does_not_echo_the_secrets(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALGATE_API_KEY", PLANTED_KEY)
    url = with_password("http://127.0.0.1:8000/v1")

    args = run_args(url, tmp_path / "run", **(PLANTED_RUN | {"limit": 0}))
    code, stdout, stderr = cli(*args, within=30)

    assert code == 2
    assert "Invalid settings: --limit = 0" in stderr
    assert_nowhere(stdout, stderr)


def test_a_bad_url_with_a_password_is_a_usage_error_that_hides_it(cli, tmp_path):
    url = f"ftp://{PLANTED_USER}:{PLANTED_PASSWORD}@127.0.0.1:{unused_port()}/v1"

    code, stdout, stderr = cli(*run_args(url, tmp_path / "run", **PLANTED_RUN), within=30)

    assert code == 2
    assert "--base-url" in stderr
    assert_nowhere(stdout, stderr)


# -- no cut keeps part of a secret, and a key that spells a word unmakes nothing ----------------
# The CLI in its own process against the loopback engine: one offset per cap, the secret across
# the cut (tests/test_scrub.py sweeps every offset of every cap in-process).

CUT_KEY = "sk-ujOeHwdFcAefAZhnM6Jy8c1riht"
FILL = "~"


def parts(secret: str) -> set[str]:
    """Every run of min(8, its length) characters of `secret`."""
    size = min(8, len(secret))
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}


def written(*folders: Path) -> dict[str, str]:
    return {
        str(p): p.read_text("utf-8", "replace")
        for f in folders
        for p in f.rglob("*")
        if p.is_file()
    }


def assert_no_part(secret: str, outputs: dict[str, str]) -> None:
    found = {
        (where, part) for where, text in outputs.items() for part in parts(secret) if part in text
    }
    assert found == set()


def streams(name: str, done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return {f"{name} stdout": done.stdout, f"{name} stderr": done.stderr}


@pytest.mark.parametrize("router", [None, "dynamo"], ids=["vLLM", "Dynamo's frontend"])
def test_an_engine_error_quoting_the_key_across_its_cut_keeps_no_part_of_it(router, tmp_path):
    """The engine's words are kept to 500 characters: the key starts at 480, so 20 of its 30
    characters came before the cut, and were printed and stored on 8c36240."""
    words = FILL * (MAX_MESSAGE_CHARS - 20) + CUT_KEY + " is not a valid key"
    out = tmp_path / "run"
    with FakeEngine(EngineBehaviour(router=router)) as engine:
        engine.inject(Fault("error", status=400, message=words))
        served = ["--api-key", CUT_KEY, "--served-max-model-len", "4096", "--limit", "2"]
        ran = run_subprocess(*run_args(engine.url, out, *served))  # Dynamo lists no length
        probe = run_subprocess(*run_args(engine.url, None, *served, command="probe", json="-"))

    result = load_result(out)
    assert (ran.returncode, result["stage"], probe.returncode) == (3, "probe", 3), ran.stderr
    assert FILL * 400 in result["probe"]["engine_message"]  # the words were kept, to the cut
    assert_no_part(CUT_KEY, {**streams("run", ran), **streams("probe", probe), **written(out)})


def test_a_model_id_holding_the_key_across_its_cut_keeps_no_part_of_it(tmp_path):
    """A listed model id is quoted to 100 characters: the key starts at 90."""
    out = tmp_path / "run"
    with FakeEngine(EngineBehaviour(listed_model=FILL * 90 + CUT_KEY)) as engine:
        ran = run_subprocess(*run_args(engine.url, out, api_key=CUT_KEY, limit=2))

    assert ran.returncode == 3, ran.stderr
    assert "does not serve model 'fake-model'; it serves ['~~~~" in ran.stderr
    assert_no_part(CUT_KEY, {**streams("run", ran), **written(out)})


def test_an_answer_past_its_budget_cut_across_the_key_keeps_no_part_of_it(tmp_path):
    """An answer is kept to 64 characters per token of max_tokens: the key starts 20 before."""
    budget = 16
    cut = MAX_CHARS_PER_TOKEN * budget
    answer = "#### 7\n" + FILL * (cut - 7 - 20) + CUT_KEY + FILL * 50
    out = tmp_path / "run"
    with FakeEngine(EngineBehaviour(answer_text=answer)) as engine:
        ran = run_subprocess(
            *run_args(engine.url, out, api_key=CUT_KEY, limit=2),
            *("--max-tokens", str(budget), "--min-samples", "0"),
        )

    result, samples = load_result(out), load_samples(out)
    assert (ran.returncode, result["eval"]["max_tokens"]) == (1, budget), ran.stderr
    kept = answer[: cut - 20] + "***" + FILL * 17  # scrubbed in full, then cut to the budget
    assert [s["response"] for s in samples] == [kept, kept]
    journal = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    assert [r["text"] for r in journal[1:]] == [kept, kept]
    assert_no_part(CUT_KEY, {**streams("run", ran), **written(out)})


def test_verifys_reports_cut_no_answer_or_model_across_the_key(tmp_path):
    """verify scrubs the key of its environment: a lost answer's cell on the page is cut at 120
    characters (the key starts at 100), a label on a terminal line or in the job summary at
    2,000 (the key starts at 1,980)."""
    base = evalgate_sweep(tmp_path / "base", "b", {4: baseline_answers()})
    cand = evalgate_sweep(tmp_path / "cand", "c", {4: answers(lost=80)})
    for folder in (*base.iterdir(), *cand.iterdir()):  # one label: the configs pair
        result = load_result(folder)
        result["labels"]["hardware"] = FILL * (scrub.TERMINAL_CHARS - 20) + CUT_KEY
        (folder / "result.json").write_text(json.dumps(result))
    for folder in cand.iterdir():
        records = load_samples(folder)
        for record in records:
            for answer in record["filters"].values():
                answer["extracted"] = FILL * (SHOWN_CHARS - 20) + CUT_KEY
        (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    reports = tmp_path / "reports"
    page, summary = reports / "page.html", reports / "summary.md"
    reports.mkdir()

    done = run_subprocess(
        "verify", str(cand), "--baseline", str(base), "--thresholds", str(thresholds(tmp_path)),
        "--github", "--html", str(page), "--junit", str(reports / "junit.xml"),
        "--json", str(reports / "verdict.json"),
        env={"OPENAI_API_KEY": CUT_KEY, "GITHUB_STEP_SUMMARY": str(summary)},
    )  # fmt: skip

    assert done.returncode == ExitCode.FAIL, done.stderr
    assert f"<td>{FILL * (SHOWN_CHARS - 20)}***</td>" in page.read_text()  # scrubbed, not cut
    assert FILL * 1900 in summary.read_text() and FILL * 1900 in done.stdout
    assert_no_part(CUT_KEY, {**streams("verify", done), **written(reports)})


WORDS = [
    (["--api-key", "evalgate"], {"EVALGATE_API_KEY": "evalgate"}, ""),
    (["--api-key", "question"], {"EVALGATE_API_KEY": "question"}, ""),
    (["--api-key", "response"], {"EVALGATE_API_KEY": "response"}, ""),
    (["--api-key", "status"], {"EVALGATE_API_KEY": "status"}, ""),
    (["--api-key", "pass"], {"EVALGATE_API_KEY": "pass"}, ""),
    ([], {}, "evalgate@"),  # the base URL's user; verify and compare get it as ROUTER_URL
]


@pytest.mark.parametrize(
    ("flags", "environment", "user"),
    WORDS,
    ids=["key evalgate", "key question", "key response", "key status", "key pass", "user evalgate"],
)
def test_a_key_that_spells_evalgates_own_words_leaves_every_document_whole(
    flags, environment, user, tmp_path
):
    """Secrets are scrubbed from values, never from a serialised document: field names, schema
    ids, labels and file names are evalgate's, whatever the key spells."""
    runs = [tmp_path / "a", tmp_path / "b"]
    with FakeEngine(EngineBehaviour(accuracy=1.0)) as engine:
        url = engine.url.replace("http://", f"http://{user}", 1)
        environment = environment or {"ROUTER_URL": url}
        for out in runs:
            done = run_subprocess(*run_args(url, out, *flags, limit=4, min_samples=0))
            assert done.returncode == 0, done.stderr
    verdict = tmp_path / "verdict.json"
    verified = run_subprocess("verify", str(runs[0]), "--json", str(verdict), env=environment)
    compared = run_subprocess("compare", *map(str, runs), "--json", "-", env=environment)

    for out in runs:
        result, samples = load_result(out), load_samples(out)
        assert (result["schema"], result["status"], result["stage"]) == (
            "evalgate.result/1",
            "pass",
            "done",
        )
        assert result["files"] and all((out / name).is_file() for name in result["files"].values())
        assert [s["doc_id"] for s in samples] == [0, 1, 2, 3]
        assert all(s["response"] for s in samples)
    document = json.loads(verdict.read_text())
    assert (verified.returncode, document["schema"]) == (0, "evalgate.verdict/2"), verified.stderr
    assert validation_errors("verdict", document) == []
    assert [e["outcome"] for e in document["entries"]] == ["pass"]
    comparison = json.loads(compared.stdout)
    assert comparison["schema"] == "evalgate.comparison/1", compared.stderr
    assert validation_errors("comparison", comparison) == []


def test_a_short_url_password_the_engine_echoes_is_scrubbed_everywhere(tmp_path):
    """A password of 7 characters is a secret."""
    out = tmp_path / "run"
    echoed = "no access for bob:hunter2 (password hunter2, header Basic Ym9iOmh1bnRlcjI=)"
    with FakeEngine(EngineBehaviour()) as engine:
        engine.inject(Fault("error", status=403, paths={"/v1/models"}, message=echoed))
        url = engine.url.replace("http://", "http://bob:hunter2@", 1)
        ran = run_subprocess(*run_args(url, out, limit=2))

    assert ran.returncode == 3, ran.stderr
    assert "no access for *** (password ***, header Basic ***)" in ran.stderr  # the pair is one
    assert_no_part("hunter2", {**streams("run", ran), **written(out)})
    assert_no_part("Ym9iOmh1bnRlcjI=", {**streams("run", ran), **written(out)})


def test_a_key_too_short_to_scrub_is_warned_of_once_and_never_shown(tmp_path):
    with FakeEngine(EngineBehaviour()) as engine:
        ran = run_subprocess(
            *run_args(engine.url, tmp_path / "run", *POINT, limit=2),
            env={"EVALGATE_API_KEY": "k9Z"},
        )

    assert ran.returncode == 0, ran.stderr
    warning = (
        "the API key is shorter than 4 characters: it is sent, but not scrubbed from what "
        "evalgate prints or writes (so short a text would mask ordinary words); use a longer one"
    )
    assert ran.stderr.count(warning) == 1 and "k9Z" not in ran.stderr + ran.stdout


# -- a secret written in another writer's escapes, a flag's key in a settings error -------------


def test_a_key_given_by_flag_is_scrubbed_from_a_settings_error(tmp_path):
    """A settings error is raised before the settings exist: the key given as --api-key (not
    only one from the environment) is already a secret there."""
    key = "sk-Zk3pQ8wLx2Vb7Nm4Rt9Yc1Hd6"
    url = f"http://127.0.0.1:{unused_port()}/v1?api-key={key}"  # a query is refused, and quoted

    done = run_subprocess(*run_args(url, tmp_path / "run", api_key=key))

    assert done.returncode == ExitCode.USAGE, done.stderr
    assert "has a query or fragment (?api-key=***)" in done.stderr
    assert_no_part(key, {**streams("run", done), **written(tmp_path)})


def test_a_password_in_a_routers_own_url_encoding_is_scrubbed(tmp_path):
    """A router quotes its worker's URL as its URL library writes it (the WHATWG user-info set
    keeps `( ) !`), not as the user encoded the same password for --base-url."""
    password = "Secret(Pass)@Word1234!"  # noqa: S105  (planted, to be searched for)
    worker = f"http://gate:Secret(Pass)%40Word1234!@127.0.0.1:{unused_port()}"
    out = tmp_path / "run"
    with FakeEngine(EngineBehaviour(router="sglang-router")) as engine:
        engine.inject(Fault("worker_unreachable", worker_url=worker))
        url = engine.url.replace("http://", f"http://gate:{quote(password, safe='')}@", 1)
        served = ["--served-max-model-len", "4096"]  # the router lists no length
        done = run_subprocess(*run_args(url, out, *POINT, *served, limit=2))

    assert done.returncode == ExitCode.ENDPOINT, done.stderr
    assert "error sending request for url (http://***@127.0.0.1:" in done.stderr
    assert_no_part(password, {**streams("run", done), **written(out)})


def test_a_key_a_json_writer_escaped_in_its_own_way_is_scrubbed(tmp_path):
    """JSON may write any character as a \\u escape: Go's writer escapes `&`, `<` and `>`; a
    router that quotes such a body as text keeps the escape."""
    key = "sk-9fQ2&Lm7Wx4Rt8Zp1Kv6"
    quoted = key.replace("&", "\\u0026")
    out = tmp_path / "run"
    with FakeEngine(EngineBehaviour()) as engine:
        engine.inject(Fault("error", status=400, message=f'upstream said {{"key": "{quoted}"}}'))
        done = run_subprocess(*run_args(engine.url, out, api_key=key, limit=2))

    assert done.returncode == ExitCode.ENDPOINT, done.stderr
    assert 'upstream said {"key": "***"}' in done.stderr
    assert_no_part(key, {**streams("run", done), **written(out)})


def test_two_secrets_that_overlap_in_a_text_are_masked_as_one(tmp_path):
    """The key's end is the password's start: masking the key first must not leave the rest of
    the password in plain text."""
    key, password = "sk-Hq4Tz8Wm2Rx6", "Rx6Pb9Kc3Vn7Yd1"
    out = tmp_path / "run"
    with FakeEngine(EngineBehaviour()) as engine:
        engine.inject(Fault("error", status=400, message=f"{key}Pb9Kc3Vn7Yd1 is not allowed"))
        url = engine.url.replace("http://", f"http://gate:{password}@", 1)
        done = run_subprocess(*run_args(url, out, api_key=key, limit=2))

    assert done.returncode == ExitCode.ENDPOINT, done.stderr
    assert "(HTTP 400: *** is not allowed)" in done.stderr
    assert_no_part(key, {**streams("run", done), **written(out)})
    assert_no_part(password, {**streams("run", done), **written(out)})
