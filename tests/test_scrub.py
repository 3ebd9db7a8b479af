"""One hostile string through every output, read back by each output's parser (tests/outputs.py).

The string (newlines, GitHub workflow commands, ANSI, NUL, an HTML element, `]]>`, `|`, the
planted key and URL passwords) goes through every label, the model name, folder names and the
engine's text (its answers, an error body, a 401 that echoes the key, its version and owner)
into every output of `run`, `hook`, `verify` and `compare`. Then each output is read as its
consumer reads it. Beside it, one test per defect of issue 26, each failing on the code before.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import random
import string
import subprocess
import threading
import traceback
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

import msgspec
import pytest

from evalgate import scrub
from evalgate.compare import views
from evalgate.engine.answers import Completion, Problems, ready_answer
from evalgate.engine.wire import MAX_MESSAGE_CHARS, parse_error
from evalgate.environment import credentials_environment, variables
from evalgate.errors import ExitCode
from evalgate.eval.replies import MAX_CHARS_PER_TOKEN, Replies
from evalgate.run import run_gate
from evalgate.schemas import validation_errors
from evalgate.scrub import capped
from evalgate.settings.sources import load
from evalgate.settings.values import Settings, credentials
from evalgate.templates import esc
from evalgate.verify.html import SHOWN_CHARS
from tests import outputs
from tests import outputs as ht
from tests.conftest import (
    DOCS,
    PLANTED_BASIC,
    PLANTED_KEY,
    PLANTED_PASSWORD,
    PLANTED_RUN,
    PLANTED_USER,
    assert_nowhere,
    deadline,
    load_result,
    load_samples,
    run_args,
    run_settings,
    run_subprocess,
    with_password,
)
from tests.fakeengine import NOT_PROBE, EngineBehaviour, FakeEngine, Fault, unused_port
from tests.verify.sweeps import answers, baseline_answers, evalgate_sweep, thresholds

LIMIT = 10


@pytest.mark.loopback
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


RUN = {"limit": 4, "max_attempts": 1, "timeout": 10, "num_concurrent": None}


def commands(text: str) -> list[str]:
    """The lines GitHub's runner would read as workflow commands (after leading white space)."""
    return [line for line in text.splitlines() if line.lstrip().startswith("::")]


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
def test_a_huge_model_list_is_echoed_as_its_first_ids_and_a_count(many_models, tmp_path, cli):
    """3: a model missing from a list of 100,000: the first ids, then how many more."""
    args = run_args(many_models, tmp_path / "run", model="not-served", **RUN)

    code, out, err = cli(*args, within=120)

    assert code == 3
    [line] = [line for line in err.splitlines() if line.startswith("EndpointError: ")]
    assert "it serves ['model-000000', 'model-000001'" in line
    assert "'model-000004'] and 99,995 more" in line
    assert len(out) + len(err) < 5000


@pytest.mark.loopback
def test_a_huge_model_list_is_not_logged_whole_when_ready(many_models, cli):
    """3: the same list when the model is in it: the log line says how many, not which."""
    args = run_args(many_models, command="context", model="model-000000", isl=3000)
    code, _, err = cli(*args, "--served-max-model-len", "8192", within=120)

    assert code == 0
    assert "and 99,995 more" in err
    assert len(err) < 5000


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
def test_an_argument_argparse_cannot_place_is_quoted_on_one_line(cli):
    """A third folder given to compare (a name with a newline and a command in it)."""
    code, _, err = cli("compare", "a", "b", "c\n::stop-commands::t")
    assert code == 2
    assert commands(err) == []
    assert "unrecognized arguments: c\\n::stop-commands::t" in err


# evalgate.scrub: each output's neutraliser, by tables of cases (the outputs end to end are
# tests/test_scrub.py).

