"""The configured secrets, scrubbed from the values evalgate prints or writes: an engine may echo
what it was sent (docs/architecture.md, "Rules that hold everywhere"; RELIABILITY.md,
"Secrets").

A secret is scrubbed from a value (an outside text, a report cell, a document's string), never
from a serialised document: evalgate's own field names and labels are not secrets, even when a
key spells one. Outside text is scrubbed in full before it is cut (outside.capped): a cut first
leaves a prefix that no later scrub recognises.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import unicodedata
from collections.abc import Collection, Iterable
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


def _forms(secret: str) -> set[str]:
    """Every way `secret` may be written in a text evalgate was given (in each Unicode
    normalisation: a server may compose or decompose an accent)."""
    return {
        form
        for normal in {unicodedata.normalize(n, secret) for n in ("NFC", "NFD")} | {secret}
        for form in _encodings(normal)
    }


def _encodings(secret: str) -> set[str]:
    # bytes: a variable read from the environment may hold a lone surrogate (bytes not UTF-8)
    raw = secret.encode("utf-8", "surrogatepass")
    b64 = base64.b64encode(raw).decode("ascii")
    return {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret)[1:-1].replace("/", "\\/"),  # JSON writers that escape the slash
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(raw, safe=""),
        quote(raw),
        quote_plus(raw),
        b64,
        b64.rstrip("="),
        base64.urlsafe_b64encode(raw).decode("ascii"),
    }


def _pattern(form: str) -> str:
    """A form as a regular expression: the hex of a percent or \\u escape in either case."""
    return re.sub(
        r"(%)([0-9A-Fa-f]{2})|(\\\\u)([0-9A-Fa-f]{4})",
        lambda m: (
            (m[1] or m[3])
            + "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in m[2] or m[4])
        ),
        re.escape(form),
    )


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
_secrets: re.Pattern[str] | None = None
"""Every form of every secret, the longest first (so that a form inside another is never
matched in its place); None when there is none."""
_warned: set[str] = set()
"""Digests of the short secrets already warned of (a warning per secret per process)."""


_runs: frozenset[str] = frozenset()
"""Every run of min(8, its length) characters of every form of every secret."""


def _compile() -> None:
    global _secrets, _runs  # noqa: PLW0603  # one set for the process: every writer sees it
    forms = {form for value in _values for form in _forms(value)}
    alternatives = sorted(forms, key=lambda form: (-len(form), form))
    _secrets = re.compile("|".join(map(_pattern, alternatives))) if forms else None
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
    return value if _secrets is None else _secrets.sub(MASK, value)


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
    if _secrets is None:
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
