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
import math
import os
import random
import string
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

import pytest

from evalgate import scrub
from evalgate.compare import views
from evalgate.engine import answers
from evalgate.engine.answers import Completion, Problems
from evalgate.engine.wire import MAX_MESSAGE_CHARS, parse_error
from evalgate.environment import credentials_environment, variables
from evalgate.eval.replies import Replies
from evalgate.scrub import capped
from evalgate.settings.sources import load
from evalgate.settings.values import Settings, credentials
from evalgate.templates import esc
from evalgate.verify.html import SHOWN_CHARS
from tests import outputs
from tests import outputs as ht
from tests.conftest import load_result, run_args
from tests.fakeengine import EngineBehaviour, FakeEngine, Fault, load_gsm8k

DOCS = sorted(load_gsm8k().values(), key=lambda d: d.index)


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


NOT_PROBE = frozenset(range(2, 100_000))


"""`Fault.nth` that spares the first generation request: the pre-flight probe."""


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
    said = answers.ready_answer(503, json.dumps({"ready": False, "reason": text}))
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