TERMINAL = [
    # (case, outside text, the line it becomes)
    ("plain text is left alone", "model llama-3 [::1]:8000 50%", "model llama-3 [::1]:8000 50%"),
    ("newlines stay on one line", "a\nb\r\nc", "a\\nb\\r\\nc"),
    ("a workflow command at the start", "::stop-commands::tok", "\\x3a:stop-commands::tok"),
    ("after white space, as the runner trims", " \u2003::add-mask::x", " \u2003\\x3a:add-mask::x"),
    ("the legacy form anywhere", "see ##[error]boom", "see ##\\x5berror]boom"),
    ("ANSI colours and titles removed", "\x1b[31mred\x1b[0m \x1b]0;t\x07ok", "red ok"),
    ("a C1 CSI removed", "\x9b31mred", "red"),
    ("NUL and DEL escaped", "a\x00b\x7f", "a\\x00b\\x7f"),
    ("bidirectional overrides escaped", "a\u202eb", "a\\u202eb"),
    ("a lone surrogate escaped", "a\ud800b", "a\\ud800b"),
    ("an escape rebuilt by removal stays escaped", "\x1b\x1b[31m[31m", "\\x1b[31m"),
    ("a command rebuilt by removal is broken", "##\x1b[0m[error]x", "##\\x5berror]x"),
    (
        "NEL, VT, FF and U+2028 are line ends too",
        "a\x85b\x0bc\x0cd\u2028e",
        "a\\x85b\\x0bc\\x0cd\\u2028e",
    ),
    ("no-break and ideographic spaces are trimmed", "\u00a0\u3000::x", "\u00a0\u3000\\x3a:x"),
    ("a hyperlink keeps its text only", "\x1b]8;;http://e\x07link\x1b]8;;\x07", "link"),
]


@pytest.mark.unit
@pytest.mark.parametrize(("text", "line"), [c[1:] for c in TERMINAL], ids=[c[0] for c in TERMINAL])
def test_terminal_makes_one_safe_line(text, line):
    assert scrub.terminal(text) == line


@pytest.mark.unit
def test_terminal_caps_long_text_and_says_how_long():
    shown = scrub.terminal("x" * 1_000_000)

    assert shown == "x" * scrub.TERMINAL_CHARS + "… (1,000,000 characters)"


@pytest.mark.unit
def test_terminal_json_is_the_exact_text_in_ascii_with_no_command():
    document = {"reason": "a\n::stop-commands::t ##[error]x \x7f é \u202e"}

    text = scrub.terminal_json(document)

    assert json.loads(text) == document
    assert text.isascii() and "##[" not in text and "\x7f" not in text
    assert all(not line.lstrip().startswith("::") for line in text.splitlines())


WORKFLOW = [
    ("50% done\nnext", "50%25 done%0Anext"),
    ("a\r\nb", "a%0D%0Ab"),
    ("\x1b[1mbold\x1b[0m\x00", "bold\\x00"),
]


@pytest.mark.unit
@pytest.mark.parametrize(("text", "escaped"), WORKFLOW)
def test_workflow_commands_are_escaped_as_github_documents(text, escaped):
    assert scrub.workflow_data(text) == escaped
    assert scrub.workflow_property(f"{text}: a,b") == f"{escaped}%3A a%2Cb"


MARKDOWN = [
    ("a|b", "a\\|b"),
    ("a\\|b", "a\\\\\\|b"),
    ("<script>x</script>", "&lt;script&gt;x&lt;/script&gt;"),
    ("line\nbreak", "line\\\\nbreak"),
    ("[link](javascript:x) *em* `code`", "\\[link\\](javascript:x) \\*em\\* \\`code\\`"),
]


@pytest.mark.unit
@pytest.mark.parametrize(("text", "cell"), MARKDOWN)
def test_markdown_keeps_a_cell_one_cell_of_literal_text(text, cell):
    assert scrub.markdown(text) == cell
    assert len(outputs.gfm_cells(f"| {scrub.markdown(text)} | next |")) == 2


