"""What evalgate prints or writes, made safe on its way out: the configured secrets scrubbed from
every value (an engine may echo what it was sent), then outside text made safe for its output
where a template engine cannot: a terminal line, a workflow command's data, a Markdown cell, a
mermaid label, what HTML and XML cannot show (docs/architecture.md, "Rules that hold
everywhere"; RELIABILITY.md, "Secrets").

A secret is scrubbed from a value (an outside text, a report cell, a document's string), never
from a serialised document: evalgate's own field names and labels are not secrets, even when a
key spells one. Outside text is scrubbed in full before it is cut (capped): a cut first leaves a
prefix that no later scrub recognises. A document is written as its exact text minus the
secrets in its values (json_text).
"""

from __future__ import annotations

import base64
import hashlib
import html as _html
import json
import logging
import re
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from typing import Any
from urllib.parse import quote, quote_plus, unquote, urlsplit

log = logging.getLogger(__name__)

MASK = "***"
MIN_LENGTH = 4
"""A shorter secret is sent but not scrubbed: masking every `pw` or `42` would shred text."""
PLACEHOLDERS = frozenset(
    {"empty", "none", "null", "nil", "dummy", "fake", "placeholder", "test", "token", "unused"}
    | {"no-key", "nokey", "not-needed", "sk-no-key-required", "sk-dummy", "sk-fake", "sk-xxx"}
)
"""Values that stand in for a key where the engine checks none (vLLM's EMPTY), in any case:
sent, not scrubbed."""


def _normalisations(secret: str) -> set[str]:
    """`secret` as given and in NFC and NFD: a server may compose or decompose an accent."""
    return {unicodedata.normalize(n, secret) for n in ("NFC", "NFD")} | {secret}


def _encodings(secret: str) -> set[str]:
    # bytes: a variable read from the environment may hold a lone surrogate (bytes not UTF-8)
    raw = secret.encode("utf-8", "surrogatepass")
    return {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret)[1:-1].replace("/", "\\/"),  # JSON writers that escape the slash
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(raw, safe=""),
        quote(raw),
        quote_plus(raw),
        *_base64(raw),
    }


def _base64(raw: bytes) -> set[str]:
    b64 = base64.b64encode(raw).decode("ascii")
    return {b64, b64.rstrip("="), base64.urlsafe_b64encode(raw).decode("ascii")}


def _hex(digits: str) -> str:
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in digits)


def _character(char: str) -> str:
    """One character as a regular expression: as written, JSON-escaped (a writer may escape
    any character as \\uXXXX, as Go's escapes `&`, `<` and `>`; `\\/`) or percent-encoded
    (a URL library encodes the characters its own set names; `+` for a space), hex in either
    case."""
    units = char.encode("utf-16-be", "surrogatepass")
    escapes = {
        re.escape(char),
        re.escape(json.dumps(char)[1:-1]),
        "".join("\\\\u" + _hex(units[i : i + 2].hex()) for i in range(0, len(units), 2)),
        "".join("%" + _hex(f"{byte:02x}") for byte in char.encode("utf-8", "surrogatepass")),
    }
    escapes |= {"\\\\/"} if char == "/" else {"\\+"} if char == " " else set()
    return "(?:" + "|".join(sorted(escapes, key=lambda e: (-len(e), e))) + ")"


def _pattern(secret: str) -> re.Pattern[str]:
    """Where `secret` starts, in any of its ways of being written, each character escaped or
    not on its own, and in base64; the match's group 1 is the secret (a lookahead: an
    overlapping secret is found too)."""
    ways: set[str] = set()
    for normal in _normalisations(secret):
        raw = normal.encode("utf-8", "surrogatepass")
        ways |= {"".join(map(_character, normal)), *map(re.escape, _base64(raw))}
    return re.compile("(?=(" + "|".join(sorted(ways, key=lambda w: (-len(w), w))) + "))")


