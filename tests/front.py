"""A server in front of an engine: chosen paths answered its own way, the rest forwarded.

`Front(upstream, answers)` listens on 127.0.0.1 (or `host`); a request whose path is in
`answers` is answered by that function (hostile shapes: trickles, comment streams, gzip bombs,
implausible numbers), any other is sent on to `upstream` as it came and its answer sent back
(a router's job, with no timeout of its own, as routers wait on their workers; it serves as a
forwarding HTTP proxy too). `rewrite` changes a forwarded JSON answer before it goes back.

    with FakeEngine() as engine, Front(engine.root_url, {"/tokenize": trickle(b"{}")}) as front:
        ...  # evalgate against front.url
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.conftest import deadline
from tests.fakeengine import CHAT_PATH, Served

Answer = Callable[["Handler"], None]
Rewrite = Callable[[str, Any], Any]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    body: bytes = b""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length) if length else b""
        path = urlsplit(self.path).path
        self.server.front.seen.append(path)
        answer = self.server.front.answers.get(path)
        try:
            if answer is not None:
                answer(self)
            else:
                self.forward(path)
        except OSError:
            self.close_connection = True

    @property
    def json_body(self) -> Any:
        return json.loads(self.body or b"null")

    @property
    def stopped(self) -> threading.Event:
        return self.server.front.stopped

    def send(self, status: int, data: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def forward(self, path: str) -> None:
        upstream = urlsplit(self.server.front.upstream)
        connection = http.client.HTTPConnection(upstream.hostname or "", upstream.port)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            connection.request(self.command, self.path, body=self.body or None, headers=headers)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        kind = response.getheader("Content-Type") or "application/json"
        rewrite = self.server.front.rewrite
        if rewrite is not None and kind.startswith("application/json"):
            data = json.dumps(rewrite(path, json.loads(data))).encode()
        self.send(response.status, data, kind)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    front: Front


class Front(Served):
    """A running front door; use as a context manager."""

    def __init__(
        self,
        upstream: str,
        answers: dict[str, Answer] | None = None,
        *,
        rewrite: Rewrite | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.upstream = upstream
        self.answers = dict(answers or {})
        self.rewrite = rewrite
        self.stopped = threading.Event()
        self.seen: list[str] = []
        """The paths asked, in order (a proxy's requests name the whole URL: its path)."""
        self._server = _Server((host, 0), Handler)
        self._server.front = self
        self.host = host
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def stop(self) -> None:
        self.stopped.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Front:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- hostile answers ------------------------------------------------------------------------------


def trickle(data: bytes, every: float = 1.0) -> Answer:
    """200 with `data`, one byte every `every` seconds (Content-Length says the whole)."""

    def answer(handler: Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        for byte in data:
            if handler.stopped.wait(every):
                return
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()

    return answer


def comments(every: float = 1.0) -> Answer:
    """A 200 event stream that sends an SSE comment every `every` seconds and never an event."""

    def answer(handler: Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        while not handler.stopped.wait(every):
            handler.wfile.write(b"8\r\n: ping\n\n\r\n")  # one chunk: 8 bytes
            handler.wfile.flush()

    return answer


def gzip_bomb(prefix: bytes, size: int, suffix: bytes, encoding: str = "gzip") -> bytes:
    """`prefix`, `size` bytes of "a", `suffix`, compressed (about a thousandth of it) in the
    container `encoding` names: gzip's, or zlib's for deflate."""
    packer = zlib.compressobj(9, zlib.DEFLATED, {"gzip": 31, "deflate": 15}[encoding])
    parts = [packer.compress(prefix)]
    block = b"a" * (1 << 20)
    for _ in range(size // len(block)):
        parts.append(packer.compress(block))
    parts += [packer.compress(suffix), packer.flush()]
    return b"".join(parts)


def gzipped(data: bytes, encoding: str = "gzip") -> Answer:
    """200 with `data`, already compressed, said so in Content-Encoding (`encoding`)."""

    def answer(handler: Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Encoding", encoding)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        with contextlib.suppress(OSError):
            handler.wfile.write(data)

    return answer


def json_answer(status: int, obj: Any) -> Answer:
    def answer(handler: Handler) -> None:
        handler.send(status, json.dumps(obj).encode())

    return answer


# -- evalgate behind a front: the settings and the clock of the tests that drive it --------------

FRONT_CONTEXT = {"command": "context", "json": "-", "limit": 5}
"""`evalgate context` as JSON on stdout."""


FRONT_RUN = {"limit": 5, "num_concurrent": 2, "min_samples": 0, "max_attempts": 2}
"""`evalgate run`: 5 questions, two attempts each."""


def streamed_only(answer):
    """`answer` for the probe (a streamed request); the eval's requests go on to the engine."""

    def choose(handler: Handler) -> None:
        if handler.json_body.get("stream"):
            answer(handler)
        else:
            handler.forward(CHAT_PATH)

    return choose


def timed(cli, front: Front, *args: str, within: float = 60):
    """`cli(*args)` stopped with the front past `within` seconds: (its result, seconds taken)."""
    started = time.monotonic()
    with deadline(within, front):  # type: ignore[arg-type]  # stops the front on overrun
        result = cli(*args)
    return result, time.monotonic() - started


def only(path: str, change):
    """A rewrite of the forwarded JSON answers of `path`."""
    return lambda seen, doc: change(doc) if seen == path else doc
