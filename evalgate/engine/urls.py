"""An engine's URLs: the API and server roots, and the credentials inside a URL
(http://user:password@host/v1), kept out of every log and artifact; and what every connection
to it is given (`Network`: the settings' network group, as the engine reads it).

The HTTP library logs the URLs it requests, so a URL with credentials is split before any
client sees it: the bare URL goes to the client, the credentials go as HTTP basic auth in the
one Authorization header built here.
"""

from __future__ import annotations

from typing import Literal, Protocol
from urllib.parse import unquote, urlsplit, urlunsplit


def redact_url(url: str) -> str:
    """The URL without user:password, for logs, messages and artifacts."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]  # keeps an IPv6 host's brackets and the port
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def authorization(url: str, api_key: str | None) -> tuple[str, str]:
    """The URL without user:password, and the Authorization header every generation request
    carries: HTTP basic auth from the URL's credentials, else the API key as a bearer token
    ("EMPTY" without one, as OpenAI clients send it)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, f"Bearer {api_key or 'EMPTY'}"
    import base64

    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    return redact_url(url), "Basic " + base64.b64encode(pair.encode()).decode("ascii")


def credentials(url: str, api_key: str | None) -> tuple[str, dict[str, str]]:
    """For a side door (/v1/models, /tokenize, ...): the URL without user:password, and the
    Authorization header `authorization` builds, none when there is neither a key nor a
    password to send."""
    bare, header = authorization(url, api_key)
    return bare, {"Authorization": header} if bare != url or api_key else {}


def origin(url: str) -> str:
    """scheme://host:port of `url`, which names a server in a message."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def api_root(url: str) -> str:
    """The /v1 base, with no trailing slash (the generation paths go under it)."""
    return url.rstrip("/").removesuffix("/chat/completions").removesuffix("/completions")


def server_root(url: str) -> str:
    """The server's root, where /tokenize, /version and /health live."""
    return api_root(url).removesuffix("/v1")


class Network(Protocol):
    """How every request is sent and what every connection is given: the settings' network
    group (settings/endpoint.py's NetworkSettings, where each value and its default are stated)
    as the engine reads it."""

    @property
    def ready_timeout(self) -> float: ...
    @property
    def timeout(self) -> float: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def retry_wait_min(self) -> float: ...
    @property
    def retry_wait_max(self) -> float: ...
    @property
    def discovery_timeout(self) -> float: ...
    @property
    def connect_timeout(self) -> float: ...
    @property
    def keepalive_idle(self) -> float: ...
    @property
    def keepalive_interval(self) -> float: ...
    @property
    def keepalive_probes(self) -> int: ...
    @property
    def max_response_bytes(self) -> int: ...
    @property
    def silence_limit(self) -> float:
        """Seconds a connection may go unanswered before the kernel drops it."""


class Endpoint(Protocol):
    """Where the engine is: the settings' endpoint group (settings/endpoint.py's
    EndpointSettings) as the engine reads it."""

    @property
    def base_url(self) -> str | None: ...
    @property
    def api(self) -> Literal["chat", "completions"]: ...
    @property
    def worker_urls(self) -> list[str]: ...
    @property
    def network(self) -> Network: ...
    @property
    def served_model(self) -> str | None:
        """The name requests carry."""

    @property
    def key(self) -> str | None:
        """The API key's value."""
