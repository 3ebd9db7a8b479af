"""The eval's prompts, built as lm-eval builds them but without it, so the probe can send the
longest one in seconds; a test holds them to lm-eval's, and the eval checks that no prompt it
sends is longer than the one probed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from evalgate.tasks.spec import FEWSHOT_SEED, TaskSpec, Template, render

Message = dict[str, str]


@dataclass(frozen=True)
class Prompt:
    """One eval prompt in the shape the API takes."""

    doc_id: int
    messages: tuple[Message, ...] | None
    """Chat turns (chat API)."""
    text: str | None
    """One prompt string (completions API)."""

    @property
    def chars(self) -> int:
        """Size in characters: what picks the candidates for the longest prompt."""
        if self.messages is not None:
            return sum(len(m["content"]) for m in self.messages)
        return len(self.text or "")


def build_prompt(
    spec: TaskSpec, doc_id: int, doc: dict[str, str], shots: Sequence[dict[str, str]]
) -> Prompt:
    """The prompt lm-eval sends for one question, given its few-shot examples."""
    description = render(str(spec.config.get("description") or ""), doc)
    question, answer = (Template(str(spec.config[key])) for key in ("doc_to_text", "doc_to_target"))
    if spec.api == "chat":
        messages: list[Message] = []
        if description:
            messages.append({"role": "system", "content": description})
        for shot in shots:
            messages.append({"role": "user", "content": question(shot)})
            messages.append({"role": "assistant", "content": answer(shot)})
        messages.append({"role": "user", "content": question(doc)})
        return Prompt(doc_id, tuple(messages), None)
    text = "".join(f"{question(shot)} {answer(shot)}\n\n" for shot in shots)
    return Prompt(doc_id, None, description + text + question(doc))


def build_prompts(
    spec: TaskSpec,
    test: Sequence[dict[str, str]],
    train: Sequence[dict[str, str]],
    limit: int | None = None,
) -> list[Prompt]:
    """Every prompt of the eval, in lm-eval's order (the first `limit` questions)."""
    rnd = random.Random(FEWSHOT_SEED)  # noqa: S311 - lm-eval's few-shot draw, not security
    docs = test[:limit] if limit is not None else test
    k = spec.num_fewshot
    pool = list(train)
    split = spec.config.get("fewshot_split")
    same = split is not None and split == spec.config.get("test_split")
    return [
        build_prompt(spec, i, doc, _shots(rnd, pool, k, doc if same else None))
        for i, doc in enumerate(docs)
    ]


def _shots(
    rnd: random.Random, pool: list[dict[str, str]], k: int, doc: dict[str, str] | None
) -> list[dict[str, str]]:
    """lm-eval's draw (ContextSampler.sample): `k` of the pool; when the shots come from the
    split asked (`doc` given), k + 1 less the doc itself, drawn again without it if fewer remain."""
    if k == 0 or doc is None:
        return rnd.sample(pool, k)
    shots = [shot for shot in rnd.sample(pool, k + 1) if shot != doc][:k]
    return shots if len(shots) == k else rnd.sample([s for s in pool if s != doc], k)


def longest_candidates(prompts: Sequence[Prompt], count: int = 3) -> list[Prompt]:
    """The few longest prompts by characters: the longest in tokens is among them in practice,
    and the probe measures each with the engine's tokenizer."""
    return sorted(prompts, key=lambda p: p.chars, reverse=True)[:count]