@pytest.mark.unit
def test_mermaid_labels_keep_plain_characters_only():
    assert scrub.mermaid('conc=8 tp/2 (fp8) %%{init: {"x": 1}}%% "q" a\nb') == (
        "\"conc=8 tp/2 (fp8) ???init: ?'x': 1???? 'q' a?nb\""
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "code"), [("a/b", "`a/b`"), ("a`b", "``a`b``"), ("`x", "`` `x ``"), ("<b>|", "`<b>|`")]
)
def test_markdown_code_is_fenced_longer_than_the_text(text, code):
    assert scrub.markdown_code(text) == code


@pytest.mark.unit
def test_xml_replaces_what_xml_1_0_forbids_so_the_file_parses(tmp_path):
    import xml.etree.ElementTree as ET

    text = "a\x00b\x1b[0mc\x0bd\ud800e ]]> <x> \ufffe"
    root = ET.Element("testcase", name=scrub.xml(text))
    root.text = scrub.xml(text)
    (tmp_path / "j.xml").write_text(ET.tostring(root, encoding="unicode"), encoding="utf-8")

    parsed = outputs.junit(tmp_path / "j.xml")

    assert parsed.text == parsed.get("name") == "a\\x00bc\\x0bd\\ud800e ]]> <x> \\ufffe"


@pytest.mark.unit
def test_html_shows_controls_and_leaves_the_markup_to_the_template():
    """The page's template escapes the text (tests/test_templates.py): cleaning it must not."""
    assert scrub.html("<b onclick='x'>&\x00\x1b[31m") == "<b onclick='x'>&\\x00"


@pytest.mark.unit
def test_json_text_is_exact_and_always_writable_as_utf8(tmp_path):
    document = {"answer": "é \x00 <b> ::x \u202e"}

    text = scrub.json_text({**document, "name": "b200\udcff"})
    (tmp_path / "a.json").write_text(text, encoding="utf-8")

    assert json.loads((tmp_path / "a.json").read_text(encoding="utf-8")) == {
        **document,  # not neutralised: evidence is data
        "name": "b200\ufffd",  # a lone surrogate is no text: written as a decoder replaces it
    }


@pytest.mark.unit
@pytest.mark.parametrize(
    "document",
    [
        {"a": [], "b": {}, "c": [1, 2.5, 1e16, -0.0, 'é \u2028 \x7f \\ "q"', None, True]},
        {"nested": {"deeper": {"empty": [], "values": [{"x": 0.1 + 0.2}]}}, "name": "b\udcff"},
        {"stderr": math.nan, "latency": [math.inf, -math.inf]},  # JSON's words for them
        [],
    ],
)
def test_json_text_is_indented_as_json_indents_it(document):
    written = json.dumps(document, indent=2, ensure_ascii=False).replace("\udcff", "\ufffd")
    assert scrub.json_text(document, indent=2) == written


@pytest.mark.unit
def test_every_neutraliser_scrubs_first():
    secret = "sk-a%b,c:d|e<f"  # noqa: S105  (planted: every output's special characters)
    scrub.configure([secret])

    for shown in (
        scrub.terminal(secret),
        scrub.terminal_json({"k": secret}),
        scrub.workflow_data(secret),
        scrub.workflow_property(secret),
        scrub.markdown(secret),
        scrub.markdown_code(secret),
        scrub.xml(secret),
        scrub.html(secret),
        scrub.json_text([secret]),
    ):
        assert "sk-a" not in shown and "e&lt;f" not in shown
        assert "***" in shown.replace("\\", "")  # Markdown writes it \*\*\*


@pytest.mark.unit
def test_listed_shows_the_first_items_and_how_many_more():
    assert scrub.listed(["a", "b"]) == "['a', 'b']"
    assert scrub.listed([f"m{i}" for i in range(100_000)]) == (
        "['m0', 'm1', 'm2', 'm3', 'm4'] and 99,995 more"
    )


