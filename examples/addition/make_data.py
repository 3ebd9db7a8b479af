"""Write the example task's data: two-digit additions in GSM8K's answer format.

    python examples/addition/make_data.py    (rewrites test.jsonl and train.jsonl beside it)

Seeded, so the files it writes are the ones shipped: distinct pairs (a, b) with 10 <= a, b <= 99,
the first SHOTS of them the few-shot pool, the next QUESTIONS the test set. Each row is
{"question": "What is 49 + 81?", "answer": "49 + 81 = 130\\n#### 130"}.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SEED = 31
SHOTS = 1
QUESTIONS = 400


def pairs(count: int) -> list[tuple[int, int]]:
    """`count` distinct pairs of two-digit numbers, in the seeded order."""
    rng = random.Random(SEED)  # noqa: S311 - reproducible data, not security
    seen: dict[tuple[int, int], None] = {}
    while len(seen) < count:
        seen.setdefault((rng.randint(10, 99), rng.randint(10, 99)))
    return list(seen)


def row(a: int, b: int) -> str:
    return json.dumps(
        {"question": f"What is {a} + {b}?", "answer": f"{a} + {b} = {a + b}\n#### {a + b}"}
    )


def main() -> None:
    here = Path(__file__).parent
    drawn = pairs(SHOTS + QUESTIONS)
    (here / "train.jsonl").write_text("".join(row(*p) + "\n" for p in drawn[:SHOTS]))
    (here / "test.jsonl").write_text("".join(row(*p) + "\n" for p in drawn[SHOTS:]))


if __name__ == "__main__":
    main()
