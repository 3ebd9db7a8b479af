"""evalgate.scrub: which forms of a configured secret are found, and what is left alone."""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from urllib.parse import quote

import pytest

from evalgate import scrub
from evalgate.compare import views
from evalgate.engine import answers
from evalgate.engine.answers import Completion, Problems
from evalgate.engine.wire import MAX_MESSAGE_CHARS, parse_error
from evalgate.environment import credentials_environment, variables
from evalgate.eval.replies import Replies
from evalgate.scrub import capped
from evalgate.settings.sources import load
from evalgate.settings.values import Settings, credentials
from evalgate.templates import esc
from evalgate.verify.html import SHOWN_CHARS

pytestmark = pytest.mark.unit

KEY = "sk-evalgate-PLANTED/+123"  # a slash and a plus: URL-encoding and JSON writers differ
PAIR = "gate:pw-PLANTED-456"


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


@pytest.mark.parametrize("key", ["EMPTY", "none", "Dummy", "sk-no-key-required", ""])
def test_a_placeholder_key_is_not_scrubbed(key, caplog):
    scrub.configure([key])

    text = "EMPTY none Dummy sk-no-key-required answers"
    assert scrub.text(text) == text
    assert not caplog.records  # a placeholder is no secret: nothing to warn of


@pytest.mark.parametrize("secret", ["sk-1234", "hunter2", "abcd", "pässwörd", "🔑🔑🔑🔑"])
def test_a_secret_of_four_characters_or_more_is_scrubbed_however_short(secret):
    scrub.configure([], [f"http://bob:{quote(secret)}@router/v1"])
    basic = base64.b64encode(f"bob:{secret}".encode()).decode()

    shown = scrub.text(f"{secret} {json.dumps(secret)} {quote(secret)} Basic {basic}")

    assert shown == '*** "***" *** Basic ***'


def test_a_secret_under_four_characters_is_not_scrubbed_and_warned_of_once_unshown(caplog):
    scrub.configure(["k9!"], ["http://zq:p0@router/v1"])  # values no other test uses
    scrub.configure(["k9!"], ["http://zq:p0@router/v1"])  # a command configures again

    assert scrub.text("k9! zq p0") == "k9! zq p0"
    warned = [r.getMessage() for r in caplog.records]
    assert warned == [
        f"{what} is shorter than 4 characters: it is sent, but not scrubbed from what evalgate "
        "prints or writes (so short a text would mask ordinary words); use a longer one"
        for what in (
            "the API key",
            "the user of --base-url or --worker-url",
            "the password of --base-url or --worker-url",
        )
    ]
    assert not any(s in m for m in warned for s in ("k9!", "zq", "p0"))


def test_a_url_user_and_password_are_each_a_secret():
    scrub.configure([], ["http://evalgate-user:hunter2@router/v1"])

    assert scrub.text("evalgate-user said hunter2") == "*** said ***"


def test_a_later_feature_registers_its_urls_credentials_with_one_call():
    scrub.add_url("postgresql://hist:db-PLANTED-1@db:5432/runs", "--history-url")

    assert scrub.text("auth failed for hist: db-PLANTED-1") == "auth failed for ***: ***"


def test_a_json_escape_in_upper_case_hex_is_found():
    scrub.configure(["pässwort"])

    assert scrub.text('{"e": "p\\u00E4sswort"}') == '{"e": "***"}'


def test_a_piece_of_a_secret_a_filter_took_out_of_an_answer_is_masked_whole():
    scrub.configure(["sk-PLANTED-31415926535"])

    assert scrub.fragment("31415926535") == "***"  # the flexible filter's last number in it
    assert scrub.fragment("-6535") == "-6535"  # under 8 of its characters: no piece of it
    assert scrub.fragment("42") == "42"