def _labels(schema: object, name: str | None = None) -> Iterator[str]:
    """The names of the fields a schema allows only fixed values for (an enum or a const)."""
    if isinstance(schema, dict):
        if name is not None and ("enum" in schema or "const" in schema):
            yield name
        for key, value in schema.items():
            if key == "properties":
                for field, inner in value.items():
                    yield from _labels(inner, field)
            else:  # anyOf, oneOf, items, $defs: the same field, or a new object's
                yield from _labels(value, name if key in ("anyOf", "oneOf", "items") else None)
    elif isinstance(schema, list):
        for item in schema:
            yield from _labels(item, name)


@pytest.mark.unit
def test_every_label_of_every_document_evalgate_writes_is_its_own_and_never_scrubbed():
    """A field that holds only evalgate's words is left alone by the scrub (a key `pass` must
    not unmake a status): each enum or const field of the schemas is in OWN_FIELDS."""
    schemas = sorted((Path(scrub.__file__).parent / "schemas").glob("*.schema.json"))
    labels = {n for path in schemas for n in _labels(json.loads(path.read_text()))}

    assert labels <= scrub.OWN_FIELDS
    assert {"schema", "status", "outcome", "verdict", "stage", "answer_field"} <= labels


# evalgate.scrub: which forms of a configured secret are found, and what is left alone.

KEY = "sk-evalgate-PLANTED/+123"  # a slash and a plus: URL-encoding and JSON writers differ


PAIR = "gate:pw-PLANTED-456"


FORMS = [
    # (case, text holding the key)
    ("as written", f"Incorrect API key provided: {KEY}."),
    ("JSON-escaped, slash escaped too", json.dumps({"key": KEY}).replace("/", "\\/")),
    ("URL-encoded", f"https://h/?key={quote(KEY, safe='')}"),
    ("URL-encoded, lower-case hex", f"key={quote(KEY, safe='').replace('%2F', '%2f')}"),
    ("base64", base64.b64encode(KEY.encode()).decode()),
    ("as a bearer token", f"Authorization: Bearer {KEY}"),
]


@pytest.mark.unit
@pytest.mark.parametrize("text", [c[1] for c in FORMS], ids=[c[0] for c in FORMS])
def test_every_form_of_the_key_is_scrubbed(text):
    scrub.configure([KEY])

    shown = scrub.text(text)

    assert "PLANTED" not in shown and "UExBTlRFR" not in shown
    assert "***" in shown


@pytest.mark.unit
def test_url_user_info_is_scrubbed_as_written_decoded_and_as_basic_auth():
    url = "http://gate:pw%2FPLANTED-456@router:8000/v1"
    scrub.configure([], [url])
    basic = base64.b64encode(b"gate:pw/PLANTED-456").decode()

    shown = scrub.text(f"{url} Basic {basic} pw/PLANTED-456 gate:pw/PLANTED-456")

    assert shown == "http://***@router:8000/v1 Basic *** *** ***"


@pytest.mark.unit
def test_a_user_alone_is_a_token_and_is_scrubbed():
    scrub.configure([], ["http://tok-PLANTED-789@router:8000/v1"])

    assert scrub.text("GET http://tok-PLANTED-789@router") == "GET http://***@router"


@pytest.mark.unit
@pytest.mark.parametrize("key", ["EMPTY", "none", "Dummy", "sk-no-key-required", ""])
def test_a_placeholder_key_is_not_scrubbed(key, caplog):
    scrub.configure([key])

    text = "EMPTY none Dummy sk-no-key-required answers"
    assert scrub.text(text) == text
    assert not caplog.records  # a placeholder is no secret: nothing to warn of


@pytest.mark.unit
@pytest.mark.parametrize("secret", ["sk-1234", "hunter2", "abcd", "pässwörd", "🔑🔑🔑🔑"])
def test_a_secret_of_four_characters_or_more_is_scrubbed_however_short(secret):
    scrub.configure([], [f"http://bob:{quote(secret)}@router/v1"])
    basic = base64.b64encode(f"bob:{secret}".encode()).decode()

    shown = scrub.text(f"{secret} {json.dumps(secret)} {quote(secret)} Basic {basic}")

    assert shown == '*** "***" *** Basic ***'


