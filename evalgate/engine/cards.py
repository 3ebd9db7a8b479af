"""A /v1/models answer, typed: its model cards, and the one rule that picks the model's card
(`pick_card`), for readiness, the engine's labels and the served limit alike.

A router may list a placeholder instead of the model it serves: sglang-router lists one card
named `unknown`, with no max_model_len. NVIDIA Dynamo's frontend lists `context_window`
instead, which is not read as a served limit (engine.dynamo).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalgate.engine.answers import whole
from evalgate.lengths import Limit

PLACEHOLDER_MODELS = frozenset({"unknown"})
"""Model ids a router lists when it does not know the served name (sglang-router)."""


@dataclass(frozen=True)
class ModelCard:
    """One entry of /v1/models."""

    id: str
    owned_by: str | None
    max_model_len: int | None
    unreadable_length: object = None
    """A max_model_len the card holds that is not a positive whole number ("9472", -1)."""
    context_window: int | None = None
    """Dynamo's `context_window`: a registered length or the model config's, so not a served
    limit (engine.dynamo)."""


def model_card(card: Any) -> ModelCard | None:
    """A /v1/models entry, typed: None when it has no id."""
    if not isinstance(card, dict) or not isinstance(card.get("id"), str):
        return None
    length = card.get("max_model_len")
    usable = whole(length, 1)
    owned_by = card.get("owned_by")
    return ModelCard(
        id=card["id"],
        owned_by=owned_by if isinstance(owned_by, str) else None,
        max_model_len=usable,
        unreadable_length=None if usable is not None else length,
        context_window=whole(card.get("context_window"), 1),
    )


def pick_card(cards: list[ModelCard], model: str | None) -> ModelCard | None:
    """The card of `model`; without one by that name, the only card there is (a router's
    placeholder, or the one model an engine serves under another name)."""
    return next((c for c in cards if c.id == model), cards[0] if len(cards) == 1 else None)


def is_placeholder(cards: list[ModelCard]) -> bool:
    """Does the list name no model at all (empty, or only placeholders such as `unknown`)?"""
    return all(card.id in PLACEHOLDER_MODELS for card in cards)


def served_limit(
    cards: list[ModelCard], model: str | None, label: str, notes: list[str] | None = None
) -> Limit | None:
    """max_model_len of the picked card, as a Limit from `label`; a length that cannot be read
    is noted in `notes`."""
    card = pick_card(cards, model)
    if card is not None and card.unreadable_length is not None and notes is not None:
        notes.append(
            f"/v1/models of {label} reports max_model_len {card.unreadable_length!r} for "
            f"{card.id}, not a positive whole number: ignored"
        )
    if card is None or card.max_model_len is None:
        return None
    return Limit(card.max_model_len, f"/v1/models of {label}")
