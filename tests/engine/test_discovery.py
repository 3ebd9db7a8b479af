"""Model cards (engine/discovery.py): the card picked for the model asked for, a router's
placeholder name, and the served limit that follows the picked card."""

from __future__ import annotations

import pytest

from evalgate.engine.discovery import ModelCard, is_placeholder, pick_card, served_limit
from evalgate.evidence.model import Limit

pytestmark = pytest.mark.loopback


CARD = ModelCard("fake-model", "vllm", 4096, None)
OTHER = ModelCard("other-model", "vllm", 2048, None)
UNKNOWN = ModelCard("unknown", "local", None, None)


PICKS = [
    # (case, cards, model asked for, card picked)
    ("the model's own card", [OTHER, CARD], "fake-model", CARD),
    ("the only card, under another name", [OTHER], "fake-model", OTHER),
    ("sglang-router's placeholder", [UNKNOWN], "fake-model", UNKNOWN),
    ("several cards, none the model's", [OTHER, UNKNOWN], "fake-model", None),
    ("no cards", [], "fake-model", None),
    ("no model asked for, one card", [CARD], None, CARD),
]


@pytest.mark.parametrize(
    ("cards", "model", "picked"), [c[1:] for c in PICKS], ids=[c[0] for c in PICKS]
)
def test_pick_card(cards, model, picked):
    assert pick_card(cards, model) == picked


@pytest.mark.parametrize(
    ("cards", "placeholder"),
    [([], True), ([UNKNOWN], True), ([CARD], False), ([UNKNOWN, OTHER], False)],
)
def test_is_placeholder(cards, placeholder):
    assert is_placeholder(cards) is placeholder


def test_served_limit_follows_the_picked_card():
    assert served_limit([OTHER, CARD], "fake-model", "x") == Limit(4096, "/v1/models of x")
    assert served_limit([UNKNOWN], "fake-model", "x") is None  # no length listed
    assert served_limit([OTHER, UNKNOWN], "fake-model", "x") is None