def url_secrets(url: str) -> list[tuple[str, str]]:
    """The secrets of a URL's user info, each as written and decoded, with what it is: the
    user, the password, and the pair (what Basic auth sends, in base64)."""
    netloc = urlsplit(url).netloc
    if "@" not in netloc:
        return []
    info = netloc.rpartition("@")[0]
    user, colon, password = info.partition(":")
    parts = [(user, "user"), (unquote(user), "user")]
    if colon:
        parts += [(password, "password"), (unquote(password), "password")]
        parts += [(info, "user info"), (f"{unquote(user)}:{unquote(password)}", "user info")]
    return [(value, role) for value, role in dict(parts).items() if value]


_values: dict[str, None] = {}
"""The secrets, in the order they were added."""
_secrets: list[re.Pattern[str]] = []
"""Each secret's pattern (`_pattern`)."""
_warned: set[str] = set()
"""Digests of the short secrets already warned of (a warning per secret per process)."""


_runs: frozenset[str] = frozenset()
"""Every run of min(8, its length) characters of every form of every secret."""


def _compile() -> None:
    global _secrets, _runs  # noqa: PLW0603  # one set for the process: every writer sees it
    # the usual ways a secret is written, for fragment's runs (the scrub finds every mix of
    # escapes: _pattern)
    forms = {form for value in _values for n in _normalisations(value) for form in _encodings(n)}
    _secrets = [_pattern(value) for value in _values]
    _runs = frozenset(
        form[i : i + min(8, len(form))] for form in forms for i in range(max(1, len(form) - 7))
    )


def _add(secret: str, what: str) -> bool:
    if secret.casefold() in PLACEHOLDERS or secret in _values:
        return False
    if len(secret) < MIN_LENGTH:
        digest = hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()
        if digest not in _warned:
            _warned.add(digest)
            log.warning(
                "%s is shorter than %d characters: it is sent, but not scrubbed from what "
                "evalgate prints or writes (so short a text would mask ordinary words); use a "
                "longer one",
                what,
                MIN_LENGTH,
            )
        return False
    _values[secret] = None
    return True


def add(secret: str | None, what: str = "a secret") -> None:
    """Scrub `secret` from every value from now on in this process; `what` names it in the
    warning for one too short to scrub (the value itself is never shown)."""
    if secret and _add(secret, what):
        _compile()


def add_url(url: str | None, what: str = "a URL") -> None:
    """Scrub the user info of `url` (user and password) from now on in this process: the one
    call for any URL evalgate is given with credentials in it."""
    if url and any([_add(part, f"the {role} of {what}") for part, role in url_secrets(url)]):
        _compile()


def configure(keys: Iterable[str | None], urls: Iterable[str | None] = ()) -> None:
    """Make these API keys and the user info of these URLs the secrets (replacing those set
    before)."""
    _values.clear()
    for key in keys:
        add(key, "the API key")
    for url in urls:
        add_url(url, "--base-url or --worker-url")
    _compile()


def text(value: str) -> str:
    """`value` with every secret replaced by MASK."""
    if not _secrets:
        return value
    spans = sorted(
        (match.start(1), match.end(1))
        for secret in _secrets
        for match in secret.finditer(value)
        if match.end(1) > match.start(1)
    )
    shown, end = [], 0
    for start, stop in spans:  # overlapping secrets are masked as one
        if start >= end:
            shown += [value[end:start], MASK]
        end = max(end, stop)
    return "".join([*shown, value[end:]])


def fragment(value: str) -> str:
    """A text taken out of an outside text (what a filter extracted from an answer, scored as
    sent): scrubbed, or MASK whole when it holds a run of min(8, its length) characters of a
    secret, a piece no scrub of it can recognise."""
    value = text(value)
    return MASK if any(run in value for run in _runs) else value


def _plain_text(value: Any) -> bool:
    """A string, or a flat list or object of strings (a folder's files, a dataset's hashes)."""
    items = value.values() if isinstance(value, dict) else value
    if isinstance(value, str):
        return True
    return isinstance(value, dict | list | tuple) and all(
        item is None or isinstance(item, str) for item in items
    )


