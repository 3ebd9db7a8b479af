"""Watching the workers behind a router while the eval runs.

A router's socket stays alive when a worker's node vanishes, so the eval would wait forever:
each worker's host is polled, and one silent for `limit` seconds ends the eval naming it. The
cases: RELIABILITY.md, "The network".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

import aiohttp

from evalgate.engine.http import FAILURES, exchange, open_session
from evalgate.engine.urls import Network, api_root, credentials, redact_url
from evalgate.errors import HostSilent, TimedOut, WorkerLost

log = logging.getLogger(__name__)
T = TypeVar("T")


class WorkerWatch:
    """Polls the workers; `guard` ends a request in flight when one of them is lost."""

    def __init__(
        self,
        urls: Sequence[str],
        api_key: str | None,
        *,
        network: Network,
        deadline: float,
    ) -> None:
        self.workers = [credentials(api_root(url), api_key) for url in urls]
        self.network = network
        self.deadline = deadline
        """Seconds one poll may take (--discovery-timeout), at most the silence left."""
        self.interval = network.keepalive_interval
        self.limit = network.silence_limit
        self.lost: str | None = None
        self._gone = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    def start(self) -> None:
        """Start polling (inside the eval's event loop)."""
        if self._task is None and self.workers:
            self._session = open_session(self.network, fresh=True)
            self._task = asyncio.ensure_future(self._watch(self._session))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._session is not None:
            await self._session.close()

    async def _answers(self, session: aiohttp.ClientSession, url: str, **kw: Any) -> bool:
        """Is the worker's host there? Its request left on a new connection."""
        connected: list[bool] = []

        async def status(response: aiohttp.ClientResponse) -> int:
            return response.status

        try:
            await exchange(
                session,
                "GET",
                f"{url}/models",
                read=status,
                on_sent=lambda: connected.append(True),
                network=self.network,
                **kw,
            )
        except FAILURES as exc:
            log.info("worker %s did not answer /v1/models: %s", redact_url(url), exc)
            # silence is no connection in time; a refusal or a reset is the host answering
            return bool(connected) or not isinstance(exc, HostSilent | TimedOut)
        return True

    async def _silent_for(
        self, session: aiohttp.ClientSession, url: str, headers: dict[str, str]
    ) -> str:
        """Poll one worker until it has answered nothing for `limit` seconds; what it was."""
        loop = asyncio.get_running_loop()
        last = loop.time()
        while (left := last + self.limit - loop.time()) > 0:
            deadline = min(self.deadline, left)
            if await self._answers(session, url, deadline=deadline, headers=headers):
                last = loop.time()
            await asyncio.sleep(max(0.0, min(self.interval, last + self.limit - loop.time())))
        return redact_url(url)

    async def _watch(self, session: aiohttp.ClientSession) -> None:
        polls = [
            asyncio.ensure_future(self._silent_for(session, url, headers))
            for url, headers in self.workers
        ]
        try:
            done, _ = await asyncio.wait(polls, return_when=asyncio.FIRST_COMPLETED)
            self.lost = next(iter(done)).result()
            self._gone.set()
        finally:
            for poll in polls:
                poll.cancel()
            await asyncio.gather(*polls, return_exceptions=True)

    async def guard(self, work: Awaitable[T]) -> T:
        """`work`, unless a worker is lost first (then WorkerLost)."""
        if self._task is None:
            return await work
        task = asyncio.ensure_future(work)
        gone = asyncio.ensure_future(self._gone.wait())
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if task.cancelled() and self._gone.is_set():
            raise WorkerLost(
                f"Worker {self.lost} stopped answering: no connection to it for {self.limit:g} s "
                f"(tried every {self.interval:g} s), so the requests waiting on it behind the "
                "router would never end; the eval stopped. Check that worker's node and its "
                "network."
            )
        return task.result()