def test_documents_are_scrubbed_in_their_values_never_their_keys_or_own_fields():
    scrub.configure(["evalgate"])
    document = {
        "schema": "evalgate.result/1",
        "evalgate": ["evalgate said", {"evalgate": 1}],
        "files": {"samples": "evalgate-results/samples.jsonl"},
        "verdict": {"outcome": "pass", "reason": "evalgate: ok"},
        "n": 12345678,
        "t": ("xevalgate",),
        "b": None,
    }

    assert scrub.values(document, {"schema", "files", "outcome"}) == {
        "schema": "evalgate.result/1",
        "evalgate": ["*** said", {"evalgate": 1}],
        "files": {"samples": "evalgate-results/samples.jsonl"},
        "verdict": {"outcome": "pass", "reason": "***: ok"},  # an object, not own text
        "n": 12345678,
        "t": ["x***"],
        "b": None,
    }


def test_with_no_secret_configured_nothing_changes():
    document = {"a": ["x"]}

    assert scrub.values(document) is document
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
    """Every command scrubs what credentials_environment finds: the variables the settings
    read these from, each of them."""
    for field, value in (
        ("api_key", KEY),
        ("base_url", "http://gate:pw-PLANTED-456@router:8000/v1"),
        ("worker_urls", "http://w:wk-PLANTED-789@decode:8200/v1"),
    ):
        for variable in variables(field):
            loaded = load(None, {}, environ={variable: value})
            assert loaded.origin(field) == variable
            keys, urls = credentials_environment({variable: value})
            assert value in keys + urls


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


# -- no cut leaves part of a secret -----------------------------------------------------------

_RANDOM = random.Random(40)  # noqa: S311  # reproducible test data, no real secret
_ALNUM = string.ascii_letters + string.digits
_PASSWORD_CHARS = _ALNUM + "/+@äé€ß!$&=?"  # what URL-encoding, JSON and base64 each change
KEYS = ["sk-" + "".join(_RANDOM.choices(_ALNUM, k=27)) for _ in range(3)]
PASSWORDS = [
    "".join(_RANDOM.choices(_PASSWORD_CHARS, k=length - 1)) + _RANDOM.choice("/+@äé€ß!$&=?")
    for length in (4, 5, 6, 7)
]
"""4 to 7 characters, each with one an encoding changes (in any order the draw gives)."""
SWEEP_USER = "gate-user"
FILL = "~"  # in no secret, no encoding of one, and changed by no output


def _encodings(secret: str, user: str | None) -> dict[str, str]:
    """The secret as each kind of outside text may carry it."""
    basic = f"{user}:{secret}" if user else secret
    return {
        "as written": secret,
        "JSON-escaped": json.dumps(secret)[1:-1],
        "URL-encoded": quote(secret, safe=""),
        "base64 (Basic)": base64.b64encode(basic.encode()).decode(),
    }


PLANTED = [
    (f"{kind} {n}, {how}", form)
    for kind, secrets, user in (("key", KEYS, None), ("password", PASSWORDS, SWEEP_USER))
    for n, secret in enumerate(secrets)
    for how, form in _encodings(secret, user).items()
]


def _answer(text: str) -> list[str]:
    """What evalgate keeps of an answer that ran past its budget (max_tokens 1: 64 chars)."""
    replies = Replies("m", "chat", max_tokens=1, max_failed=0, journal=None, thinking=None)
    replies.record(0, "key", Completion(text, "stop", 1, 1, reasoning=text), resumed=False)
    kept = replies.answers[0]
    return [kept.response or "", kept.reasoning or ""]


WRAPPED = "Request processing failed: Prefill server error 400 Bad Request: "


def _engine_error(status: int, body: str) -> list[str]:
    error = parse_error(status, body)
    return [error.message, error.describe()]


def _dynamo_reason(text: str) -> list[str]:
    said = answers.ready_answer(503, json.dumps({"ready": False, "reason": text}))
    assert said is not None
    return [said[1]]


def _noted(text: str) -> list[str]:
    problems = Problems()
    problems.note("finish_reason", text)
    return list(problems.first.values())


