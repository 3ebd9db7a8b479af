"""evalgate/engine/urls.py: the credentials in a URL (http://user:password@host/v1) go as HTTP
basic auth and never into a log: not the HTTP library's (it is handed the bare URL), not
evalgate's, whichever logger is listening.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from evalgate.engine.urls import authorization, redact_url
from evalgate.run import run_gate
from tests.conftest import (
    DOCS,
    MODEL,
    PLANTED_BASIC,
    PLANTED_KEY,
    PLANTED_RUN,
    QUICK,
    assert_nowhere,
    deadline,
    eval_client,
    run_settings,
    with_password,
)


@pytest.mark.loopback
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


@pytest.mark.loopback
def test_no_logger_at_all_shows_url_credentials(engine, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    # None: the default
    given = PLANTED_RUN | {"timeout": None, "max_attempts": None, "min_samples": 0}
    settings = run_settings(with_password(engine.url), tmp_path / "run", **given)

    with deadline(30, engine):
        outcome = run_gate(settings)

    assert outcome.exit_code == 0
    assert_nowhere(caplog.text)


# Any URL's credentials move into basic auth and out of the URL logged; a plain one is left alone.


secrets = st.text(alphabet="abcXYZ019-_.~!$&'()*+,;=%", min_size=1, max_size=12).filter(
    lambda s: "%" not in s
)


hosts = st.sampled_from(["127.0.0.1", "node0", "router.example.com", "[::1]", "[fd00::2]"])


ports = st.none() | st.integers(min_value=1, max_value=65535)


paths = st.sampled_from(["/v1", "/v1/", "", "/serve/v1", "/v1/chat/completions"])


def _url(user: str | None, password: str | None, host: str, port: int | None, path: str) -> str:
    auth = "" if user is None else user + (f":{password}" if password is not None else "") + "@"
    return f"http://{auth}{host}{'' if port is None else f':{port}'}{path}"


@QUICK
@given(secrets, secrets, hosts, ports, paths)
@pytest.mark.unit
def test_credentials_move_out_of_the_url_into_basic_auth(user, password, host, port, path):
    url = _url(user, password, host, port, path)

    bare, header = authorization(url, "a key the URL's credentials replace")

    assert bare == _url(None, None, host, port, path)
    assert header == _basic(user, password)


@QUICK
@given(hosts, ports, paths)
@pytest.mark.unit
def test_a_plain_url_is_left_alone_and_the_key_sent_as_a_bearer(host, port, path):
    url = _url(None, None, host, port, path)

    assert authorization(url, None) == (url, "Bearer EMPTY")
    assert authorization(url, "k") == (url, "Bearer k")


def _basic(user: str, password: str) -> str:
    import base64

    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@QUICK
@example("u", "p", "[::1]", 8000, "/v1")
@given(secrets, secrets, hosts, ports, paths)
@pytest.mark.unit
def test_redact_url_keeps_the_host_and_port(user, password, host, port, path):
    redacted = redact_url(_url(user, password, host, port, path))

    assert redacted == _url(None, None, host, port, path)
    assert urlsplit(redacted).port == port