@pytest.mark.unit
def test_a_secret_under_four_characters_is_not_scrubbed_and_warned_of_once_unshown(caplog):
    scrub.configure(["k9!"], ["http://zq:p0@router/v1"])  # values no other test uses
    scrub.configure(["k9!"], ["http://zq:p0@router/v1"])  # a command configures again

    assert scrub.text("k9! zq p0") == "k9! zq p0"
    warned = [r.getMessage() for r in caplog.records]
    assert warned == [
        f"{what} is shorter than 4 characters: it is sent, but not scrubbed from what evalgate "
        "prints or writes (so short a text would mask ordinary words); use a longer one"
        for what in (
            "the API key",
            "the user of --base-url or --worker-url",
            "the password of --base-url or --worker-url",
        )
    ]
    assert not any(s in m for m in warned for s in ("k9!", "zq", "p0"))


@pytest.mark.unit
def test_a_url_user_and_password_are_each_a_secret():
    scrub.configure([], ["http://evalgate-user:hunter2@router/v1"])

    assert scrub.text("evalgate-user said hunter2") == "*** said ***"


@pytest.mark.unit
def test_a_later_feature_registers_its_urls_credentials_with_one_call():
    scrub.add_url("postgresql://hist:db-PLANTED-1@db:5432/runs", "--history-url")

    assert scrub.text("auth failed for hist: db-PLANTED-1") == "auth failed for ***: ***"


@pytest.mark.unit
def test_a_json_escape_in_upper_case_hex_is_found():
    scrub.configure(["pässwort"])

    assert scrub.text('{"e": "p\\u00E4sswort"}') == '{"e": "***"}'


@pytest.mark.unit
def test_a_piece_of_a_secret_a_filter_took_out_of_an_answer_is_masked_whole():
    scrub.configure(["sk-PLANTED-31415926535"])

    assert scrub.fragment("31415926535") == "***"  # the flexible filter's last number in it
    assert scrub.fragment("-6535") == "-6535"  # under 8 of its characters: no piece of it
    assert scrub.fragment("42") == "42"


@pytest.mark.unit
def test_documents_are_scrubbed_in_their_values_never_their_keys_or_own_fields():
    scrub.configure(["evalgate"])
    document = {
        "schema": "evalgate.result/1",
        "evalgate": ["evalgate said", {"evalgate": 1}],
        "files": {"samples": "evalgate-results/samples.jsonl"},
        "verdict": {"outcome": "pass", "reason": "evalgate: ok"},
        "n": 12345678,
        "t": ("xevalgate",),
        "b": None,
    }

    assert scrub.values(document, {"schema", "files", "outcome"}) == {
        "schema": "evalgate.result/1",
        "evalgate": ["*** said", {"evalgate": 1}],
        "files": {"samples": "evalgate-results/samples.jsonl"},
        "verdict": {"outcome": "pass", "reason": "***: ok"},  # an object, not own text
        "n": 12345678,
        "t": ["x***"],
        "b": None,
    }


@pytest.mark.unit
def test_with_no_secret_configured_nothing_changes():
    document = {"a": ["x"]}

    assert scrub.values(document) is document
    assert scrub.text(KEY) == KEY


@pytest.mark.unit
def test_a_longer_secret_is_masked_whole_before_a_shorter_one_inside_it():
    scrub.configure([], ["http://gate:pw-PLANTED-456@router/v1"])

    assert scrub.text(f"{PAIR} pw-PLANTED-456") == "*** ***"


@pytest.mark.unit
def test_the_settings_secrets_are_its_key_and_every_urls_user_info():
    settings = Settings(
        api_key=KEY,
        base_url="http://gate:pw-PLANTED-456@router:8000/v1",
        worker_urls=["http://w:wk-PLANTED-789@decode:8200/v1"],
    )
    scrub.configure(*credentials(settings))

    assert scrub.text(f"{KEY} {PAIR} wk-PLANTED-789") == "*** *** ***"


