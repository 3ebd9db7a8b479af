"""The configured secrets, scrubbed from every text evalgate prints or writes, as the last step
before an output: an engine may echo what it was sent (docs/architecture.md, "Rules that hold
everywhere"; RELIABILITY.md, "Secrets").
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus, unquote, urlsplit

MASK = "***"
MIN_LENGTH = 8  # shorter (vLLM's placeholder EMPTY) is sent, not scrubbed: that would shred text


def _forms(secret: str) -> set[str]:
    """Every way `secret` may be written in a text evalgate was given."""
    encoded = {quote(secret, safe=""), quote(secret), quote_plus(secret)}
    b64 = base64.b64encode(secret.encode("utf-8", "surrogatepass")).decode("ascii")
    return {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret)[1:-1].replace("/", "\\/"),  # JSON writers that escape the slash
        json.dumps(secret, ensure_ascii=False)[1:-1],
        *encoded,
        b64,
        b64.rstrip("="),
        base64.urlsafe_b64encode(secret.encode("utf-8", "surrogatepass")).decode("ascii"),
    }


def _pattern(form: str) -> str:
    """A form as a regular expression: a percent escape matches in either case of hex."""
    return re.sub(
        r"%([0-9A-F])([0-9A-F])",
        lambda m: "%" + "".join(f"[{c}{c.lower()}]" if c.isalpha() else c for c in m.groups()),
        re.escape(form),
    )


def url_secrets(url: str) -> list[str]:
    """The secrets of a URL's user info, as written and decoded (a user alone is a token)."""
    netloc = urlsplit(url).netloc
    if "@" not in netloc:
        return []
    info = netloc.rpartition("@")[0]
    user, colon, password = info.partition(":")
    if not colon:
        return [info, unquote(info)]
    return [info, f"{unquote(user)}:{unquote(password)}", password, unquote(password)]


_secrets: re.Pattern[str] | None = None
"""Every form of every configured secret, the longest first (so that a form inside another is
never matched in its place); None when no secret is configured."""


def configure(keys: Iterable[str | None], urls: Iterable[str | None] = ()) -> None:
    """Make these API keys and the user info of these URLs the secrets every output is scrubbed
    of, from now on in this process."""
    global _secrets  # noqa: PLW0603  # one set for the process: every writer and thread sees it
    values = [key for key in keys if key] + [s for url in urls if url for s in url_secrets(url)]
    forms = {form for v in values if len(v) >= MIN_LENGTH for form in _forms(v)}
    alternatives = sorted(forms, key=lambda form: (-len(form), form))
    _secrets = re.compile("|".join(map(_pattern, alternatives))) if forms else None


def text(value: str) -> str:
    """`value` with every configured secret replaced by MASK."""
    return value if _secrets is None else _secrets.sub(MASK, value)


def document(value: Any) -> Any:
    """A JSON-like value with every string in it (keys included) scrubbed; other values as they
    are (a number is never a secret's place)."""
    if _secrets is None:
        return value
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {document(k): document(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [document(v) for v in value]
    return value
