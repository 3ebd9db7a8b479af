"""The model lm-eval evaluates: each of its requests turned into the body the engine receives
(engine.request, the probe's builder too) and answered by the run's Dispatch (dispatch.py).
"""

from __future__ import annotations

import json
from typing import Any

from lm_eval.api.model import LM

from evalgate.engine.request import generation_body
from evalgate.gate.dispatch import Dispatch, Request

_NOT_SENT = frozenset({"until", "do_sample", "temperature", "max_gen_toks", "max_tokens"})
"""Generation settings lm-eval consumes itself; the task's others (top_p) go into the body."""


class GateLM(LM):  # type: ignore[misc]  # lm-eval's LM is untyped
    def __init__(self, *, dispatch: Dispatch, sampling: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.dispatch = dispatch
        self.sampling = dict(sampling or {})
        """The task's temperature and other generation settings (TaskSpec.sampling)."""

    # -- what lm-eval asks of a chat-capable API model ----------------------------------------
    @property
    def tokenizer_name(self) -> str:
        return "engine"

    def apply_chat_template(
        self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True
    ) -> str:
        """Keep the turns as JSON: the engine applies the model's own chat template."""
        return json.dumps(chat_history, ensure_ascii=False)

    def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
        raise NotImplementedError("evalgate's tasks only generate")

    def loglikelihood_rolling(self, requests: list[Any]) -> list[float]:
        raise NotImplementedError("evalgate's tasks only generate")

    # -- generation ---------------------------------------------------------------------------
    def _request(self, instance: Any) -> Request:
        """The body lm-eval's local-*-completions model sends: prompt or messages, model,
        max_tokens, temperature, stop, seed, then the task's other generation settings (top_p)."""
        context, gen_kwargs = instance.args
        # The task file's own values, as written (lm-eval turns a temperature of 0 into 0.0;
        # the harness's job overrides it with its gen_kwargs, and the engine receives 0).
        told = {"temperature": gen_kwargs.get("temperature", 0)}
        told |= {k: v for k, v in gen_kwargs.items() if k not in _NOT_SENT} | self.sampling
        dispatch = self.dispatch
        chat = dispatch.api == "chat"
        body = generation_body(
            api=dispatch.api,
            model=dispatch.model,
            max_tokens=dispatch.max_tokens,
            stop=list(gen_kwargs.get("until") or []),
            sampling=told,
            messages=json.loads(context) if chat else None,
            prompt=None if chat else context,
        )
        return Request.of(int(instance.doc_id), body, dict(instance.doc))

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        return self.dispatch.answers([self._request(instance) for instance in requests])