@pytest.mark.unit
def test_the_credential_variables_are_the_ones_settings_reads():
    """Every command scrubs what credentials_environment finds: the variables the settings
    read these from, each of them."""
    for field, value in (
        ("api_key", KEY),
        ("base_url", "http://gate:pw-PLANTED-456@router:8000/v1"),
        ("worker_urls", "http://w:wk-PLANTED-789@decode:8200/v1"),
    ):
        for variable in variables(field):
            loaded = load(None, {}, environ={variable: value})
            assert loaded.origin(field) == variable
            keys, urls = credentials_environment({variable: value})
            assert value in keys + urls


@pytest.mark.unit
def test_every_credential_in_the_environment_is_found():
    environ = {
        "EVALGATE_API_KEY": "k1-PLANTED-000",
        "OPENAI_API_KEY": "k2-PLANTED-000",
        "ROUTER_URL": "http://u:p@router/v1",
        "WORKER_URLS": "http://a:b@w1/v1, http://c:d@w2/v1",
    }

    keys, urls = credentials_environment(environ)

    assert keys == ["k1-PLANTED-000", "k2-PLANTED-000"]
    assert urls == ["http://u:p@router/v1", "http://a:b@w1/v1", "http://c:d@w2/v1"]


_RANDOM = random.Random(40)  # noqa: S311  # reproducible test data, no real secret


_ALNUM = string.ascii_letters + string.digits


_PASSWORD_CHARS = _ALNUM + "/+@äé€ß!$&=?"  # what URL-encoding, JSON and base64 each change


KEYS = ["sk-" + "".join(_RANDOM.choices(_ALNUM, k=27)) for _ in range(3)]


PASSWORDS = [
    "".join(_RANDOM.choices(_PASSWORD_CHARS, k=length - 1)) + _RANDOM.choice("/+@äé€ß!$&=?")
    for length in (4, 5, 6, 7)
]


"""4 to 7 characters, each with one an encoding changes (in any order the draw gives)."""


SWEEP_USER = "gate-user"


FILL = "~"  # in no secret, no encoding of one, and changed by no output


def _encodings(secret: str, user: str | None) -> dict[str, str]:
    """The secret as each kind of outside text may carry it."""
    basic = f"{user}:{secret}" if user else secret
    return {
        "as written": secret,
        "JSON-escaped": json.dumps(secret)[1:-1],
        "URL-encoded": quote(secret, safe=""),
        "base64 (Basic)": base64.b64encode(basic.encode()).decode(),
    }


PLANTED = [
    (f"{kind} {n}, {how}", form)
    for kind, secrets, user in (("key", KEYS, None), ("password", PASSWORDS, SWEEP_USER))
    for n, secret in enumerate(secrets)
    for how, form in _encodings(secret, user).items()
]


def _answer(text: str) -> list[str]:
    """What evalgate keeps of an answer that ran past its budget (max_tokens 1: 64 chars)."""
    replies = Replies("m", "chat", max_tokens=1, max_failed=0, journal=None, thinking=None)
    replies.record(0, "key", Completion(text, "stop", 1, 1, reasoning=text), resumed=False)
    kept = replies.answers[0]
    return [kept.response or "", kept.reasoning or ""]


WRAPPED = "Request processing failed: Prefill server error 400 Bad Request: "


def _engine_error(status: int, body: str) -> list[str]:
    error = parse_error(status, body)
    return [error.message, error.describe()]


def _dynamo_reason(text: str) -> list[str]:
    said = ready_answer(503, json.dumps({"ready": False, "reason": text}))
    assert said is not None
    return [said[1]]


def _noted(text: str) -> list[str]:
    problems = Problems()
    problems.note("finish_reason", text)
    return list(problems.first.values())


