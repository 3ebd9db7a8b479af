"""One hostile string, and the parsers that check what each output made of it.

HOSTILE holds what breaks an output: a newline followed by GitHub workflow commands (the modern
`::stop-commands::` and `::add-mask::` at the start of a line, the legacy `##[stop-commands]`
anywhere in one), a carriage return, ANSI colour and window-title sequences, NUL, a right-to-left
override, an HTML element, XML's `]]>`, Markdown's `|`, and the planted API key and URL passwords.
Each checker reads an output the way its consumer does: GitHub's runner reads stdout line by
line, an XML 1.0 parser reads JUnit, an HTML parser reads the page, GFM splits table rows.
"""

from __future__ import annotations

import base64
import json
import re
import unicodedata
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

KEY = "sk-evalgate-PLANTED-123"
USER = "gate"
PASSWORD = "pw-PLANTED-456"  # noqa: S105  (planted, to be searched for)
WORKER_USER = "worker"
WORKER_PASSWORD = "wk-PLANTED-789"  # noqa: S105
INJECTED = "<script>alert(1)</script>"
HOSTILE = (
    "x\n::stop-commands::tok\r\n  ::add-mask::mask ##[stop-commands]legacy "
    f"\x1b[31mred\x1b]0;title\x07 \x00nul \u202eflip {INJECTED} ]]> a|b \\| "
    f"{KEY} {PASSWORD} {WORKER_PASSWORD}"
)
"""Every danger in one string (no slash: it names folders too, see `as_name`)."""
SECRETS = (
    KEY,
    PASSWORD,
    WORKER_PASSWORD,
    base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(),
    base64.b64encode(f"{WORKER_USER}:{WORKER_PASSWORD}".encode()).decode(),
)


def scrubbed(text: str) -> str:
    """What the JSON evidence holds for `text`: the exact text, the secrets masked."""
    for secret in (KEY, PASSWORD, WORKER_PASSWORD):
        text = text.replace(secret, "***")
    return text


def as_name(text: str) -> str:
    """`text` as a folder name can hold it (no NUL, no slash)."""
    return text.replace("\x00", "").replace("/", "\u2215")


def with_password(url: str, user: str = USER, password: str = PASSWORD) -> str:
    return url.replace("http://", f"http://{user}:{password}@", 1)


def assert_no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        for form in {secret, quote(secret, safe=""), json.dumps(secret)[1:-1]}:
            assert form not in text, f"a secret in {where}"


# -- the terminal: GitHub's runner reads stdout and stderr line by line -------------------------

ANNOTATION = re.compile(r"::(error|warning) (?:file=[^,:]*,)?title=[^,:]*::[^\r\n]*")
"""The only workflow commands evalgate writes: verify's annotations, properties escaped."""
BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def terminal_lines(text: str, where: str) -> Iterator[str]:
    """The lines of a stream as the runner reads them (split at LF, CR or CRLF, as .NET's
    ReadLine splits), each checked: no control character, ANSI or bidirectional override; no
    `##[` anywhere (the legacy command form, read anywhere in a line); a line whose text starts
    with `::` (after white space, which the runner trims) only as one of evalgate's annotations."""
    for line in re.split(r"\r\n|\r|\n", text):
        controls = [c for c in line if unicodedata.category(c) in ("Cc", "Cs") or c in BIDI]
        assert not controls, f"{controls!r} in a line of {where}: {line!r}"
        assert "##[" not in line, f"a legacy workflow command in {where}: {line!r}"
        start = line.lstrip()
        if start.startswith("::"):
            assert ANNOTATION.fullmatch(start), f"an injected workflow command in {where}: {line!r}"
        yield line


def annotations(text: str) -> list[str]:
    return [line for line in terminal_lines(text, "stdout") if line.startswith("::")]


# -- JUnit, HTML, Markdown, JSON -----------------------------------------------------------------


def junit(path: Path) -> ET.Element:
    """The JUnit file, parsed by an XML 1.0 parser (expat refuses NUL and most controls)."""
    return ET.parse(path).getroot()  # noqa: S314  (evalgate's own file, read to check it)


class Page(HTMLParser):
    """An HTML page's elements, attributes and text, as a browser's parser reads them."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: Counter[str] = Counter()
        self.handlers: list[str] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.handlers += [name for name, _ in attrs if name.startswith("on")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def html_page(text: str, where: str) -> Page:
    """The page parsed: evalgate's one inline script, no event handler, and the hostile text
    present as text (so it was there to inject, and was escaped)."""
    page = Page(text)
    assert page.tags["script"] == 1, f"an injected script in {where}"
    assert not page.handlers, f"an injected event handler in {where}"
    assert INJECTED in "".join(page.text), f"the hostile text is missing from {where}"
    return page


def gfm_cells(line: str) -> list[str]:
    """A table row's cells as GFM splits them: at each `|` no backslash escapes."""
    cells, cell, escaped = [], "", False
    for char in line.strip():
        if escaped:
            cell, escaped = cell + char, False
        elif char == "\\":
            cell, escaped = cell + char, True
        elif char == "|":
            cells.append(cell)
            cell = ""
        else:
            cell += char
    cells.append(cell)
    return cells[1:-1] if line.strip().startswith("|") else cells


DELIMITER_ROW = re.compile(r"\|(?:\s*:?-+:?\s*\|)+")
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)")


def markdown_tables(text: str, where: str) -> int:
    """Every table of a Markdown document keeps its header's cell count in every row (fenced
    blocks stay closed, so none swallows a table); no raw HTML element outside code spans.
    Returns how many rows the tables hold (header and delimiter rows not counted)."""
    outside_code = CODE_SPAN.sub("", text)  # a code span's text is literal, never HTML
    assert "<script" not in outside_code.lower(), f"raw HTML in {where}"
    rows = 0
    fenced = False
    header: int | None = None
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced or not line.startswith("|"):
            header = None
            continue
        cells = len(gfm_cells(line))
        if header is None:
            header = cells
        elif DELIMITER_ROW.fullmatch(line.strip()):
            assert cells == header, f"a delimiter row of {cells} cells in {where}: {line}"
        else:
            assert cells == header, f"a row of {cells} cells under {header} in {where}: {line}"
            rows += 1
    assert not fenced, f"a fenced block left open in {where}"
    return rows


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def json_documents(path: Path) -> list[Any]:
    """A .json file's document, or a .jsonl file's lines."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return [json.loads(text)]