CAPS: list[tuple[str, int, Callable[[str], list[str]]]] = [
    # (where outside text is cut, at how many characters, what evalgate keeps of a text)
    (
        "engine error, JSON",
        MAX_MESSAGE_CHARS,
        lambda t: _engine_error(400, json.dumps({"error": {"message": t, "code": 400}})),
    ),
    (
        "engine error, flat JSON",
        MAX_MESSAGE_CHARS,
        lambda t: _engine_error(400, json.dumps({"object": "error", "message": t})),
    ),
    (
        "engine error, detail",
        MAX_MESSAGE_CHARS,
        lambda t: _engine_error(422, json.dumps({"detail": t})),
    ),
    ("engine error, text", MAX_MESSAGE_CHARS, lambda t: _engine_error(502, t)),
    (
        "engine error, router-wrapped",
        MAX_MESSAGE_CHARS,
        lambda t: _engine_error(500, WRAPPED + t[len(WRAPPED) :]),  # the offset is the text's
    ),
    ("Dynamo's reason", MAX_MESSAGE_CHARS, _dynamo_reason),
    ("a model id listed", 100, lambda t: [scrub.listed([t, "other"])]),
    ("an answer past its budget", 64, _answer),
    ("an implausible value noted", 80, _noted),
    ("a lost answer's cell", SHOWN_CHARS, lambda t: [esc(capped(t, SHOWN_CHARS))]),
    ("compare's question", 100, lambda t: [views._short(t)]),
    ("a terminal line", scrub.TERMINAL_CHARS, lambda t: [scrub.terminal(t)]),
    ("a workflow command", scrub.TERMINAL_CHARS, lambda t: [scrub.workflow_data(t)]),
    ("the job summary", scrub.TERMINAL_CHARS, lambda t: [scrub.markdown(t)]),
    *((f"capped at {n}", n, lambda t, n=n: [capped(t, n)]) for n in (40, 60, 200, 300)),
]


def _runs(form: str) -> set[str]:
    size = min(8, len(form))
    return {form[i : i + size] for i in range(len(form) - size + 1)}


@pytest.mark.parametrize(("cap", "keep"), [c[1:] for c in CAPS], ids=[c[0] for c in CAPS])
def test_no_cut_keeps_any_part_of_a_secret_at_any_offset(cap, keep):
    """Each secret, in each encoding, planted at every offset from (cap - its length) to the
    cap (and two beyond each end: a quote or prefix shifts some outputs): no output holds a run
    of min(8, its length) of its characters."""
    scrub.configure(KEYS, [f"http://{SWEEP_USER}:{quote(p, safe='')}@router/v1" for p in PASSWORDS])
    leaks = []
    for name, form in PLANTED:
        runs = _runs(form)
        for offset in range(cap - len(form) - 2, cap + 3):
            kept = keep(FILL * offset + form + FILL * 40)
            leaks += [(name, offset, text) for text in kept if any(r in text for r in runs)]

    assert leaks == []


ESCAPED = [
    # (case, secret, text holding it)
    ("Go's JSON escapes of & < >", "sk-a&b<c>d-9Qz", "sk-a\\u0026b\\u003cc\\u003Ed-9Qz"),
    ("any character a \\u escape", "sk-Wq7Lm2", "sk-\\u0057q7\\u004cm2"),
    ("a character beyond the BMP, a UTF-16 pair", "pw-\U0001f511-key", "pw-\\ud83d\\uDD11-key"),
    ("the WHATWG user-info set keeps ( ) !", "Secret(Pass)@Word1!", "Secret(Pass)%40Word1!"),
    ("each character encoded or not", "p@ss w0rd/x", "p%40ss w0rd%2fx"),
]


@pytest.mark.parametrize(("secret", "text"), [c[1:] for c in ESCAPED], ids=[c[0] for c in ESCAPED])
def test_a_secret_is_found_whichever_of_its_characters_a_writer_escaped(secret, text):
    scrub.configure([secret])

    assert scrub.text(f"<{text}>") == "<***>"


def test_overlapping_secrets_are_masked_as_one():
    scrub.configure(["sk-AAAA1111BBBB2222"], ["http://user:BBBB2222CCCC3333@h/v1"])

    assert scrub.text("x sk-AAAA1111BBBB2222CCCC3333 y BBBB2222CCCC3333") == "x *** y ***"