def values(document: Any, own: Collection[str] = ()) -> Any:
    """A JSON-like document with each string value scrubbed; its keys, and the text under a key
    in `own` (evalgate's own labels, hashes and paths: a string, or a flat list or object of
    them), as they are; other values as they are (a number is never a secret's place)."""
    if not _secrets:
        return document
    if isinstance(document, str):
        return text(document)
    if isinstance(document, dict):
        return {
            k: v if k in own and _plain_text(v) else values(v, own) for k, v in document.items()
        }
    if isinstance(document, list | tuple):
        return [values(v, own) for v in document]
    return document


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
files of a run. Their text is not scrubbed (values): a key that spells `pass` or `evalgate`
must not unmake the evidence. A path the user gave, a model or a threshold's match (which names
a model) may hold anything, and is scrubbed."""


def capped(value: str, limit: int) -> str:
    """`value` scrubbed of secrets in full, then its first `limit` characters and how long it
    was: the one path by which outside text is shortened (a cut before the scrub would leave
    the part of a secret before it)."""
    value = text(value)
    return value if len(value) <= limit else f"{value[:limit]}… ({len(value):,} characters)"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(
    document: Any, *, indent: int | None = None, own: Collection[str] = OWN_FIELDS
) -> str:
    """A document's JSON (the evidence, a report): the exact text minus secrets (in its values,
    OWN_FIELDS aside, or `own`). A lone surrogate (bytes of a variable or a name that are not
    UTF-8; UTF-8 cannot hold one, nor can evalgate's reader) is written U+FFFD, as a decoder
    replaces what is not text, so the file is always written and read back."""
    document = values(document, own)

    def dumped(indent: int | None) -> str:
        written = json.dumps(
            document, indent=indent, ensure_ascii=False, default=lambda v: text(str(v))
        )
        return _LONE_SURROGATE.sub("\ufffd", written)

    if not indent:
        return dumped(indent)
    import msgspec  # here: `evalgate --help` imports this module, and needs no msgspec

    try:  # json's C encoder, indented by msgspec: json indents in Python, 3x slower (a history)
        return msgspec.json.format(dumped(None), indent=indent)
    except msgspec.DecodeError:  # NaN or Infinity, which json writes and msgspec does not read
        return dumped(indent)


# Outside text made safe for its output, its secrets scrubbed first (text), in full before any
# cut: evalgate.templates applies these once to each value; escaping HTML and XML is jinja2's.

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


def terminal(raw: object) -> str:
    """One line of outside text for stdout or stderr: ANSI sequences removed; newlines, control
    and bidirectional characters escaped (\\n, \\x07, \\u202e); a leading `::` and any `##[`
    broken, so no line evalgate did not write is a GitHub workflow command; at most
    TERMINAL_CHARS characters."""
    value = text(str(raw))
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
    text = json.dumps(values(document, OWN_FIELDS), indent=2, default=str)
    return text.replace("\x7f", "\\u007f").replace("##[", "##\\u005b")


def workflow_data(raw: object) -> str:
    """A GitHub workflow command's message: `%`, CR and LF escaped as GitHub documents."""
    value = _ANSI.sub("", text(str(raw)))
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


def xml(raw: object) -> str:
    """Text for an XML 1.0 document (JUnit): ANSI sequences removed, and the characters XML 1.0
    forbids (NUL and most control characters, lone surrogates) and bidirectional overrides
    escaped."""
    value = text(str(raw))
    return value if value.isprintable() else _visible(value, _IN_XML)


def html(raw: object) -> str:
    """Text (or a number) for an HTML page, whose template escapes it (evalgate.templates):
    ANSI sequences removed, control and bidirectional characters escaped."""
    value = text(str(raw))
    return value if value.isprintable() else _visible(value, _IN_HTML)
