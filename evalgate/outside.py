r"""Outside text on its way out, made safe for its output where a template engine cannot: a
terminal line (control characters, line ends, GitHub's workflow commands), a workflow command's
data, a Markdown cell (its pipes, code spans, emphasis), a mermaid label, the characters an
HTML page or XML 1.0 cannot show. Its secrets are scrubbed first, in full before any cut
(evalgate.scrub). evalgate.templates applies these once to each value of an output; escaping
HTML and XML is the template engine's (docs/architecture.md, "Rules that hold everywhere").
"""

from __future__ import annotations

import html as _html
import json
import re
from collections.abc import Sequence
from typing import Any

from evalgate import scrub
from evalgate.scrub import OWN_FIELDS, capped

TERMINAL_CHARS = 2000
"""The most of one outside text (a whole message, a cell) shown on a line."""
LISTED = 5
"""Items of an outside list (a /v1/models answer) quoted in a message."""

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erasing
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]"  # the two- and three-character escapes
    r"|\x9b[0-?]*[ -/]*[@-~]"  # CSI as one C1 character
)
_CONTROLS = "\x00-\x1f\x7f-\x9f"
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # can reorder what a reader sees
_SEPARATORS = "\u2028\u2029"
_SURROGATES = "\ud800-\udfff"  # a lone one cannot be written as UTF-8
# str.isprintable() is False for each of these (the ASCII space is the only white space it
# allows): a printable text has nothing to remove or escape.
_UNPRINTABLE = re.compile(f"[{_CONTROLS}{_BIDI}{_SEPARATORS}{_SURROGATES}]")
_IN_HTML = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI}{_SURROGATES}]")
_IN_XML = re.compile(f"[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]|[{_BIDI}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# GitHub's runner reads `::command::` at the start of a line (after white space) and the legacy
# `##[command]` anywhere in one.
_LEADING_COMMAND = re.compile(r"^(\s*):(?=:)")
# cells, code, emphasis, links, math; `_` is left (names are full of it, and inside a word it
# is no emphasis)
_MARKDOWN = re.compile(r"[\\`*\[\]|$]")
_MERMAID = re.compile(r"[^\w .,:=+\-/()@']")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def _visible(text: str, unprintable: re.Pattern[str] = _UNPRINTABLE) -> str:
    """ANSI sequences removed; the `unprintable` characters (by default control,
    bidirectional and lone surrogate characters) escaped."""
    return unprintable.sub(_escape, _ANSI.sub("", text))


def listed(items: Sequence[object], shown: int = LISTED) -> str:
    """``['a', 'b']``, or the first `shown` items and how many more."""
    head = ", ".join(repr(capped(str(item), 100)) for item in items[:shown])
    more = f" and {len(items) - shown:,} more" if len(items) > shown else ""
    return f"[{head}]{more}"


def terminal(text: object) -> str:
    """One line of outside text for stdout or stderr: ANSI sequences removed; newlines, control
    and bidirectional characters escaped (\\n, \\x07, \\u202e); a leading `::` and any `##[`
    broken, so no line evalgate did not write is a GitHub workflow command; at most
    TERMINAL_CHARS characters."""
    value = scrub.text(str(text))
    if value.isprintable() and "##[" not in value and not value.lstrip(" ").startswith("::"):
        return capped(value, TERMINAL_CHARS)
    value = _LEADING_COMMAND.sub(r"\1\\x3a", _visible(value))
    return capped(value.replace("##[", "##\\x5b"), TERMINAL_CHARS)


def terminal_block(text: str) -> str:
    """Several lines of outside text (a traceback): each line made safe as terminal() makes one."""
    return "\n".join(terminal(line) for line in text.splitlines())


def terminal_json(document: Any) -> str:
    """A JSON document for stdout: its exact text minus secrets (in its values, OWN_FIELDS
    aside), in ASCII. DEL and ``##[`` can only stand inside a string there, so escaping them
    keeps the text what it was."""
    text = json.dumps(scrub.values(document, OWN_FIELDS), indent=2, default=str)
    return text.replace("\x7f", "\\u007f").replace("##[", "##\\u005b")


def workflow_data(text: object) -> str:
    """A GitHub workflow command's message: `%`, CR and LF escaped as GitHub documents."""
    value = _ANSI.sub("", scrub.text(str(text)))
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return capped(_UNPRINTABLE.sub(_escape, value).replace("##[", "##\\x5b"), TERMINAL_CHARS)


def workflow_property(text: object) -> str:
    """A GitHub workflow command's property value (file, title): also `:` and `,` escaped."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


def markdown(text: object) -> str:
    """A Markdown table cell or line of text: one line, ``\\ ` * [ ] | $`` backslash-escaped and
    HTML written as entities, so a row keeps its cells."""
    return _MARKDOWN.sub(r"\\\g<0>", _html.escape(terminal(text), quote=False))


def markdown_code(text: object) -> str:
    """Inline code (outside a table): fenced by more backticks than the text holds."""
    value = terminal(text)
    fence = "`" * (max(map(len, re.findall("`+", value)), default=0) + 1)
    pad = " " if value[:1] in ("`", " ") or value[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def mermaid(text: object) -> str:
    """A quoted mermaid label: one line of letters, digits and plain punctuation, the rest `?`
    (mermaid reads a `%%{init: ...}%%` directive anywhere in a chart, and `#quot;` entities)."""
    return '"' + _MERMAID.sub("?", terminal(text).replace('"', "'")) + '"'


def xml(text: object) -> str:
    """Text for an XML 1.0 document (JUnit): ANSI sequences removed, and the characters XML 1.0
    forbids (NUL and most control characters, lone surrogates) and bidirectional overrides
    escaped."""
    value = scrub.text(str(text))
    return value if value.isprintable() else _visible(value, _IN_XML)


def html(text: object) -> str:
    """Text (or a number) for an HTML page, whose template escapes it (evalgate.templates):
    ANSI sequences removed, control and bidirectional characters escaped."""
    value = scrub.text(str(text))
    return value if value.isprintable() else _visible(value, _IN_HTML)
