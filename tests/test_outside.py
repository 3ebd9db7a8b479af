"""evalgate.scrub: each output's neutraliser, by tables of cases (the outputs end to end are
tests/test_hostile_text.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalgate import scrub
from tests import outputs

pytestmark = pytest.mark.unit


# -- each output's neutraliser --------------------------------------------------------------------

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


@pytest.mark.parametrize(("text", "line"), [c[1:] for c in TERMINAL], ids=[c[0] for c in TERMINAL])
def test_terminal_makes_one_safe_line(text, line):
    assert scrub.terminal(text) == line


def test_terminal_caps_long_text_and_says_how_long():
    shown = scrub.terminal("x" * 1_000_000)

    assert shown == "x" * scrub.TERMINAL_CHARS + "… (1,000,000 characters)"


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


@pytest.mark.parametrize(("text", "cell"), MARKDOWN)
def test_markdown_keeps_a_cell_one_cell_of_literal_text(text, cell):
    assert scrub.markdown(text) == cell
    assert len(outputs.gfm_cells(f"| {scrub.markdown(text)} | next |")) == 2


def test_mermaid_labels_keep_plain_characters_only():
    assert scrub.mermaid('conc=8 tp/2 (fp8) %%{init: {"x": 1}}%% "q" a\nb') == (
        "\"conc=8 tp/2 (fp8) ???init: ?'x': 1???? 'q' a?nb\""
    )


@pytest.mark.parametrize(
    ("text", "code"), [("a/b", "`a/b`"), ("a`b", "``a`b``"), ("`x", "`` `x ``"), ("<b>|", "`<b>|`")]
)
def test_markdown_code_is_fenced_longer_than_the_text(text, code):
    assert scrub.markdown_code(text) == code


def test_xml_replaces_what_xml_1_0_forbids_so_the_file_parses(tmp_path):
    import xml.etree.ElementTree as ET

    text = "a\x00b\x1b[0mc\x0bd\ud800e ]]> <x> \ufffe"
    root = ET.Element("testcase", name=scrub.xml(text))
    root.text = scrub.xml(text)
    (tmp_path / "j.xml").write_text(ET.tostring(root, encoding="unicode"), encoding="utf-8")

    parsed = outputs.junit(tmp_path / "j.xml")

    assert parsed.text == parsed.get("name") == "a\\x00bc\\x0bd\\ud800e ]]> <x> \\ufffe"


def test_html_shows_controls_and_leaves_the_markup_to_the_template():
    """The page's template escapes the text (tests/test_page.py): cleaning it must not."""
    assert scrub.html("<b onclick='x'>&\x00\x1b[31m") == "<b onclick='x'>&\\x00"


def test_json_text_is_exact_and_always_writable_as_utf8(tmp_path):
    document = {"answer": "é \x00 <b> ::x \u202e"}

    text = scrub.json_text({**document, "name": "b200\udcff"})
    (tmp_path / "a.json").write_text(text, encoding="utf-8")

    assert json.loads((tmp_path / "a.json").read_text(encoding="utf-8")) == {
        **document,  # not neutralised: evidence is data
        "name": "b200\ufffd",  # a lone surrogate is no text: written as a decoder replaces it
    }


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


def test_every_label_of_every_document_evalgate_writes_is_its_own_and_never_scrubbed():
    """A field that holds only evalgate's words is left alone by the scrub (a key `pass` must
    not unmake a status): each enum or const field of the schemas is in OWN_FIELDS."""
    schemas = sorted((Path(scrub.__file__).parent / "schemas").glob("*.schema.json"))
    labels = {n for path in schemas for n in _labels(json.loads(path.read_text()))}

    assert labels <= scrub.OWN_FIELDS
    assert {"schema", "status", "outcome", "verdict", "stage", "answer_field"} <= labels
