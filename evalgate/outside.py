r"""Outside text on its way out: made safe once for each output it goes to, its secrets scrubbed
first, in full before any cut (docs/architecture.md, "Rules that hold everywhere").
"""

from __future__ import annotations

import html as _html
import json
import re
from collections.abc import Collection, Sequence
from typing import Any

from evalgate import scrub

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
_LONE_SURROGATE = re.compile(f"[{_SURROGATES}]")
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


OWN_FIELDS = frozenset(
    {"schema", "evalgate_version", "lm_eval_version", "run_id", "started_at", "finished_at"}
    | {"status", "stage", "outcome", "verdict", "decision", "certain", "standing", "change"}
    | {"api", "answer_field", "budget_policy", "mode", "source", "type", "exit_code"}
    | {"task", "task_version", "metric", "filter", "field", "test", "rule"}
    | {"prompt_sha256", "task_sha256", "dataset_sha256", "sha256"}
    | {"files", "result"}
)
"""The fields of the JSON evalgate writes that hold its own words, never outside text: schema
ids and versions, labels, the task's names, hashes (the journal's keys), the names it gave the
files of a run. Their text is not scrubbed (scrub.values): a key that spells `pass` or
`evalgate` must not unmake the evidence. A path the user gave, a model or a threshold's match
(which names a model) may hold anything, and is scrubbed."""


def capped(text: str, limit: int) -> str:
    """`text` scrubbed of secrets in full, then its first `limit` characters and how long it
    was: the one path by which outside text is shortened (a cut before the scrub would leave
    the part of a secret before it)."""
    text = scrub.text(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


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
    """Text (or a number) made safe for HTML content and attribute values."""
    value = scrub.text(str(text))
    return _html.escape(value if value.isprintable() else _visible(value, _IN_HTML), quote=True)


def json_text(
    document: Any, *, indent: int | None = None, own: Collection[str] = OWN_FIELDS
) -> str:
    """An evidence document's JSON: the exact text minus secrets (in its values, OWN_FIELDS
    aside, or `own`). A lone surrogate (bytes of a
    variable or a name that are not UTF-8; UTF-8 cannot hold one, nor can evalgate's reader)
    is written U+FFFD, as a decoder replaces what is not text, so the file is always written
    and read back."""
    document = scrub.values(document, own)

    def dumped(indent: int | None) -> str:
        text = json.dumps(
            document, indent=indent, ensure_ascii=False, default=lambda v: scrub.text(str(v))
        )
        return _LONE_SURROGATE.sub("\ufffd", text)

    if not indent:
        return dumped(indent)
    import msgspec  # here: `evalgate --help` imports this module, and needs no msgspec

    try:  # json's C encoder, indented by msgspec: json indents in Python, 3x slower (a history)
        return msgspec.json.format(dumped(None), indent=indent)
    except msgspec.DecodeError:  # NaN or Infinity, which json writes and msgspec does not read
        return dumped(indent)
