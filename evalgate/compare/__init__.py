"""`evalgate compare`: did a change cost accuracy? Two runs paired question by question.

runs.py        a run read back (or still in memory), and what two runs must share (a
               run's --baseline checked before its eval too)
paired.py      the paired statistics and the rule (classify) that reads them
reason.py      a filter's finding in words, and how many questions would settle it
comparison.py  pairing two runs per filter: the Comparison
report.py      the Comparison as text, Markdown and comparison.json
html.py        the Comparison as a self-contained page
"""

DEFAULT_FLIPS = 10
"""Flipped questions listed per filter unless asked otherwise (kept here, light, for the CLI)."""
