"""`evalgate compare`: did a change cost accuracy? Two runs paired question by question.

Its modules in the order they run: docs/architecture.md, "evalgate compare".
"""

DEFAULT_FLIPS = 10
"""Flipped questions listed per filter unless asked otherwise (kept here, light, for the CLI)."""
