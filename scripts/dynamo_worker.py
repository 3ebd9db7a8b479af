"""A Dynamo worker that forwards to a vLLM OpenAI server: the engine stack's Dynamo topology.

Dynamo's frontend (`python -m dynamo.frontend`) only fronts Dynamo workers, reached over its own
request plane, and Dynamo's own vLLM worker does not start against vLLM's CPU build. This worker
stands in for it, built on Dynamo's runtime API (`dynamo_worker`, `register_model`,
`serve_endpoint`). It registers the model as token in, token out, as Dynamo's vLLM worker does,
so the frontend does what it does in a `dynamo-vllm` job: it applies the chat template,
tokenizes, watches the stop strings and detokenizes. The worker sends each request's token ids
to vLLM's /v1/completions (streamed, `return_token_ids`) and yields the token ids vLLM generates.

    python scripts/dynamo_worker.py --engine-url http://127.0.0.1:18400 \\
        --model-path MODEL_DIR --model-name smollm2-135m [--context-length 2048]

Run by scripts/engine-up in Dynamo's virtualenv, with the frontend's discovery settings in the
environment (DYN_DISCOVERY_BACKEND=file, DYN_FILE_KV, DYN_REQUEST_PLANE=tcp). Without
--context-length the model is registered with no context length, and the frontend lists the
model config's max_position_embeddings as its `context_window` (more than vLLM serves here).

How the worker reports vLLM's rejection of a request (a 4xx) decides what a client of the
frontend reads (--reject-with):
  invalid-argument  Dynamo's InvalidArgument with vLLM's words: the frontend answers 400 with them;
  http-error        Dynamo's HttpError with vLLM's status and words, as Dynamo's own vLLM worker
                    raises it (dynamo/vllm/errors.py): the frontend answers 400 "Bad Request"
                    (streamed: "Invalid request"), vLLM's words lost.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import uvloop
from dynamo.llm import ModelInput, ModelRuntimeConfig, ModelType, WorkerType, register_model
from dynamo.llm.exceptions import HttpError, InvalidArgument
from dynamo.runtime import DistributedRuntime, dynamo_worker

log = logging.getLogger("dynamo_worker")
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
)
"""The frontend's sampling options that vLLM's completions API takes under the same name."""
STOP_KEYS = ("max_tokens", "min_tokens", "ignore_eos")
"""Its stop conditions likewise. Stop strings stay with the frontend, which watches the text."""


def completion_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """vLLM's /v1/completions body for one of the frontend's preprocessed requests."""
    sampling = request.get("sampling_options") or {}
    stopping = request.get("stop_conditions") or {}
    body: dict[str, Any] = {
        "model": model,
        "prompt": list(request["token_ids"]),
        "stream": True,
        "return_token_ids": True,
        "stream_options": {"include_usage": True},
    }
    body |= {key: sampling[key] for key in SAMPLING_KEYS if sampling.get(key) is not None}
    body |= {key: stopping[key] for key in STOP_KEYS if stopping.get(key) is not None}
    hidden = stopping.get("stop_token_ids_hidden")
    if hidden:
        body["stop_token_ids"] = list(hidden)
    return body


def engine_words(status: int, text: str) -> str:
    """vLLM's own message from an error body, else the body itself."""
    try:
        error = json.loads(text).get("error")
        return str(error["message"]) if isinstance(error, dict) else text
    except (ValueError, AttributeError, KeyError):
        return text or f"HTTP {status} with an empty body"


class Forwarder:
    """The endpoint's handler: one streamed vLLM request per Dynamo request."""

    def __init__(self, engine_url: str, model: str, reject_with: str) -> None:
        self.url = engine_url.rstrip("/") + "/v1/completions"
        self.model = model
        self.reject_with = reject_with
        self.session: aiohttp.ClientSession | None = None

    async def generate(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        if self.session is None:  # made in the event loop that serves
            self.session = aiohttp.ClientSession()
        body = completion_body(request, self.model)
        async with self.session.post(self.url, json=body) as response:
            if response.status != 200:
                words = engine_words(response.status, await response.text())
                if self.reject_with == "http-error" or response.status >= 500:
                    raise HttpError(response.status, words)
                raise InvalidArgument(words)
            usage: dict[str, Any] | None = None
            finish: str | None = None
            async for raw in response.content:
                line = raw.decode().strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[len("data:") :])
                usage = chunk.get("usage") or usage
                for choice in chunk.get("choices") or ():
                    finish = choice.get("finish_reason") or finish
                    yield {"token_ids": list(choice.get("token_ids") or ()), "index": 0}
        last: dict[str, Any] = {"token_ids": [], "index": 0, "finish_reason": finish or "stop"}
        if usage is not None:
            last["completion_usage"] = usage
        yield last


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine-url", required=True, help="vLLM's root, http://host:port")
    parser.add_argument("--model-path", required=True, help="the served model's directory")
    parser.add_argument("--model-name", required=True, help="the served model name")
    parser.add_argument("--endpoint", default="evalgate.backend.generate")
    parser.add_argument(
        "--context-length",
        type=int,
        help="register this served limit with the frontend (default: register none)",
    )
    parser.add_argument(
        "--reject-with",
        choices=("invalid-argument", "http-error"),
        default="invalid-argument",
        help="how to report vLLM's rejection of a request (see the module's docstring)",
    )
    return parser.parse_args()


@dynamo_worker()
async def worker(runtime: DistributedRuntime) -> None:
    args = parse_args()
    endpoint = runtime.endpoint(args.endpoint)
    config = ModelRuntimeConfig()
    if args.context_length is not None:
        config.context_length = args.context_length
    await register_model(
        ModelInput.Tokens,
        ModelType.Chat | ModelType.Completions,
        endpoint,
        args.model_path,
        args.model_name,
        worker_type=WorkerType.Aggregated,
        runtime_config=config,
    )
    log.info("serving %s at %s, forwarding to %s", args.model_name, args.endpoint, args.engine_url)
    forwarder = Forwarder(args.engine_url, args.model_name, args.reject_with)
    await endpoint.serve_endpoint(forwarder.generate)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    uvloop.run(worker())