CAPS: list[tuple[str, int, Callable[[str], list[str]]]] = [
    # (where outside text is cut, at how many characters, what evalgate keeps of a text)
    (
        "engine error, JSON",
        MAX_MESSAGE_CHARS,
        lambda t: _engine_error(400, json.dumps({"error": {"message": t, "code": 400}})),
    ),
    (
        "engine error, flat JSON",
        MAX_MESSAGE_CHARS,
        lambda t: _engine_error(400, json.dumps({"object": "error", "message": t})),
    ),
    (
        "engine error, detail",
        MAX_MESSAGE_CHARS,
        lambda t: _engine_error(422, json.dumps({"detail": t})),
    ),
    ("engine error, text", MAX_MESSAGE_CHARS, lambda t: _engine_error(502, t)),
    (
        "engine error, router-wrapped",
        MAX_MESSAGE_CHARS,
        lambda t: _engine_error(500, WRAPPED + t[len(WRAPPED) :]),  # the offset is the text's
    ),
    ("Dynamo's reason", MAX_MESSAGE_CHARS, _dynamo_reason),
    ("a model id listed", 100, lambda t: [scrub.listed([t, "other"])]),
    ("an answer past its budget", 64, _answer),
    ("an implausible value noted", 80, _noted),
    ("a lost answer's cell", SHOWN_CHARS, lambda t: [esc(capped(t, SHOWN_CHARS))]),
    ("compare's question", 100, lambda t: [views._short(t)]),
    ("a terminal line", scrub.TERMINAL_CHARS, lambda t: [scrub.terminal(t)]),
    ("a workflow command", scrub.TERMINAL_CHARS, lambda t: [scrub.workflow_data(t)]),
    ("the job summary", scrub.TERMINAL_CHARS, lambda t: [scrub.markdown(t)]),
    *((f"capped at {n}", n, lambda t, n=n: [capped(t, n)]) for n in (40, 60, 200, 300)),
]


def _runs(form: str) -> set[str]:
    size = min(8, len(form))
    return {form[i : i + size] for i in range(len(form) - size + 1)}


@pytest.mark.unit
@pytest.mark.parametrize(("cap", "keep"), [c[1:] for c in CAPS], ids=[c[0] for c in CAPS])
def test_no_cut_keeps_any_part_of_a_secret_at_any_offset(cap, keep):
    """Each secret, in each encoding, planted at every offset from (cap - its length) to the
    cap (and two beyond each end: a quote or prefix shifts some outputs): no output holds a run
    of min(8, its length) of its characters."""
    scrub.configure(KEYS, [f"http://{SWEEP_USER}:{quote(p, safe='')}@router/v1" for p in PASSWORDS])
    leaks = []
    for name, form in PLANTED:
        runs = _runs(form)
        for offset in range(cap - len(form) - 2, cap + 3):
            kept = keep(FILL * offset + form + FILL * 40)
            leaks += [(name, offset, text) for text in kept if any(r in text for r in runs)]

    assert leaks == []


ESCAPED = [
    # (case, secret, text holding it)
    ("Go's JSON escapes of & < >", "sk-a&b<c>d-9Qz", "sk-a\\u0026b\\u003cc\\u003Ed-9Qz"),
    ("any character a \\u escape", "sk-Wq7Lm2", "sk-\\u0057q7\\u004cm2"),
    ("a character beyond the BMP, a UTF-16 pair", "pw-\U0001f511-key", "pw-\\ud83d\\uDD11-key"),
    ("the WHATWG user-info set keeps ( ) !", "Secret(Pass)@Word1!", "Secret(Pass)%40Word1!"),
    ("each character encoded or not", "p@ss w0rd/x", "p%40ss w0rd%2fx"),
]


@pytest.mark.unit
@pytest.mark.parametrize(("secret", "text"), [c[1:] for c in ESCAPED], ids=[c[0] for c in ESCAPED])
def test_a_secret_is_found_whichever_of_its_characters_a_writer_escaped(secret, text):
    scrub.configure([secret])

    assert scrub.text(f"<{text}>") == "<***>"


