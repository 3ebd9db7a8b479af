"""One hostile string through every output, read back by each output's parser (tests/outputs.py).

The string (newlines, GitHub workflow commands, ANSI, NUL, an HTML element, `]]>`, `|`, the
planted key and URL passwords) goes through every label, the model name, folder names and the
engine's text (its answers, an error body, a 401 that echoes the key, its version and owner)
into every output of `run`, `hook`, `verify` and `compare`. Then each output is read as its
consumer reads it. Beside it, one test per defect of issue 26, each failing on the code before.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests import outputs as ht
from tests.conftest import load_result, run_args
from tests.fakeengine import EngineBehaviour, FakeEngine, Fault, load_gsm8k

pytestmark = pytest.mark.loopback

DOCS = sorted(load_gsm8k().values(), key=lambda d: d.index)
LIMIT = 10


# -- one hostile string, every output ------------------------------------------------------------


def test_one_hostile_string_through_every_output_of_run_hook_verify_and_compare(
    tmp_path, cli, monkeypatch
):
    hostile, name, expected = ht.HOSTILE, ht.as_name(ht.HOSTILE), ht.scrubbed(ht.HOSTILE)
    inputs = tmp_path / "inputs"  # what the user and the engine hand evalgate: may hold secrets
    inputs.mkdir()
    thresholds = inputs / f"thr {name}.json"
    thresholds.write_text(
        json.dumps({"default": {"gsm8k": 0.5}, "models": {hostile: {"gsm8k": 0.6}}}),
        encoding="utf-8",
    )
    malformed = inputs / f"m {name}" / "result.json"
    malformed.parent.mkdir()
    malformed.write_text(json.dumps({"schema": hostile, "status": hostile}), encoding="utf-8")
    out = tmp_path / "out"
    a, b, c, hook = (out / f"{tag} {name}" for tag in ("a", "b", "c", "hook"))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(out / "summary.md"))
    behaviour = EngineBehaviour(
        model=hostile, version=hostile, owned_by=hostile, trailer=f"\n{hostile}", accuracy=1.0
    )
    streams: dict[str, tuple[str, str]] = {}
    with FakeEngine(behaviour) as engine:
        url = ht.with_password(engine.url)
        worker = ht.with_password(engine.url, ht.WORKER_USER, ht.WORKER_PASSWORD)
        labels = ("model_prefix", "hardware", "framework", "precision", "kv_cache_dtype")
        common = {
            "worker_url": worker, "api_key": ht.KEY, "model": hostile, "limit": LIMIT,
            "max_attempts": 2, "min_samples": 0, "thresholds": thresholds, "num_concurrent": None,
            **dict.fromkeys((*labels, "spec_decoding"), hostile),
        }  # fmt: skip
        # an engine error for one question (allowed), the answers carrying the string
        engine.inject(Fault("error", questions={DOCS[3].question}, message=hostile))
        run_a = run_args(url, a, json="-", max_failed_requests=1, **common)
        streams["run A"] = cli(*run_a, within=120, engine=engine)[1:]
        engine.behaviour.accuracy = 0.5
        run_b = run_args(url, b, baseline=a, max_failed_requests=1, **common)
        streams["run B"] = cli(*run_b, within=120, engine=engine)[1:]
        engine.behaviour.accuracy = 1.0
        hook_args = {"command": "hook", "concurrency": 2, "layout": "harness"}
        hooked = run_args(url, hook, max_failed_requests=1, **hook_args, **common)
        streams["hook"] = cli(*hooked, within=120, engine=engine)[1:]
        engine.clear()
        engine.inject(
            Fault(
                "error",
                status=401,
                paths={"/v1/models"},
                message=f"Incorrect API key provided: {ht.KEY}. {hostile}",
            )
        )
        run_c = run_args(url, c, **common)
        code, *streams["run C (401, -v)"] = cli("-v", *run_c, within=120, engine=engine)
        assert code == 3

    # verify and compare read no settings: the credentials of their environment are the secrets
    monkeypatch.setenv("OPENAI_API_KEY", ht.KEY)
    monkeypatch.setenv("ROUTER_URL", url)
    monkeypatch.setenv("WORKER_URLS", f"http://127.0.0.1:1/v1,{worker}")
    reports = out / "reports"
    junit, verdict, page = reports / "junit.xml", reports / "verdict.json", reports / "page.html"
    code, *streams["verify"] = cli(
        "verify", out, inputs, "--github", "--thresholds", thresholds, "--junit", junit,
        "--json", verdict, "--html", page, within=120,
    )  # fmt: skip
    assert code == 1
    compare = ["compare", str(a), str(b), "--allow-protocol-drift"]
    streams["compare"] = cli(*compare, within=120)[1:]
    streams["compare --markdown"] = cli(*compare, "--markdown", within=120)[1:]
    streams["compare --json --html"] = cli(
        *compare, "--json", "-", "--html", str(reports / "compare.html"), within=120
    )[1:]

    # terminal: every line of every stream as GitHub's runner reads it
    for command, (stdout, stderr) in streams.items():
        lines = [*ht.terminal_lines(stdout, f"{command} stdout")]
        lines += ht.terminal_lines(stderr, f"{command} stderr")
        assert any("x\\n::stop-commands::tok" in line for line in lines), command  # it was there
    assert len(ht.annotations(streams["verify"][0])) >= 3  # evalgate's own commands still fire
    assert "Incorrect API key provided: ***" in streams["run C (401, -v)"][1]
    # JUnit parses as XML 1.0; HTML has no injected element; Markdown rows keep their cells
    assert {case.get("name") for case in ht.junit(junit).iter("testcase")}
    for html in (page, reports / "compare.html"):
        ht.html_page(html.read_text(encoding="utf-8"), html.name)
    assert (
        ht.markdown_tables((out / "summary.md").read_text(encoding="utf-8"), "summary") == 6
    )  # the 6 problems
    assert ht.markdown_tables(streams["compare --markdown"][0], "compare --markdown") >= 2
    # JSON: the exact text minus secrets
    result = load_result(a)
    assert result["labels"]["hardware"] == expected
    assert json.loads(streams["run A"][0]) == result
    samples = ht.json_documents(a / "samples.jsonl")
    assert all(s["response"].endswith(expected) for s in samples if s["response"])
    assert any(expected in (s["error"] or "") for s in samples)
    documents = [
        *(d for path in out.rglob("*.json*") for d in ht.json_documents(path)),
        json.loads(streams["compare --json --html"][0]),
    ]
    found = [text for d in documents for text in ht.strings(d)]
    assert expected in found and f"model:{expected}" in found
    assert any(expected in text for text in found if text != expected)
    # the secrets: in no stream and no file evalgate wrote
    for command, (stdout, stderr) in streams.items():
        ht.assert_no_secret(stdout + stderr, command)
    for path in out.rglob("*"):
        if path.is_file():
            ht.assert_no_secret(path.read_text(encoding="utf-8", errors="replace"), str(path))


# -- issue 26, each defect on its own --------------------------------------------------------------

NOT_PROBE = frozenset(range(2, 100_000))
"""`Fault.nth` that spares the first generation request: the pre-flight probe."""


RUN = {"limit": 4, "max_attempts": 1, "timeout": 10, "num_concurrent": None}


def commands(text: str) -> list[str]:
    """The lines GitHub's runner would read as workflow commands (after leading white space)."""
    return [line for line in text.splitlines() if line.lstrip().startswith("::")]


