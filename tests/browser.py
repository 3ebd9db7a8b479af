"""The browser tier's eyes: headless Chromium opens a page and reports what a person would see.

Chromium (Debian's `chromium` package; scripts/test installs it where it can) is driven over
the DevTools protocol on a WebSocket (aiohttp's client, already one of evalgate's
dependencies). `look` loads a file, collects every console message, uncaught exception, log
entry and network request the page makes, evaluates the given JavaScript probes in order (each
one's value is returned; a probe may click and then read), and saves a screenshot of the whole
page.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import html.parser
import itertools
import json
import queue
import shutil
import subprocess
import tempfile
import threading
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
START_TIMEOUT_S = 60.0
PAGE_TIMEOUT_S = 60.0


URL_ATTRIBUTES = frozenset(
    {"src", "href", "srcset", "action", "formaction", "poster", "data", "xlink:href", "background"}
)


FETCHING = ("url(", "@import", "://", "fetch(", "XMLHttpRequest", "import(", "WebSocket")
"""What, in a style sheet, a script or an attribute's value, could reach for a resource."""


class _References(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.inside: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.inside = tag if tag in ("style", "script") else None
        for name, value in attrs:
            active = name == "style" or name.startswith("on")  # CSS or script
            if name in URL_ATTRIBUTES or (active and any(m in (value or "") for m in FETCHING)):
                self.found.append(f"<{tag} {name}={value!r}>")
        if tag == "link" or (tag == "meta" and ("http-equiv", "refresh") in attrs):
            self.found.append(f"<{tag} {attrs}>")

    def handle_endtag(self, tag: str) -> None:
        self.inside = None

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.found += [f"<{self.inside}> holds {m}" for m in FETCHING if m in data]


def network_references(page: str) -> list[str]:
    """Everything in a page's source that could fetch a resource: URL-bearing attributes,
    <link>, a meta refresh, and url(), @import, a scheme:// or a fetching call in a style
    sheet, a script or an attribute (text shown on the page fetches nothing)."""
    parser = _References()
    parser.feed(page)
    return parser.found


def find_chromium() -> str | None:
    """The Chromium executable on PATH, if any."""
    return next((found for name in NAMES if (found := shutil.which(name))), None)


@dataclass
class Seen:
    """What the page did and showed."""

    values: dict[str, Any]
    """Each probe's result, by name."""
    errors: list[str] = field(default_factory=list)
    """Console errors and warnings, uncaught exceptions, error-level log entries."""
    requests: list[str] = field(default_factory=list)
    """Every URL the page asked for, other than the page itself."""
    screenshot: Path | None = None


class _Protocol:
    """Commands out, answers matched by id, events kept in order."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()

    async def pump(self) -> None:
        async for message in self.ws:
            data = json.loads(message.data)
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
            else:
                self.events.append(data)
                self.arrived.set()

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self.ids)
        answer = self.pending[number] = asyncio.get_running_loop().create_future()
        await self.ws.send_str(json.dumps({"id": number, "method": method, "params": params}))
        reply = await answer
        if "error" in reply:
            raise RuntimeError(f"DevTools {method} failed: {reply['error']}")
        return dict(reply.get("result", {}))

    async def wait_for(self, method: str) -> dict[str, Any]:
        while True:
            for event in self.events:
                if event.get("method") == method:
                    return event
            self.arrived.clear()
            await self.arrived.wait()


def _errors(events: list[dict[str, Any]]) -> list[str]:
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        noisy = ("error", "warning", "assert")
        if method == "Runtime.consoleAPICalled" and params["type"] in noisy:
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            found.append(f"console.{params['type']}: {text}")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            found.append(f"exception: {details.get('exception', {}).get('description', details)}")
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            found.append(f"log {params['entry']['level']}: {params['entry']['text']}")
    return found


async def _drive(
    socket: str, url: str, probes: Mapping[str, str], screenshot: Path | None, size: tuple[int, int]
) -> Seen:
    width, max_height = size
    async with aiohttp.ClientSession() as session, session.ws_connect(socket, max_msg_size=0) as ws:
        cdp = _Protocol(ws)
        pump = asyncio.create_task(cdp.pump())
        try:
            for domain in ("Runtime", "Log", "Network", "Page"):
                await cdp.send(f"{domain}.enable")
            await cdp.send(
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=900,
                deviceScaleFactor=1,
                mobile=False,
            )
            await cdp.send("Page.navigate", url=url)
            await cdp.wait_for("Page.loadEventFired")
            values = {}
            for name, expression in probes.items():
                answer = await cdp.send(
                    "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
                )
                if "exceptionDetails" in answer:
                    raise AssertionError(f"probe {name} threw: {answer['exceptionDetails']}")
                values[name] = answer["result"].get("value")
            seen = Seen(values)
            if screenshot is not None:
                content = (await cdp.send("Page.getLayoutMetrics"))["cssContentSize"]
                height = min(content["height"], max_height)
                shot = await cdp.send(
                    "Page.captureScreenshot",
                    format="png",
                    captureBeyondViewport=True,
                    clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
                )
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
                seen.screenshot = screenshot
            seen.errors = _errors(cdp.events)
            seen.requests = [
                e["params"]["request"]["url"]
                for e in cdp.events
                if e.get("method") == "Network.requestWillBeSent"
                and e["params"]["request"]["url"] != url
            ]
            return seen
        finally:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump


def _listening(process: subprocess.Popen[str]) -> str:
    """The DevTools address Chromium prints on stderr once it is ready (stderr is drained)."""
    lines: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=drain, daemon=True).start()
    seen = []
    while True:
        try:
            line = lines.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"Chromium did not start in {START_TIMEOUT_S} s") from None
        if line is None:
            raise AssertionError("Chromium exited before listening:\n" + "".join(seen[-20:]))
        seen.append(line)
        if "DevTools listening on ws://" in line:
            return line.split("DevTools listening on ")[1].strip()


def look(
    chromium: str,
    page: Path,
    probes: Mapping[str, str],
    *,
    screenshot: Path | None = None,
    width: int = 1280,
    max_height: int = 20000,
) -> Seen:
    """Open `page` in a fresh headless Chromium and report what it did and showed; the
    screenshot is of the whole page, down to `max_height` pixels."""
    # Chromium's helper processes can still write to the profile as it is removed: a leftover
    # scratch folder is not what any test checks.
    with tempfile.TemporaryDirectory(
        prefix="evalgate-chromium-", ignore_cleanup_errors=True
    ) as profile:
        process = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",  # containers and root: the page is evalgate's own file
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            browser = _listening(process)
            port = browser.split("://")[1].split("/")[0]
            with urllib.request.urlopen(f"http://{port}/json/list", timeout=10) as answer:
                targets = json.load(answer)
            [target] = [t for t in targets if t["type"] == "page"]
            url = page.resolve().as_uri()
            return asyncio.run(
                asyncio.wait_for(
                    _drive(
                        target["webSocketDebuggerUrl"], url, probes, screenshot, (width, max_height)
                    ),
                    PAGE_TIMEOUT_S,
                )
            )
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