@pytest.mark.unit
def test_overlapping_secrets_are_masked_as_one():
    scrub.configure(["sk-AAAA1111BBBB2222"], ["http://user:BBBB2222CCCC3333@h/v1"])

    assert scrub.text("x sk-AAAA1111BBBB2222CCCC3333 y BBBB2222CCCC3333") == "x *** y ***"


# Secrets: a planted API key or URL password is sent to the engine, and shown nowhere else.


def files_text(folder: Path) -> str:
    """Every file under `folder`, hidden and temporary ones included, as text."""
    return "\n".join(
        path.read_bytes().decode("utf-8", "replace")
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    )


POINT = ["--min-samples", "0"]  # secrets, not statistics: the point estimate decides


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
def test_no_secret_when_the_endpoint_is_never_ready(cli, tmp_path):
    url = with_password(f"http://127.0.0.1:{unused_port()}/v1")
    out = tmp_path / "run"

    args = run_args(url, out, api_key=PLANTED_KEY, **PLANTED_RUN)
    code, stdout, stderr = cli("-v", "-v", *args, within=30)

    assert code == 3
    assert "was not ready after" in stderr
    assert "http://127.0.0.1:" in stderr  # the URL is named, without its password
    assert_nowhere(stdout, stderr, files_text(out))


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
def test_a_settings_error_does_not_echo_the_secrets(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALGATE_API_KEY", PLANTED_KEY)
    url = with_password("http://127.0.0.1:8000/v1")

    args = run_args(url, tmp_path / "run", **(PLANTED_RUN | {"limit": 0}))
    code, stdout, stderr = cli(*args, within=30)

    assert code == 2
    assert "Invalid settings: --limit = 0" in stderr
    assert_nowhere(stdout, stderr)


@pytest.mark.loopback
def test_a_bad_url_with_a_password_is_a_usage_error_that_hides_it(cli, tmp_path):
    url = f"ftp://{PLANTED_USER}:{PLANTED_PASSWORD}@127.0.0.1:{unused_port()}/v1"

    code, stdout, stderr = cli(*run_args(url, tmp_path / "run", **PLANTED_RUN), within=30)

    assert code == 2
    assert "--base-url" in stderr
    assert_nowhere(stdout, stderr)


CUT_KEY = "sk-ujOeHwdFcAefAZhnM6Jy8c1riht"


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


@pytest.mark.loopback
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


@pytest.mark.loopback
def test_a_model_id_holding_the_key_across_its_cut_keeps_no_part_of_it(tmp_path):
    """A listed model id is quoted to 100 characters: the key starts at 90."""
    out = tmp_path / "run"
    with FakeEngine(EngineBehaviour(listed_model=FILL * 90 + CUT_KEY)) as engine:
        ran = run_subprocess(*run_args(engine.url, out, api_key=CUT_KEY, limit=2))

    assert ran.returncode == 3, ran.stderr
    assert "does not serve model 'fake-model'; it serves ['~~~~" in ran.stderr
    assert_no_part(CUT_KEY, {**streams("run", ran), **written(out)})


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
def test_a_key_given_by_flag_is_scrubbed_from_a_settings_error(tmp_path):
    """A settings error is raised before the settings exist: the key given as --api-key (not
    only one from the environment) is already a secret there."""
    key = "sk-Zk3pQ8wLx2Vb7Nm4Rt9Yc1Hd6"
    url = f"http://127.0.0.1:{unused_port()}/v1?api-key={key}"  # a query is refused, and quoted

    done = run_subprocess(*run_args(url, tmp_path / "run", api_key=key))

    assert done.returncode == ExitCode.USAGE, done.stderr
    assert "has a query or fragment (?api-key=***)" in done.stderr
    assert_no_part(key, {**streams("run", done), **written(tmp_path)})


@pytest.mark.loopback
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


@pytest.mark.loopback
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


@pytest.mark.loopback
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
