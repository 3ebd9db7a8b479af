"""evalgate.scrub: which forms of a configured secret are found, and what is left alone."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from evalgate import scrub
from evalgate.settings.environment import credentials_environment, variables
from evalgate.settings.values import Settings, credentials

KEY = "sk-evalgate-PLANTED/+123"  # a slash and a plus: URL-encoding and JSON writers differ
PAIR = "gate:pw-PLANTED-456"


@pytest.fixture(autouse=True)
def no_secrets() -> Iterator[None]:
    scrub.configure([])
    yield
    scrub.configure([])


FORMS = [
    # (case, text holding the key)
    ("as written", f"Incorrect API key provided: {KEY}."),
    ("JSON-escaped, slash escaped too", json.dumps({"key": KEY}).replace("/", "\\/")),
    ("URL-encoded", f"https://h/?key={quote(KEY, safe='')}"),
    ("URL-encoded, lower-case hex", f"key={quote(KEY, safe='').replace('%2F', '%2f')}"),
    ("base64", base64.b64encode(KEY.encode()).decode()),
    ("as a bearer token", f"Authorization: Bearer {KEY}"),
]


@pytest.mark.parametrize("text", [c[1] for c in FORMS], ids=[c[0] for c in FORMS])
def test_every_form_of_the_key_is_scrubbed(text):
    scrub.configure([KEY])

    shown = scrub.text(text)

    assert "PLANTED" not in shown and "UExBTlRFR" not in shown
    assert "***" in shown


def test_url_user_info_is_scrubbed_as_written_decoded_and_as_basic_auth():
    url = "http://gate:pw%2FPLANTED-456@router:8000/v1"
    scrub.configure([], [url])
    basic = base64.b64encode(b"gate:pw/PLANTED-456").decode()

    shown = scrub.text(f"{url} Basic {basic} pw/PLANTED-456 gate:pw/PLANTED-456")

    assert shown == "http://***@router:8000/v1 Basic *** *** ***"


def test_a_user_alone_is_a_token_and_is_scrubbed():
    scrub.configure([], ["http://tok-PLANTED-789@router:8000/v1"])

    assert scrub.text("GET http://tok-PLANTED-789@router") == "GET http://***@router"


@pytest.mark.parametrize("key", ["EMPTY", "none", "sk-1234", ""])
def test_a_placeholder_key_is_not_scrubbed(key):
    scrub.configure([key])

    assert scrub.text("EMPTY none sk-1234 answers") == "EMPTY none sk-1234 answers"


def test_documents_are_scrubbed_in_every_string_and_nowhere_else():
    scrub.configure([KEY])
    document = {"a": [KEY, {KEY: 1}], "n": 12345678, "t": (f"x{KEY}",), "b": None}

    assert scrub.document(document) == {
        "a": ["***", {"***": 1}],
        "n": 12345678,
        "t": ["x***"],
        "b": None,
    }


def test_with_no_secret_configured_nothing_changes():
    document = {"a": ["x"]}

    assert scrub.document(document) is document
    assert scrub.text(KEY) == KEY


def test_a_longer_secret_is_masked_whole_before_a_shorter_one_inside_it():
    scrub.configure([], ["http://gate:pw-PLANTED-456@router/v1"])

    assert scrub.text(f"{PAIR} pw-PLANTED-456") == "*** ***"


def test_the_settings_secrets_are_its_key_and_every_urls_user_info():
    settings = Settings(
        api_key=KEY,
        base_url="http://gate:pw-PLANTED-456@router:8000/v1",
        worker_urls=["http://w:wk-PLANTED-789@decode:8200/v1"],
    )
    scrub.configure(*credentials(settings))

    assert scrub.text(f"{KEY} {PAIR} wk-PLANTED-789") == "*** *** ***"


def test_the_credential_variables_are_the_ones_settings_reads():
    """verify and compare read these without the Settings model: the same names."""
    for field in ("api_key", "base_url", "worker_urls"):
        alias = Settings.model_fields[field].validation_alias
        assert tuple(alias.choices) == variables(field)


def test_every_credential_in_the_environment_is_found():
    environ = {
        "EVALGATE_API_KEY": "k1-PLANTED-000",
        "OPENAI_API_KEY": "k2-PLANTED-000",
        "ROUTER_URL": "http://u:p@router/v1",
        "WORKER_URLS": "http://a:b@w1/v1, http://c:d@w2/v1",
    }

    keys, urls = credentials_environment(environ)

    assert keys == ["k1-PLANTED-000", "k2-PLANTED-000"]
    assert urls == ["http://u:p@router/v1", "http://a:b@w1/v1", "http://c:d@w2/v1"]