def test_an_engine_error_cannot_inject_a_workflow_command(tmp_path, cli):
    """2: the engine's words, a newline then workflow commands, stay inside one line."""
    words = "bad request\n::stop-commands::tok\n::error::forged"
    with FakeEngine(EngineBehaviour()) as engine:
        engine.inject(Fault("error", status=400, nth={1}, message=words))
        code, out, err = cli(
            *run_args(engine.url, tmp_path / "run", **RUN), within=120, engine=engine
        )

    assert code == 3
    assert commands(out + err) == []
    [line] = [line for line in err.splitlines() if line.startswith("ProbeError: ")]
    assert "bad request\\n::stop-commands::tok\\n::error::forged" in line
    result = load_result(tmp_path / "run")
    assert result["probe"]["engine_message"] == words  # evidence: the exact text


def test_an_aiohttp_error_of_several_lines_stays_one_line(tmp_path, cli):
    """2: aiohttp writes its HTTP errors on two lines ("400, message:\\n  Not enough data...");
    the error evalgate prints is still one."""
    with FakeEngine(EngineBehaviour()) as engine:
        engine.inject(Fault("die_mid_stream", nth=NOT_PROBE))
        code, _, err = cli(
            *run_args(engine.url, tmp_path / "run", **RUN), within=120, engine=engine
        )

    assert code == 4
    [line] = [line for line in err.splitlines() if line.startswith("EvalFailedError: ")]
    assert "Not enough data to satisfy content length header" in line
    assert line.endswith("the run cannot be gated.")


