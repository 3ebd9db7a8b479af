"""evalgate/engine/urls.py: the credentials in a URL (http://user:password@host/v1) go as HTTP
basic auth and never into a log: not the HTTP library's (it is handed the bare URL), not
evalgate's, whichever logger is listening.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from evalgate.run import run_gate
from tests.conftest import (
    DOCS,
    MODEL,
    PLANTED_BASIC,
    PLANTED_KEY,
    PLANTED_RUN,
    assert_nowhere,
    deadline,
    eval_client,
    run_settings,
    with_password,
)

pytestmark = pytest.mark.loopback


def test_the_eval_client_keeps_url_credentials_out_of_every_log(engine, auth_headers, caplog):
    """The eval's own requests: the URL the HTTP library gets has no password (whatever it
    logs); the credentials go as basic auth, as before."""
    caplog.set_level(logging.DEBUG)  # every logger: aiohttp, asyncio, evalgate
    client = eval_client(with_password(engine.url), api_key=PLANTED_KEY, timeout=2, attempts=1)
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"Question: {DOCS[0].question}\nAnswer:"}],
        "max_tokens": 200,
    }

    async def ask() -> str:
        try:
            return (await client.complete(body)).text
        finally:
            await client.close()

    with deadline(10, engine):
        text = asyncio.run(ask())

    assert text.endswith("#### 18")
    assert auth_headers == [("/v1/chat/completions", PLANTED_BASIC)]
    assert_nowhere(caplog.text)


def test_no_logger_at_all_shows_url_credentials(engine, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    # None: the default
    given = PLANTED_RUN | {"timeout": None, "max_attempts": None, "min_samples": 0}
    settings = run_settings(with_password(engine.url), tmp_path / "run", **given)

    with deadline(30, engine):
        outcome = run_gate(settings)

    assert outcome.exit_code == 0
    assert_nowhere(caplog.text)