def test_a_folder_name_cannot_stop_verifys_annotations(tmp_path, cli):
    """2: a folder named with a newline and `::stop-commands::` is listed among the problems
    and annotated; no line of stdout is a command but evalgate's own ::error."""
    folder = tmp_path / "sweep" / "x\n::stop-commands::tok\n::warning::forged"
    folder.mkdir(parents=True)
    (folder / "result.json").write_text("{}", encoding="utf-8")
    summary = tmp_path / "summary.md"

    code, out, _ = cli("verify", str(tmp_path / "sweep"), "--github", within=120)

    assert code == 1
    [annotation] = commands(out)
    assert annotation.startswith("::error file=") and "%0A%3A%3Astop-commands" in annotation
    assert "x\\n::stop-commands::tok\\n::warning::forged" in out
    assert not summary.exists()


class _ManyModels(BaseHTTPRequestHandler):
    """An endpoint whose /v1/models lists 100,000 models (2.6 MB), none with a length."""

    BODY = json.dumps(
        {"object": "list", "data": [{"id": f"model-{i:06d}"} for i in range(100_000)]}
    ).encode()

    def do_GET(self) -> None:
        found = self.path == "/v1/models"
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.BODY) if found else 0))
        self.end_headers()
        if found:
            self.wfile.write(self.BODY)

    def do_POST(self) -> None:
        self.do_GET()

    def log_message(self, *args: object) -> None:  # the test's output is evalgate's
        pass


@pytest.fixture
def many_models() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ManyModels)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_a_huge_model_list_is_echoed_as_its_first_ids_and_a_count(many_models, tmp_path, cli):
    """3: a model missing from a list of 100,000: the first ids, then how many more."""
    args = run_args(many_models, tmp_path / "run", model="not-served", **RUN)

    code, out, err = cli(*args, within=120)

    assert code == 3
    [line] = [line for line in err.splitlines() if line.startswith("EndpointError: ")]
    assert "it serves ['model-000000', 'model-000001'" in line
    assert "'model-000004'] and 99,995 more" in line
    assert len(out) + len(err) < 5000


def test_a_huge_model_list_is_not_logged_whole_when_ready(many_models, cli):
    """3: the same list when the model is in it: the log line says how many, not which."""
    args = run_args(many_models, command="context", model="model-000000", isl=3000)
    code, _, err = cli(*args, "--served-max-model-len", "8192", within=120)

    assert code == 0
    assert "and 99,995 more" in err
    assert len(err) < 5000


def test_a_huge_error_body_is_echoed_as_its_start_and_its_length(tmp_path, cli):
    """3: a 100 kB error body: its first few hundred characters, then its length."""
    body = "Unauthorized: " + "x" * 100_000
    with FakeEngine(EngineBehaviour()) as engine:
        engine.inject(Fault("error", status=401, paths={"/v1/models"}, message=body))
        code, _, err = cli(
            *run_args(engine.url, tmp_path / "run", **RUN), within=120, engine=engine
        )

    assert code == 3
    [line] = [line for line in err.splitlines() if line.startswith("EndpointError: ")]
    assert "HTTP 401: Unauthorized: xxx" in line and "… (100,014 characters)" in line
    assert len(line) < 1000


# -- found by attacking the outputs ----------------------------------------------------------------


def test_a_label_that_is_not_utf8_is_recorded_exactly_and_printed_safely(
    tmp_path, cli, monkeypatch
):
    """A job variable holding bytes that are not UTF-8 (Python reads them as lone surrogates):
    result.json is still written, those bytes as U+FFFD; no line of output is a command."""
    label = os.fsdecode(b"b200\xff\n::stop-commands::t")
    monkeypatch.setenv("RUNNER_TYPE", label)
    with FakeEngine(EngineBehaviour()) as engine:
        args = run_args(engine.url, tmp_path / "run", min_samples=0, **RUN)
        code, out, err = cli(*args, within=120, engine=engine)

    assert code == 0, err
    assert commands(out + err) == []
    result = load_result(tmp_path / "run")
    assert result["labels"]["hardware"] == "b200\ufffd\n::stop-commands::t"


def test_verify_reports_a_folder_whose_name_is_not_utf8(tmp_path, cli):
    """Every report is written, and parses, when a result's folder name is not UTF-8 (the JSON
    writes those bytes as U+FFFD, the terminal escapes them) and the file holds a lone
    surrogate escape (malformed)."""
    folder = tmp_path / "sweep" / os.fsdecode(b"run-\xff\n::add-mask::x")
    folder.mkdir(parents=True)
    (folder / "result.json").write_text('{"schema": "\\ud800<b>|</b>"}', encoding="utf-8")
    reports = tmp_path / "reports"

    code, out, err = cli(
        "verify", tmp_path / "sweep", "--github", "--junit", reports / "junit.xml",
        "--json", reports / "verdict.json", "--html", reports / "page.html", within=120,
    )  # fmt: skip

    assert code == 1, err
    assert [line.split(" ", 1)[0] for line in commands(out)] == ["::error"]
    assert "run-\\udcff\\n::add-mask::x" in out
    ht.junit(reports / "junit.xml")
    [entry] = json.loads((reports / "verdict.json").read_text(encoding="utf-8"))["entries"]
    assert entry["path"] == str(folder / "result.json").replace("\udcff", "\ufffd")
    assert ht.Page((reports / "page.html").read_text(encoding="utf-8")).tags["script"] == 1


def test_a_label_cannot_direct_the_summarys_chart(tmp_path, cli, monkeypatch):
    """mermaid reads `%%{init: ...}%%` anywhere in a chart: a label keeps its plain characters
    only; the table below still holds it whole, escaped."""
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    evil = '%%{init: {"theme": "dark"}}%%"]\n```\n</details><img src=x onerror=alert(1)>|x|'
    with FakeEngine(EngineBehaviour(accuracy=0.5)) as engine:
        for folder, hardware in (("1", "b200"), ("2", evil)):
            args = run_args(engine.url, tmp_path / "sweep" / folder, hardware=hardware, **RUN)
            cli(*args, "--min-samples", "0", within=120, engine=engine)

    code, out, _ = cli("verify", str(tmp_path / "sweep"), "--github", within=120)

    assert code == 1
    assert len(commands(out)) == 2  # both annotations, nothing else
    text = summary.read_text(encoding="utf-8")
    chart = text.split("```mermaid\n", 1)[1].split("\n```\n", 1)[0]
    assert "%%" not in chart and "<" not in chart
    assert ht.markdown_tables(text, "summary") == 2
    assert "onerror=alert(1)&gt;\\|x\\|" in text


def test_an_argument_argparse_cannot_place_is_quoted_on_one_line(cli):
    """A third folder given to compare (a name with a newline and a command in it)."""
    code, _, err = cli("compare", "a", "b", "c\n::stop-commands::t")
    assert code == 2
    assert commands(err) == []
    assert "unrecognized arguments: c\\n::stop-commands::t" in err
