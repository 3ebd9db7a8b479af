"""A fake OpenAI-compatible inference engine on 127.0.0.1, for the loopback tests and benchmarks.

`FakeEngine` is a real HTTP server (stdlib `ThreadingHTTPServer`, port 0, daemon threads) that
speaks vLLM 0.32.0's wire formats, answers GSM8K questions right or wrong on demand, counts every
attempt and injects faults. Shapes, messages and length rules were read from the vLLM 0.32.0
source (`vllm/renderers/params.py`, `entrypoints/serve/utils/api_utils.py`,
`sampling_params.py`, `entrypoints/openai/*/protocol.py`) and agree with REFERENCE.md §1.

    behaviour = EngineBehaviour(max_model_len=2048, accuracy=0.9)
    with FakeEngine(behaviour) as engine:
        client = openai.OpenAI(base_url=engine.url, api_key="none", max_retries=0)
        engine.behaviour.faults.append(Fault("router_busy", times=3))   # switchable at run time
        ...
        assert max(engine.attempts_by_question.values()) <= 3            # no retry storm

Endpoints: `GET /v1/models`, `GET /version`, `GET /health`, `POST /tokenize`,
`POST /v1/chat/completions`, `POST /v1/completions` (streaming or not); anything else 404/405.

Tokens, one rule for `/tokenize`, `usage`, `max_tokens` and the length rules: every match of
`\\w+|[^\\w\\s]` is a token (a run of letters, digits and underscores, or any single other
non-space character). A chat prompt counts its messages' contents plus 4 per message plus 2 for
the generation prompt (`count_chat_tokens`); a completions prompt is its text (`count_tokens`),
or its length when given as token ids.

Length rules, dialects "vllm" and "vllm-flat" (vLLM 0.32.0), in vLLM's order, P prompt tokens,
M = `max_completion_tokens` or `max_tokens`, N = `max_model_len`:
  1. M > N: 400 `max_tokens=M cannot be greater than max_model_len=N. Please request fewer output
     tokens. (parameter=max_tokens, value=M)`;
  2. P > N: 400 `This model's maximum context length is N tokens. However, your prompt contains at
     least N+1 input tokens, ...` (vLLM tokenizes with truncation to N+1 tokens, hence "at least");
  3. budget = min(N - P, M or N - P) < 1 (so P == N): 400 `max_tokens must be at least 1, got 0.`;
  4. otherwise 200, the output cut at the budget with finish_reason "length".
Dialect "sglang": 400 `The input (P tokens) is longer than the model's context length (N tokens).`
when P >= N, and `Requested token count exceeds ...` when P + M >= N. Error bodies: "vllm" nested
`{"error": {"message", "type", "param", "code"}}`, "vllm-flat" and "sglang" flat
`{"object": "error", "message", "type", "param", "code"}`.

Answers: the question is the text after the last "Question:" up to "\\nAnswer:" in the last user
message (chat) or the prompt (completions). A question of the GSM8K test file gets its worked
reference answer ending `#### <number>` when answered right, `#### <number + 1>` when wrong; any
other prompt gets `#### 0`. The i-th test question (0-based) is answered right when
ceil((i+1)·accuracy) > ceil(i·accuracy), so the first n questions get exactly
ceil(n·accuracy) right answers (`expected_right`), the same in every run.

Faults (`Fault`, in `EngineBehaviour.faults`; the first that matches a request applies):
  "reset" accept, then reset the connection; "close" close it without an answer; "hang" send
  nothing until `FakeEngine.release()` (then answer normally) or `stop()`; "delay" wait
  `delay_s`, then answer; "error" status (500) with the dialect's error body; "router_busy"
  vllm-router's 503 text/plain `all circuits open`; "router_wrapped" vllm-router's 500
  text/plain `Request processing failed: Prefill server error 400 Bad Request: {json}`;
  "malformed_json" 200 with a cut JSON body (or first SSE event); "empty_content" and
  "null_content" 200 with "" or null; "length" the answer cut to `tokens` (default half) with
  finish_reason "length" ("content_filter": the same with finish_reason "content_filter");
  "die_mid_stream" send the first `tokens` (default 1) SSE events, or
  half the body, then close; "worker_unreachable" the router's 500 when the worker behind it
  refuses connections (`Fault.worker_url`; vllm-router's prefill/decode text, or sglang-router's
  JSON). Refused connections: `unused_port()`, `refused_url()`, or a stopped engine. `/v1/models`
  variants are settings: `listed_model`, `list_max_model_len`.

A router in front (`EngineBehaviour.router`, shapes seen on vllm-router 0.1.17 and sglang-router
0.3.2 in front of vLLM): both answer `GET /readiness` (200 `{"status": "ready", ...}`, or 503
`{"status": "not ready", ...}` while `workers_ready` is False, when generation answers 503 "No
available workers (all circuits open or unhealthy)"). sglang-router also lists one model named
`unknown` (owned_by "local", no max_model_len, as text/plain) or 503 "No models available",
answers `/health` 200 `OK` whatever the workers, has no `/tokenize` or `/version` (404, empty
body), sends "router_busy" as JSON with code `no_available_workers`, and renames a chat request's
`max_tokens` to `max_completion_tokens` before the engine sees it (so vLLM's message names it).
Without a router, `/readiness` is 404 as on vLLM.

NVIDIA Dynamo's frontend in front (`router="dynamo"`, ai-dynamo 1.6.1 as seen in front of vLLM
on the engine stack): `/v1/models` lists cards `{"id", "object", "created", "owned_by":
"nvidia", "context_window"}` (`context_window`: the worker's registered length, else the model
config's max_position_embeddings; default the served max_model_len), and no model while
`workers_ready` is False or the model was dropped (`model_dropped`); `GET
/v1/models/{id}/ready` 200 `{"model", "ready": true, ...}`, 503 `{"ready": false, "reason"}`
with no live worker, 404 `{"message": "Model not found", ...}` once dropped; `/health` is 200
JSON whatever the workers; `/readiness`, `/tokenize` and `/version` are 404 `Route not found`.
Errors are flat `{"message", "type", "code"}` (type the status's phrase); a streamed request's
rejection is HTTP 200, then `data: {"error": {"message", "type": "invalid_request_error",
"code"}}` and `data: [DONE]`. With `dynamo_words` False the engine's words are lost ("Bad
Request", streamed "Invalid request"), as behind Dynamo's own vLLM worker. Generation with no
live worker: 503 "Model `m` is not ready to serve requests yet. ..."; once dropped: 404 with an
empty body; "router_busy": 503 "Service temporarily unavailable"; "worker_gone": the 404.

Reasoning models (`EngineBehaviour.thinking`, vLLM behind a reasoning parser): a chat answer
thinks first, the thinking in the message's `reasoning_content` or `reasoning` (as configured;
vLLM 0.32 names it `reasoning`, older releases `reasoning_content`), then answers in content;
usage carries `completion_tokens_details.reasoning_tokens`. Thinking that never ends
(`endless_thinking`) is cut by the budget: content null, finish_reason "length". Streamed, as
vLLM's serving_chat sends it (chunks dumped with exclude_unset): the role chunk
`{"role": "assistant", "content": ""}`, one `{"<field>": piece}` delta per thinking token, one
`{"content": piece}` delta per answer token, the last delta carrying finish_reason and
stop_reason (an answer cut while thinking streams only reasoning deltas), then, when
`stream_options.include_usage`, a usage chunk with `choices: []` whose completion_tokens_details
holds the reasoning tokens. `answer_field` puts the whole answer in a reasoning field instead
(a parser that never saw the thinking end), streamed as that field's deltas.

Thinking written into the answer (`EngineBehaviour.inline_thinking`, a reasoning model served
without a reasoning parser), for chat and completions alike: the text is `<think>\n` (left out
with "prompt": the chat template opened the block in the prompt), a scratchpad naming the right
answer as `#### n`, `thinking_tokens` of filler, `\n</think>\n\n`, then the answer. Thinking that
never ends (`endless_thinking`) is cut by the budget before `</think>`, finish_reason "length":
a scorer that reads the whole text takes the scratchpad's number.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import select
import socket
import struct
import sys
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import lru_cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
GSM8K_TEST = REPO_ROOT / "evalgate" / "tasks" / "data" / "gsm8k" / "test.jsonl"

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
GENERATION_PATHS = frozenset({CHAT_PATH, COMPLETIONS_PATH})

Dialect = Literal["vllm", "vllm-flat", "sglang"]
Action = Literal[
    "reset",
    "close",
    "hang",
    "delay",
    "error",
    "router_busy",
    "router_wrapped",
    "malformed_json",
    "empty_content",
    "null_content",
    "length",
    "content_filter",
    "die_mid_stream",
    "worker_unreachable",
    "worker_gone",
]
Router = Literal["vllm-router", "sglang-router", "dynamo"]
ACTIONS: frozenset[str] = frozenset(get_args(Action))
Json = dict[str, Any]

UNKNOWN_REPLY = "#### 0"
FILLER = "Let me check that step again."
"""Reasoning padding (7 tokens) for `reply_tokens` and `ignore_eos`."""

_ERROR_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    422: "UnprocessableEntityError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}
_DEFAULT_STATUS: dict[str, int] = {
    "error": 500,
    "router_busy": 503,
    "router_wrapped": 400,
    "worker_unreachable": 500,
    "worker_gone": 404,
}
_STATUS_FAULTS = frozenset(
    {"error", "router_busy", "router_wrapped", "worker_unreachable", "worker_gone"}
)
"""Faults answered with an error status instead of the engine's answer."""
NO_AVAILABLE_WORKERS = "No available workers (all circuits open or unhealthy)"
_DEFAULT_MESSAGE: dict[str, str] = {"router_busy": "all circuits open"}


# --- tokens ------------------------------------------------------------------------------------

TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")
TOKENS_PER_MESSAGE = 4
GENERATION_PROMPT_TOKENS = 2


def tokenize(text: str) -> list[str]:
    """The tokens of `text`: every match of TOKEN_PATTERN."""
    return TOKEN_PATTERN.findall(text)


def count_tokens(text: str) -> int:
    """How many tokens `text` holds."""
    return sum(1 for _ in TOKEN_PATTERN.finditer(text))


def message_text(content: object) -> str:
    """A chat message's text: the string itself, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def count_chat_tokens(
    messages: Sequence[Mapping[str, object]], *, add_generation_prompt: bool = True
) -> int:
    """Tokens of a chat prompt: contents, plus 4 per message, plus 2 for the generation prompt."""
    total = sum(count_tokens(message_text(m.get("content"))) + TOKENS_PER_MESSAGE for m in messages)
    return total + (GENERATION_PROMPT_TOKENS if add_generation_prompt else 0)


def truncate_tokens(text: str, limit: int) -> str:
    """The prefix of `text` that ends with its `limit`-th token (all of it when shorter)."""
    if limit <= 0:
        return ""
    for number, match in enumerate(TOKEN_PATTERN.finditer(text), start=1):
        if number == limit:
            return text[: match.end()]
    return text


def token_ids(text: str) -> list[int]:
    """Stable ids for the tokens of `text`, for `/tokenize`."""
    return [zlib.crc32(t.encode()) % 50_000 + 100 for t in tokenize(text)]


def _pieces(text: str) -> list[str]:
    """`text` split into streaming pieces, one token each with the whitespace before it."""
    pieces: list[str] = []
    start = 0
    for match in TOKEN_PATTERN.finditer(text):
        pieces.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        if pieces:
            pieces[-1] += text[start:]
        else:
            pieces.append(text[start:])
    return pieces


# --- GSM8K -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gsm8kDoc:
    """One question of the GSM8K test file."""

    index: int
    question: str
    answer: str
    """The reference worked answer, ending `#### <number>`."""

    @property
    def number(self) -> str:
        """The reference final number, as written (may hold commas: "2,125")."""
        return self.answer.rsplit("####", 1)[1].strip()


@lru_cache(maxsize=4)
def load_gsm8k(path: Path = GSM8K_TEST) -> dict[str, Gsm8kDoc]:
    """The test file's questions, keyed by their stripped text."""
    docs: dict[str, Gsm8kDoc] = {}
    with path.open(encoding="utf-8") as lines:
        for index, line in enumerate(lines):
            row = json.loads(line)
            docs[row["question"].strip()] = Gsm8kDoc(index, row["question"], row["answer"])
    return docs


INSTRUCTION = "\nEnd your response with the answer on the last line"
"""The start of the benchmark harness's instruction line, between its question and "Answer:"."""


def find_question(text: str) -> str | None:
    """The question asked last in `text`: after the last "Question:", up to "\\nAnswer:" (or
    up to the harness's instruction line before it)."""
    start = text.rfind("Question:")
    if start < 0:
        return None
    rest = text[start + len("Question:") :]
    end = rest.find("\nAnswer:")
    rest = rest if end < 0 else rest[:end]
    cut = rest.find(INSTRUCTION)
    return (rest if cut < 0 else rest[:cut]).strip()


def wrong_number(number: str) -> str:
    """The reference number plus one: a wrong answer both lm-eval filters read as wrong."""
    plain = number.replace(",", "")
    try:
        return str(int(plain) + 1)
    except ValueError:
        try:
            return str(Decimal(plain) + 1)
        except InvalidOperation:
            return number + "1"


_CALCULATOR = re.compile(r"<<[^>]*>>")


def worked_answer(doc: Gsm8kDoc, *, right: bool, min_tokens: int = 0) -> str:
    """The reference reasoning (calculator marks removed), padded with FILLER lines up to
    `min_tokens` tokens, ending `#### <number>` (right) or `#### <number + 1>` (wrong)."""
    steps = [
        line for line in _CALCULATOR.sub("", doc.answer).splitlines() if not line.startswith("####")
    ]
    final = f"#### {doc.number if right else wrong_number(doc.number)}"
    used = count_tokens("\n".join([*steps, final]))
    while used < min_tokens:
        steps.append(FILLER)
        used += count_tokens(FILLER)
    return "\n".join([*steps, final])


def answered_right(index: int, accuracy: float) -> bool:
    """Is the `index`-th (0-based) test question answered right at this accuracy?"""
    share = Fraction(min(max(accuracy, 0.0), 1.0)).limit_denominator(1_000_000)
    return math.ceil((index + 1) * share) > math.ceil(index * share)


def expected_right(count: int, accuracy: float) -> int:
    """How many of the first `count` test questions are answered right: ceil(count·accuracy)."""
    share = Fraction(min(max(accuracy, 0.0), 1.0)).limit_denominator(1_000_000)
    return math.ceil(count * share)


def stable_fraction(text: str) -> float:
    """A number in [0, 1) fixed by `text` (CRC-32), for `Fault.share`."""
    return zlib.crc32(text.encode()) / 2**32


# --- multiple choice (GPQA-shaped) -------------------------------------------------------------


@dataclass(frozen=True)
class ChoiceDoc:
    """One made-up multiple-choice question: its place in the data set and its right answer."""

    index: int
    correct: str


CHOICE_LETTERS = "ABCD"
_CHOICES = re.compile(r"(?s)^(.*?)\n\n\(A\) (.*?)\n\(B\) (.*?)\n\(C\) (.*?)\n\(D\) (.*?)\n\n")


def gpqa_rows(count: int) -> list[dict[str, str]]:
    """`count` made-up questions in GPQA's columns (never the real, gated data set)."""
    return [
        {
            "Record ID": f"rec{i:04d}",
            "Question": f"Which made-up constant number {i} is the true one?",
            "Correct Answer": f"right value {i}",
            "Incorrect Answer 1": f"wrong value {i}-1",
            "Incorrect Answer 2": f"wrong value {i}-2",
            "Incorrect Answer 3": f"wrong value {i}-3",
        }
        for i in range(count)
    ]


def choice_docs(rows: Sequence[Mapping[str, str]]) -> dict[str, ChoiceDoc]:
    """EngineBehaviour.choice_docs for GPQA-shaped rows."""
    return {
        row["Question"].strip(): ChoiceDoc(i, row["Correct Answer"].strip())
        for i, row in enumerate(rows)
    }


def choice_reply(behaviour: EngineBehaviour, text: str) -> str | None:
    """ "The answer is (X).": the right letter for the `index`-th question when
    `answered_right(index, accuracy)` (both repeats alike) and it is not in `wrong_questions`,
    else the next letter; None when the prompt asks no known multiple-choice question."""
    match = _CHOICES.match(text.lstrip())
    doc = behaviour.choice_docs.get(match.group(1).strip()) if match else None
    if match is None or doc is None:
        return None
    options = [match.group(k).strip() for k in (2, 3, 4, 5)]
    if doc.correct not in options:
        return None
    right = options.index(doc.correct)
    wrong = match.group(1).strip() in {q.strip() for q in behaviour.wrong_questions}
    pick = right if answered_right(doc.index, behaviour.accuracy) and not wrong else (right + 1) % 4
    return f"Weighing the options given.\nThe answer is ({CHOICE_LETTERS[pick]})."


# --- settings ----------------------------------------------------------------------------------


@dataclass(eq=False)
class Fault:
    """One injected misbehaviour and the requests it hits (every given condition must hold).

    Switch faults at run time by editing `engine.behaviour.faults`; each keeps its own counters
    (guarded by the engine's lock), and `rearm()` starts them and its clock again.
    """

    action: Action
    paths: Collection[str] = GENERATION_PATHS
    """Endpoints it can hit; add "/v1/models" etc. for connection and status faults there."""
    questions: Collection[str] | None = None
    """Only requests asking one of these GSM8K questions (text, stripped)."""
    share: float | None = None
    """Only the questions whose `stable_fraction` is below this share (deterministic)."""
    nth: Collection[int] | None = None
    """Only the n-th of the requests that pass the conditions above (1-based)."""
    times: int | None = None
    """Fire at most this often (`times=3`: the first three requests)."""
    times_per_question: int | None = None
    """Fire at most this often per question (1: each question fails once, then succeeds)."""
    seconds: float | None = None
    """Only during this many seconds after `armed_at` (creation or `rearm()`)."""
    status: int | None = None
    """HTTP status: "error" 500, "router_busy" 503; the worker's status for "router_wrapped"."""
    worker_url: str = "http://127.0.0.1:8200"
    """"worker_unreachable": the worker the router cannot reach."""
    message: str | None = None
    """Error text (defaults: "injected fault", "all circuits open" for "router_busy")."""
    delay_s: float = 0.0
    """For "delay"."""
    tokens: int | None = None
    """"length": tokens kept (default half); "die_mid_stream": SSE events sent (default 1)."""
    armed_at: float = field(default_factory=time.monotonic)
    seen: int = 0
    hits: int = 0
    hits_by_question: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown fault action {self.action!r}; use one of {sorted(ACTIONS)}")
        self.paths = frozenset(self.paths)
        if self.questions is not None:
            self.questions = frozenset(q.strip() for q in self.questions)
        if self.nth is not None:
            self.nth = frozenset(self.nth)

    @property
    def http_status(self) -> int:
        return self.status or _DEFAULT_STATUS.get(self.action, 500)

    @property
    def text(self) -> str:
        return self.message or _DEFAULT_MESSAGE.get(self.action, "injected fault")

    def rearm(self) -> None:
        """Forget what this fault has seen and restart its `seconds` clock."""
        self.armed_at = time.monotonic()
        self.seen = self.hits = 0
        self.hits_by_question.clear()

    def _admit(self, path: str, question: str | None, now: float) -> bool:
        """Does this fault hit the request? Counts it. Call under the engine's lock."""
        eligible = (
            path in self.paths
            and (self.questions is None or question in self.questions)
            and (
                self.share is None
                or (question is not None and stable_fraction(question) < self.share)
            )
            and (self.seconds is None or now - self.armed_at < self.seconds)
        )
        if not eligible:
            return False
        self.seen += 1
        key = question or ""
        fires = (
            (self.nth is None or self.seen in self.nth)
            and (self.times is None or self.hits < self.times)
            and (
                self.times_per_question is None
                or self.hits_by_question[key] < self.times_per_question
            )
        )
        if fires:
            self.hits += 1
            self.hits_by_question[key] += 1
        return fires


NOT_PROBE = frozenset(range(2, 100_000))
"""`Fault.nth` that spares the first generation request: the pre-flight probe."""


@dataclass
class EngineBehaviour:
    """What the fake engine serves and how it misbehaves; every field can change at run time."""

    model: str = "fake-model"
    max_model_len: int = 4096
    dialect: Dialect = "vllm"
    owned_by: str | None = None
    """`/v1/models` owned_by; None: "sglang" for that dialect, else "vllm"."""
    version: str | None = "0.32.0"
    """`GET /version`; None answers 404 (SGLang, TRT-LLM; vllm-router answers 405)."""
    listed_model: str | None = None
    """The model id `/v1/models` reports, when it is not the served one."""
    list_max_model_len: bool = True
    """False: `/v1/models` carries no max_model_len (trtllm-serve)."""
    listed_max_model_len: object = None
    """What `/v1/models` reports as max_model_len instead of the served one ("9472", -1)."""
    healthy: bool = True
    """False: `GET /health` answers 503."""
    accuracy: float = 1.0
    wrong_questions: Collection[str] = frozenset()
    """Questions always answered wrong, whatever the accuracy."""
    reply_tokens: int = 0
    """Pad each worked answer with reasoning to at least this many tokens ("####" stays last)."""
    trailer: str = ""
    """Text the model goes on with after its answer, e.g. "\\n\\nQuestion: ..." for `stop`."""
    second_thoughts: bool = False
    """Each worked answer first ends on a wrong `#### <number + 1>`, then corrects itself and
    ends on its real final line: only the last `#### n` of the answer is its answer."""
    answer_field: Literal["content", "reasoning_content", "reasoning"] = "content"
    """Where a chat answer goes: the message's content, or (a reasoning parser's way, with
    content null) its reasoning_content or reasoning."""
    latency_s: float = 0.0
    """Time each accepted generation request takes inside its concurrency slot, counted from
    its arrival (or from the moment it got a slot, when it queued for one): the fake's own
    reading and planning of the answer are inside it, as an engine's own work is, so 64
    requests arriving together all answer `latency_s` later, not one planning time apart."""
    stream_starts_at_once: bool = False
    """A streamed chat answer's first event (the role chunk) goes out as soon as the request
    holds its slot, before the latency, as vLLM sends it (the rest follows the latency); False:
    the whole stream waits the latency."""
    wrong_latency_s: float | None = None
    """Time a question answered wrong takes instead (wrong answers run longer); None: latency_s."""
    max_concurrency: int | None = None
    """Generation requests processed at once; the rest queue (a change applies as soon as a
    request ends)."""
    response_model: str | None = None
    """The model name generation answers carry, when not the served one."""
    overlong_chars: int = 0
    """Characters appended to every answer whatever max_tokens allows (a budget ignored)."""
    answer_text: str | None = None
    """Every generation answer's whole text, whatever the question and max_tokens allow (text
    placed at a given character, such as a secret at a cap)."""
    extra_choice_first: bool = False
    """Answers list a stray choice with index 1 before the real one (index 0)."""
    router_wraps_errors: bool = False
    """Generation 4xx answers come back as vllm-router's wrapped 500 text."""
    router: Router | None = None
    """A router in front of the engine, answering in its own shapes (see the module docstring)."""
    workers_ready: bool = True
    """False: the router has no healthy worker yet (`/readiness` 503, generation 503)."""
    context_window: int | None = None
    """Dynamo: the `context_window` its `/v1/models` lists; None: the served max_model_len."""
    dynamo_words: bool = True
    """Dynamo: False loses the engine's words in a rejection ("Bad Request")."""
    model_dropped: bool = False
    """Dynamo: the frontend dropped the model (its worker died): no card, /ready 404,
    generation 404 with an empty body."""
    faults: list[Fault] = field(default_factory=list)
    dataset: Path = GSM8K_TEST
    thinking: Literal["reasoning_content", "reasoning"] | None = None
    """A reasoning model behind a reasoning parser: each chat answer first thinks
    `thinking_tokens` tokens, sent in this field, then writes its answer in content; usage
    reports completion_tokens_details.reasoning_tokens."""
    thinking_tokens: int = 40
    endless_thinking: float = 0.0
    """Share of the GSM8K questions (picked by their index, as `accuracy` picks) whose thinking
    never ends: the budget cuts it, with content null and finish_reason "length"."""
    inline_thinking: Literal["open", "prompt"] | None = None
    """A reasoning model with no reasoning parser: every answer first thinks in its own text,
    opening with `<think>` ("open") or not ("prompt": the template opened the block), and ends
    the thinking with `</think>` (see the module docstring)."""
    choice_docs: Mapping[str, ChoiceDoc] = field(default_factory=dict)
    """Multiple-choice questions (GPQA-shaped), by their text: a prompt asking one of them with
    its choices (A) to (D) is answered "The answer is (X)." (see `choice_reply`)."""

    def answer(self, text: str) -> str:
        """The answer to a prompt: a multiple-choice one when it asks one, else GSM8K's."""
        chosen = choice_reply(self, text)
        return chosen if chosen is not None else self.reply(find_question(text))

    def docs(self) -> dict[str, Gsm8kDoc]:
        return load_gsm8k(self.dataset)

    def is_right(self, question: str | None) -> bool:
        """Does the engine answer this question right? False for unknown questions."""
        doc = self.docs().get(question.strip()) if question else None
        if doc is None:
            return False
        if doc.question.strip() in {q.strip() for q in self.wrong_questions}:
            return False
        return answered_right(doc.index, self.accuracy)

    def reply(self, question: str | None) -> str:
        """The whole answer the model writes (before stop strings and token limits)."""
        doc = self.docs().get(question.strip()) if question else None
        if doc is None:
            return UNKNOWN_REPLY + self.trailer
        answer = worked_answer(doc, right=self.is_right(question), min_tokens=self.reply_tokens)
        if self.second_thoughts:
            answer = f"#### {wrong_number(doc.number)}\nWait, let me check that again.\n{answer}"
        return answer + self.trailer

    @property
    def served_by(self) -> str:
        return self.owned_by or ("sglang" if self.dialect == "sglang" else "vllm")


@dataclass
class RequestRecord:
    """One request as the engine saw it (fields after `received_at` are set when it ends)."""

    seq: int
    method: str
    path: str
    body: Json | None
    questions: tuple[str, ...]
    stream: bool
    received_at: float
    status: int | None = None
    """HTTP status, set as the status line goes out (before the client can read it); None when
    none went out (reset, close, hung until stop)."""
    fault: str | None = None
    finish_reason: str | None = None
    completion_tokens: int | None = None
    finished_at: float | None = None
    raw: bytes = b""
    """The body's bytes as they arrived."""

    @property
    def question(self) -> str | None:
        return self.questions[0] if self.questions else None


# --- generation: the pure part -----------------------------------------------------------------


@dataclass(frozen=True)
class Rejection:
    """An error answer: status, the engine's message and its `param`."""

    status: int
    message: str
    param: str | None = None

    @property
    def type(self) -> str:
        return _ERROR_TYPES.get(self.status, HTTPStatus(self.status).phrase.replace(" ", ""))


@dataclass(frozen=True)
class Choice:
    text: str | None
    finish_reason: str
    stop_reason: str | None
    completion_tokens: int
    reasoning: str | None = None
    """The thinking, sent in EngineBehaviour.thinking's field."""
    reasoning_tokens: int | None = None


@dataclass(frozen=True)
class Completion:
    prompt_tokens: int
    choices: tuple[Choice, ...]
    reasoning_field: str | None = None
    """The field a chat answer's thinking goes in (EngineBehaviour.thinking); None: no
    reasoning parser."""
    answer_field: str = "content"
    """The field a chat answer goes in (EngineBehaviour.answer_field)."""

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.choices)


@dataclass(frozen=True)
class _Prompt:
    text: str
    """Where the question is looked for."""
    tokens: int
    pretokenized: bool = False


def error_body(dialect: Dialect, rejection: Rejection) -> Json:
    """The dialect's error body."""
    info = {
        "message": rejection.message,
        "type": rejection.type,
        "param": rejection.param,
        "code": rejection.status,
    }
    if dialect == "vllm":
        return {"error": info}
    return {"object": "error", **info}


SGLANG_ROUTER_MODELS: Json = {
    "object": "list",
    "data": [{"id": "unknown", "object": "model", "owned_by": "local"}],
}
"""sglang-router's `/v1/models` in front of a vLLM worker: no served name, no max_model_len."""
NO_WORKERS_CODE = "no_available_workers"
UPSTREAM_ERROR = "call_upstream_request_error"


def readiness_body(behaviour: EngineBehaviour) -> tuple[int, Json]:
    """A router's `GET /readiness`."""
    if behaviour.workers_ready:
        return 200, {"status": "ready", "healthy_workers": 1, "total_workers": 1}
    return 503, {"status": "not ready", "reason": "insufficient healthy workers"}


def sglang_router_error(code: str, message: str) -> Json:
    """sglang-router's own error body."""
    kind = "Service Unavailable" if code == NO_WORKERS_CODE else "Internal Server Error"
    return {"error": {"type": kind, "code": code, "message": message}}


def unreachable_text(url: str) -> str:
    """sglang-router's message when the worker refuses the connection."""
    return f"error sending request for url ({url}). URL: {url}"


def vllm_router_unreachable_text(url: str) -> str:
    """vllm-router's (prefill/decode mode) text/plain 500 when the decode worker refuses the
    connection: the reqwest error chain, ending in the OS's errno."""
    return (
        f"Transparent proxy request failed: Network error: Decode request failed to {url}: "
        f"error sending request for url ({url}) caused by: client error (Connect) caused by: "
        "tcp connect error caused by: Connection refused (os error 111)"
    )


DYNAMO_NOT_READY = (
    "Model `{model}` is not ready to serve requests yet. The deployment may still be starting "
    "up or is not fully provisioned. Please retry shortly."
)
DYNAMO_UNAVAILABLE = "Service temporarily unavailable"


def dynamo_error(status: int, message: str) -> Json:
    """Dynamo's flat error body."""
    return {"message": message, "type": HTTPStatus(status).phrase, "code": status}


def dynamo_models_body(behaviour: EngineBehaviour) -> Json:
    """Dynamo's `GET /v1/models`: one card with `context_window`, none without a live worker."""
    if not behaviour.workers_ready or behaviour.model_dropped:
        return {"object": "list", "data": []}
    window = behaviour.context_window or behaviour.max_model_len
    card = {"id": behaviour.model, "object": "model", "created": int(time.time())}
    return {"object": "list", "data": [card | {"owned_by": "nvidia", "context_window": window}]}


def dynamo_ready_body(behaviour: EngineBehaviour, model: str) -> tuple[int, Json]:
    """Dynamo's `GET /v1/models/{model}/ready`."""
    if model != behaviour.model or behaviour.model_dropped:
        return 404, dynamo_error(404, "Model not found")
    if not behaviour.workers_ready:
        reason = "no namespace has all required worker types live"
        return 503, {"model": model, "ready": False, "reason": reason, "namespaces": {}}
    return 200, {"model": model, "ready": True, "namespaces": {}}


def dynamo_rejection(rejection: Rejection, *, words: bool, stream: bool) -> Json:
    """Dynamo's answer to a rejected request: flat, or (streamed) the error event."""
    if stream:
        message = rejection.message if words else "Invalid request"
        return {"error": {"message": message, "type": "invalid_request_error", "code": 400}}
    message = rejection.message if words else HTTPStatus(rejection.status).phrase
    return dynamo_error(rejection.status, message)


def router_wrapped_text(status: int, body: Json) -> str:
    """vllm-router's 500 text around a worker's error answer."""
    phrase = HTTPStatus(status).phrase
    return f"Request processing failed: Prefill server error {status} {phrase}: {_dumps(body)}"


def apply_length_rules(
    dialect: Dialect,
    max_model_len: int,
    prompt_tokens: int,
    max_tokens: int | None,
    *,
    param: str = "max_tokens",
    pretokenized: bool = False,
) -> int | Rejection:
    """The output budget the engine grants, or its rejection (see the module docstring)."""
    n, p = max_model_len, prompt_tokens
    if dialect == "sglang":
        return _sglang_length_rules(n, p, max_tokens)
    if max_tokens is not None and max_tokens > n:
        return Rejection(
            400,
            f"{param}={max_tokens} cannot be greater than max_model_len={n}. Please request "
            f"fewer output tokens. (parameter={param}, value={max_tokens})",
            param,
        )
    if p > n:
        counted = p if pretokenized else n + 1
        qualifier = "at least " if counted == n + 1 else ""
        return Rejection(
            400,
            f"This model's maximum context length is {n} tokens. However, your prompt contains "
            f"{qualifier}{counted} input tokens, which exceeds this limit even without any "
            "output tokens. Please reduce the length of the input prompt. "
            f"(parameter=input_tokens, value={counted})",
            "input_tokens",
        )
    budget = n - p if max_tokens is None else min(n - p, max_tokens)
    if budget < 1:
        return Rejection(
            400,
            f"max_tokens must be at least 1, got {budget}. (parameter=max_tokens, value={budget})",
            "max_tokens",
        )
    return budget


def _sglang_length_rules(n: int, p: int, max_tokens: int | None) -> int | Rejection:
    if p >= n:
        return Rejection(
            400, f"The input ({p} tokens) is longer than the model's context length ({n} tokens)."
        )
    if max_tokens is not None and p + max_tokens >= n:
        return Rejection(
            400,
            "Requested token count exceeds the model's maximum context length of "
            f"{n} tokens. You requested a total of {p + max_tokens} tokens: {p} tokens from "
            f"the input messages and {max_tokens} tokens for the completion. Please reduce "
            "the number of tokens in the input messages or the completion to fit within "
            "the limit.",
        )
    return max_tokens if max_tokens is not None else n - p


def _prompts(path: str, body: Json) -> list[_Prompt] | Rejection:
    if path == CHAT_PATH:
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return Rejection(400, "messages: Field required (a list of messages)", "messages")
        users = [m for m in messages if m.get("role") == "user"]
        text = message_text(users[-1].get("content")) if users else ""
        return [_Prompt(text, count_chat_tokens(messages))]
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return [_Prompt(prompt, count_tokens(prompt))]
    if isinstance(prompt, list) and prompt and all(isinstance(x, int) for x in prompt):
        return [_Prompt("", len(prompt), pretokenized=True)]
    if isinstance(prompt, list) and prompt:
        found: list[_Prompt] = []
        for item in prompt:
            if isinstance(item, str):
                found.append(_Prompt(item, count_tokens(item)))
            elif isinstance(item, list):
                found.append(_Prompt("", len(item), pretokenized=True))
        return found
    return Rejection(400, "prompt: Field required (a string, strings or token ids)", "prompt")


def _output_limit(path: str, body: Json) -> tuple[int | None, str]:
    if path == CHAT_PATH and body.get("max_completion_tokens") is not None:
        return int(body["max_completion_tokens"]), "max_completion_tokens"
    value = body.get("max_tokens")
    return (int(value) if value is not None else None), "max_tokens"


def _stops(body: Json) -> list[str]:
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    return [s for s in stop or [] if isinstance(s, str) and s]


def _generate(text: str, budget: int, stops: Sequence[str], *, ignore_eos: bool) -> Choice:
    missing = budget + 1 - count_tokens(text)
    if ignore_eos and missing > 0:
        text += (" " + FILLER) * math.ceil(missing / count_tokens(FILLER))
    stop_reason = None
    hits = [(text.find(s), s) for s in stops if s in text]
    if hits:
        at, stop_reason = min(hits)
        text = text[:at]
    if count_tokens(text) > budget:
        return Choice(truncate_tokens(text, budget), "length", None, budget)
    return Choice(text, "stop", stop_reason, count_tokens(text))


def plan_completion(behaviour: EngineBehaviour, path: str, body: Json) -> Completion | Rejection:
    """What the engine answers a generation request: its completion, or its rejection."""
    model = body.get("model")
    if model not in (None, "", behaviour.model):
        return Rejection(
            404,
            f"The model `{model}` does not exist. Valid aliases: {behaviour.model}.",
            "model",
        )
    prompts = _prompts(path, body)
    if isinstance(prompts, Rejection):
        return prompts
    try:
        limit, param = _output_limit(path, body)
    except (TypeError, ValueError):
        return Rejection(400, "max_tokens: Input should be a valid integer", "max_tokens")
    budgets: list[int] = []
    for prompt in prompts:
        verdict = apply_length_rules(
            behaviour.dialect,
            behaviour.max_model_len,
            prompt.tokens,
            limit,
            param=param,
            pretokenized=prompt.pretokenized,
        )
        if isinstance(verdict, Rejection):
            return verdict
        budgets.append(verdict)
    lead = "" if path == CHAT_PATH else " "
    fields: dict[str, Any] = {}
    if path == CHAT_PATH:
        fields = {"reasoning_field": behaviour.thinking, "answer_field": behaviour.answer_field}
    if path == CHAT_PATH and behaviour.thinking is not None:
        choices = tuple(
            _think_then_answer(behaviour, prompt.text, budget, _stops(body))
            for prompt, budget in zip(prompts, budgets, strict=True)
        )
        return Completion(sum(p.tokens for p in prompts), choices, **fields)
    choices = tuple(
        _generate(
            lead + _inline_thought(behaviour, prompt.text, budget) + behaviour.answer(prompt.text),
            budget,
            _stops(body),
            ignore_eos=bool(body.get("ignore_eos")),
        )
        for prompt, budget in zip(prompts, budgets, strict=True)
    )
    return Completion(sum(p.tokens for p in prompts), choices, **fields)


def _inline_thought(behaviour: EngineBehaviour, text: str, budget: int) -> str:
    """The thinking a model without a reasoning parser writes before its answer ("" for none):
    a scratchpad holding the right answer, filler, and (unless it never ends) `</think>`."""
    if behaviour.inline_thinking is None:
        return ""
    question = find_question(text)
    doc = behaviour.docs().get(question.strip()) if question else None
    endless = doc is not None and answered_right(doc.index, behaviour.endless_thinking)
    wanted = budget + 1 if endless else behaviour.thinking_tokens
    scratch = f"A first guess: #### {doc.number}\n" if doc is not None else ""
    filler = " ".join([FILLER] * math.ceil(wanted / count_tokens(FILLER)))
    opening = "<think>\n" if behaviour.inline_thinking == "open" else ""
    return f"{opening}{scratch}{filler}\n</think>\n\n"


def _think_then_answer(
    behaviour: EngineBehaviour, text: str, budget: int, stops: Sequence[str]
) -> Choice:
    """A reasoning model's answer: the thinking (cut by the budget when it never ends), then,
    within what is left of the budget, the answer."""
    question = find_question(text)
    doc = behaviour.docs().get(question.strip()) if question else None
    endless = doc is not None and answered_right(doc.index, behaviour.endless_thinking)
    wanted = budget + 1 if endless else behaviour.thinking_tokens
    thought = " ".join([FILLER] * math.ceil(wanted / count_tokens(FILLER)))
    if count_tokens(thought) >= budget:
        cut = truncate_tokens(thought, budget)
        return Choice(None, "length", None, budget, cut, budget)
    used = count_tokens(thought)
    answer = _generate(behaviour.answer(text), budget - used, stops, ignore_eos=False)
    return Choice(
        answer.text,
        answer.finish_reason,
        answer.stop_reason,
        answer.completion_tokens + used,
        thought,
        used,
    )


def request_questions(path: str, body: Json | None) -> tuple[str, ...]:
    """The GSM8K questions a generation request asks (one per prompt)."""
    if body is None or path not in GENERATION_PATHS:
        return ()
    prompts = _prompts(path, body)
    if isinstance(prompts, Rejection):
        return ()
    return tuple(q for p in prompts if (q := find_question(p.text)) is not None)


def _apply_content_fault(completion: Completion, fault: Fault | None) -> Completion:
    if fault is None or fault.action not in (
        "empty_content",
        "null_content",
        "length",
        "content_filter",
    ):
        return completion
    changed: list[Choice] = []
    for choice in completion.choices:
        if fault.action == "empty_content":
            changed.append(Choice("", "stop", None, 0))
        elif fault.action == "null_content":
            changed.append(Choice(None, "stop", None, 0))
        else:
            text = choice.text or ""
            keep = fault.tokens if fault.tokens is not None else max(1, count_tokens(text) // 2)
            cut = truncate_tokens(text, keep)
            finish = "length" if fault.action == "length" else "content_filter"
            changed.append(Choice(cut, finish, None, count_tokens(cut)))
    return replace(completion, choices=tuple(changed))


# --- generation: the wire shapes (vLLM 0.32.0 protocol classes) ---------------------------------


def _usage(completion: Completion, *, details: bool = True) -> Json:
    usage: Json = {
        "prompt_tokens": completion.prompt_tokens,
        "total_tokens": completion.prompt_tokens + completion.completion_tokens,
        "completion_tokens": completion.completion_tokens,
    }
    if details:
        thinking = [c.reasoning_tokens for c in completion.choices if c.reasoning_tokens]
        tokens = {"reasoning_tokens": sum(thinking)} if thinking else None
        usage |= {"prompt_tokens_details": None, "completion_tokens_details": tokens}
    return usage


def _message(text: str | None, field: str) -> Json:
    """The assistant message: the answer in `field`; a reasoning field leaves content null."""
    message: Json = {
        "role": "assistant",
        "content": text if field == "content" else None,
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
        "reasoning": None,
    }
    if field != "content":
        message[field] = text
    return message


def chat_response(
    model: str,
    completion: Completion,
    answer_field: str = "content",
    thinking: str | None = None,
) -> Json:
    """A `chat.completion` object (the answer in `answer_field` of each message; the thinking,
    if any, in `thinking`)."""
    choices = [
        {
            "index": index,
            "message": _message(choice.text, answer_field)
            | ({thinking: choice.reasoning} if thinking else {}),
        }
        | _ending(choice)
        for index, choice in enumerate(completion.choices)
    ]
    tail = {"prompt_logprobs": None, "prompt_token_ids": None, "kv_transfer_params": None}
    return _response("chat.completion", "chatcmpl", model, choices, completion) | tail


def completions_response(model: str, completion: Completion) -> Json:
    """A `text_completion` object."""
    choices = [
        {"index": index, "text": choice.text}
        | _ending(choice)
        | {"prompt_logprobs": None, "prompt_token_ids": None}
        for index, choice in enumerate(completion.choices)
    ]
    tail = {"kv_transfer_params": None}
    return _response("text_completion", "cmpl", model, choices, completion) | tail


def _response(
    kind: str, prefix: str, model: str, choices: list[Json], completion: Completion
) -> Json:
    """What vLLM's chat and completions answers begin with, in its order."""
    return {
        "id": f"{prefix}-{uuid.uuid4().hex}",
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "service_tier": None,
        "system_fingerprint": None,
        "usage": _usage(completion),
    }


def _ending(choice: Choice) -> Json:
    """How a choice of vLLM's ends, in its order."""
    return {
        "logprobs": None,
        "finish_reason": choice.finish_reason,
        "stop_reason": choice.stop_reason,
        "token_ids": None,
    }


def _chat_deltas(completion: Completion, choice: Choice) -> list[Json]:
    """The deltas of a streamed chat answer after its role chunk, one token each: the thinking
    in the reasoning field, then the answer in its field; a null answer with nothing before it
    is one `content: null` delta, an empty one one `content: ""`."""
    deltas: list[Json] = []
    if choice.reasoning and completion.reasoning_field is not None:
        deltas += [{completion.reasoning_field: p} for p in _pieces(choice.reasoning)]
    if choice.text is not None:
        field = completion.answer_field
        deltas += [{field: p} for p in _pieces(choice.text)] or [{field: ""}]
    return deltas or [{"content": None}]


def stream_events(
    path: str, model: str, completion: Completion, *, include_usage: bool
) -> list[Json]:
    """The SSE events of a streamed answer, before `data: [DONE]`: for chat a role chunk, then
    one chunk per token (the thinking's first, see `_chat_deltas`), the last carrying
    finish_reason; then the usage chunk when asked (with the reasoning tokens behind a
    reasoning parser)."""
    chat = path == CHAT_PATH
    head: Json = {
        "id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
    }
    events: list[Json] = []
    for index, choice in enumerate(completion.choices):
        if chat:
            role: Json = {"index": index, "delta": {"role": "assistant", "content": ""}}
            role |= {"logprobs": None, "finish_reason": None}
            events.append({**head, "choices": [role]})
            deltas = _chat_deltas(completion, choice)
            for number, delta in enumerate(deltas, start=1):
                last = number == len(deltas)
                item: Json = {"index": index, "delta": delta, "logprobs": None}
                item["finish_reason"] = choice.finish_reason if last else None
                if last:
                    item["stop_reason"] = choice.stop_reason
                events.append({**head, "choices": [item]})
            continue
        contents: list[str | None] = [None] if choice.text is None else [*_pieces(choice.text)]
        for number, piece in enumerate(contents or [""], start=1):
            last = number >= len(contents)
            item = {"index": index, "text": piece, "logprobs": None}
            item["finish_reason"] = choice.finish_reason if last else None
            item["stop_reason"] = choice.stop_reason if last else None
            events.append({**head, "choices": [item]})
    if include_usage:
        usage = _usage(completion, details=False)
        if chat and completion.reasoning_field is not None:  # vLLM: whenever a parser is on
            thought = sum(c.reasoning_tokens or 0 for c in completion.choices)
            usage["completion_tokens_details"] = {"reasoning_tokens": thought}
        events.append({**head, "choices": [], "usage": usage})
    return events


def models_body(behaviour: EngineBehaviour) -> Json:
    """`GET /v1/models`."""
    now = int(time.time())
    card: Json = {
        "id": behaviour.listed_model or behaviour.model,
        "object": "model",
        "created": now,
        "owned_by": behaviour.served_by,
        "root": behaviour.model,
        "parent": None,
        "max_model_len": behaviour.max_model_len,
        "permission": [
            {
                "id": f"modelperm-{uuid.uuid4().hex}",
                "object": "model_permission",
                "created": now,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }
    if behaviour.listed_max_model_len is not None:
        card["max_model_len"] = behaviour.listed_max_model_len
    if not behaviour.list_max_model_len:
        del card["max_model_len"]
    return {"object": "list", "data": [card]}


def tokenize_body(behaviour: EngineBehaviour, body: Json) -> Json | Rejection:
    """`POST /tokenize` with a prompt or chat messages (no length limit, as vLLM)."""
    model = body.get("model")
    if model not in (None, "", behaviour.model):
        message = f"The model `{model}` does not exist. Valid aliases: {behaviour.model}."
        return Rejection(404, message, "model")
    if isinstance(body.get("messages"), list):
        messages = [m for m in body["messages"] if isinstance(m, dict)]
        ids: list[int] = []
        for turn in messages:
            ids += [1, 2, 3, *token_ids(message_text(turn.get("content"))), 4]
        if body.get("add_generation_prompt", True):
            ids += [1, 2]
    elif isinstance(body.get("prompt"), str):
        ids = token_ids(body["prompt"])
    else:
        return Rejection(400, "prompt or messages: Field required", "prompt")
    return {
        "count": len(ids),
        "max_model_len": behaviour.max_model_len,
        "tokens": ids,
        "token_strs": None,
    }


def _dumps(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


# --- network helpers ---------------------------------------------------------------------------


def unused_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (just now): connecting is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def refused_url() -> str:
    """An OpenAI base URL whose connections are refused."""
    return f"http://127.0.0.1:{unused_port()}/v1"


# --- the server --------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # A real engine's listen backlog is in the thousands (uvicorn: 2048); socketserver's 5 would
    # reset connections whenever a client opens many at once.
    request_queue_size = 1024
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, engine: FakeEngine, port: int) -> None:
        self.engine = engine
        super().__init__((engine.host, port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (an aborted eval does) is normal, not worth a traceback."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def process_request(self, request: Any, client_address: Any) -> None:
        """One daemon thread per connection, tracked so that stop() can end it."""
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name=f"fakeengine-{self.server_address[1]}-conn",
            daemon=True,
        )
        self.engine._track(request, thread)
        thread.start()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.engine._untrack(request, threading.current_thread())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    """TCP_NODELAY, as uvicorn sets it: the headers and the body go out in two writes, and with
    Nagle's algorithm the body would wait for the client's delayed ACK (40 ms an answer)."""
    server: _Server
    _record: RequestRecord | None = None

    def version_string(self) -> str:
        return "uvicorn"

    def log_message(self, format: str, *args: object) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    def send_response(self, code: int, message: str | None = None) -> None:
        if self._record is not None:  # recorded before the client can read the answer
            self._record.status = code
        super().send_response(code, message)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    # -- the request cycle

    def _serve(self, method: str) -> None:
        engine = self.server.engine
        path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        body, problem = _parse_object(raw) if method == "POST" else (None, None)
        record = engine._receive(
            method, path, body, request_questions(path, body), bool(body and body.get("stream"))
        )
        record.raw = raw
        self._record = record
        try:
            self._route(record, method, path, body, problem)
        except OSError:  # the client went away, or a fault closed the socket
            self.close_connection = True
        finally:
            self._record = None
            engine._finish(record)

    def _route(
        self, record: RequestRecord, method: str, path: str, body: Json | None, problem: str | None
    ) -> None:
        routes = {"/v1/models": "GET", "/version": "GET", "/health": "GET", "/tokenize": "POST"}
        routes |= dict.fromkeys(GENERATION_PATHS, "POST")
        router = self.server.engine.behaviour.router
        if router is not None:
            routes["/readiness"] = "GET"
        if self._router_own_route(router, method, path):
            return
        if path not in routes:
            self._send_json(404, {"detail": "Not Found"})
            return
        if routes[path] != method:
            self._send_json(405, {"detail": "Method Not Allowed"})
            return
        fault = self.server.engine._pick_fault(path, record.question)
        if fault is not None:
            record.fault = fault.action
            if not self._before(fault):
                return
        if method == "GET":
            self._answer_get(path, fault)
        elif body is None:
            self._send_rejection(Rejection(400, problem or "a JSON object body is required"), path)
        elif path == "/tokenize":
            answer = tokenize_body(self.server.engine.behaviour, body)
            if isinstance(answer, Rejection):
                self._send_rejection(answer, path)
            else:
                self._send_json(200, answer, fault)
        else:
            self._answer_generation(record, path, body, fault)

    def _router_own_route(self, router: Router | None, method: str, path: str) -> bool:
        """Answer what only the router in front answers (or lacks); False for the rest."""
        if router == "sglang-router" and path in ("/tokenize", "/version"):
            self._send(404, b"", "text/plain; charset=utf-8")  # it has neither
            return True
        if router != "dynamo":
            return False
        ready = re.fullmatch(r"/v1/models/(.+)/ready", path)
        if ready is not None and method == "GET":
            self._send_json(*dynamo_ready_body(self.server.engine.behaviour, ready[1]))
            return True
        if path in ("/readiness", "/tokenize", "/version"):
            self._send_json(404, dynamo_error(404, f"Route not found: {method} {path}"))
            return True
        return False

    def _answer_get(self, path: str, fault: Fault | None) -> None:
        behaviour = self.server.engine.behaviour
        plain = "text/plain; charset=utf-8"
        if path == "/readiness":
            self._send_json(*readiness_body(behaviour), fault)
        elif path == "/health" and behaviour.router == "sglang-router":
            self._send(200, b"OK", plain)  # liveness only, whatever the workers
        elif path == "/health" and behaviour.router == "dynamo":
            self._send_json(200, {"status": "healthy", "endpoints": [], "instances": []})
        elif path == "/v1/models" and behaviour.router == "dynamo":
            self._send_json(200, dynamo_models_body(behaviour), fault)
        elif path == "/v1/models" and behaviour.router == "sglang-router":
            if behaviour.workers_ready:
                self._send(200, _dumps(SGLANG_ROUTER_MODELS).encode(), plain)
            else:
                self._send(503, b"No models available", plain)
        elif path == "/health":
            self._send(200 if behaviour.healthy else 503, b"", "application/json")
        elif path == "/v1/models":
            self._send_json(200, models_body(behaviour), fault)
        elif behaviour.version is None:
            self._send_json(404, {"detail": "Not Found"}, fault)
        else:
            self._send_json(200, {"version": behaviour.version}, fault)

    def _before(self, fault: Fault) -> bool:
        """Apply a fault that acts before the engine works; False when the request is done."""
        engine = self.server.engine
        action = fault.action
        if action in ("reset", "close"):
            if action == "reset":  # SO_LINGER 0: closing sends RST
                linger = struct.pack("ii", 1, 0)
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                self.connection.close()
            self.close_connection = True
            return False
        if action in ("hang", "delay"):
            stopped = engine._hang() if action == "hang" else engine._sleep(fault.delay_s)
            self.close_connection = self.close_connection or stopped
            return not stopped
        if action in _STATUS_FAULTS:
            self._send_fault_status(fault)
            return False
        return True

    def _send_fault_status(self, fault: Fault) -> None:
        plain = "text/plain; charset=utf-8"
        behaviour = self.server.engine.behaviour
        status, dialect = fault.http_status, behaviour.dialect
        if fault.action == "router_busy":
            self._send_router_busy(status, fault.message)
            return
        if fault.action == "worker_gone":
            self._send(404, b"", "application/json")  # Dynamo's, once it dropped the model
            return
        if fault.action == "worker_unreachable":
            url = fault.worker_url + urlsplit(self.path).path
            if behaviour.router == "sglang-router":
                self._send_json(status, sglang_router_error(UPSTREAM_ERROR, unreachable_text(url)))
            else:
                self._send(status, vllm_router_unreachable_text(url).encode(), plain)
            return
        body = error_body(dialect, Rejection(status, fault.text))
        if fault.action == "router_wrapped":
            self._send(500, router_wrapped_text(status, body).encode(), plain)
        else:
            self._send_json(status, body)

    def _send_router_busy(self, status: int, message: str | None) -> None:
        """A router with no worker to send the request to: vllm-router's text/plain 503, or
        sglang-router's JSON."""
        if self.server.engine.behaviour.router == "sglang-router":
            body = sglang_router_error(NO_WORKERS_CODE, message or NO_AVAILABLE_WORKERS)
            self._send_json(status, body)
        elif self.server.engine.behaviour.router == "dynamo":
            self._send_json(status, dynamo_error(status, message or DYNAMO_UNAVAILABLE))
        else:
            text = message or _DEFAULT_MESSAGE["router_busy"]
            self._send(status, text.encode(), "text/plain; charset=utf-8")

    def _answer_generation(  # noqa: PLR0912  # one branch per engine answer, read top down
        self, record: RequestRecord, path: str, body: Json, fault: Fault | None
    ) -> None:
        engine = self.server.engine
        behaviour = engine.behaviour
        if behaviour.router == "dynamo" and (
            behaviour.model_dropped or not behaviour.workers_ready
        ):
            if behaviour.model_dropped:
                self._send(404, b"", "application/json")
            else:
                message = DYNAMO_NOT_READY.format(model=behaviour.model)
                self._send_json(503, dynamo_error(503, message))
            return
        if behaviour.router is not None and not behaviour.workers_ready:
            self._send_router_busy(503, NO_AVAILABLE_WORKERS)
            return
        if behaviour.router == "sglang-router" and path == CHAT_PATH and "max_tokens" in body:
            body = {**body, "max_completion_tokens": body["max_tokens"]}  # as the router does
            del body["max_tokens"]
        plan = plan_completion(behaviour, path, body)
        if isinstance(plan, Rejection):
            self._send_rejection(plan, path, stream=bool(body.get("stream")))
            return
        granted = engine._acquire_slot()
        if granted is None:
            self.close_connection = True
            return
        begun = max(record.received_at, granted)  # the latency counts from here
        model = behaviour.response_model or behaviour.model
        stream = bool(body.get("stream"))
        options = body.get("stream_options") if stream else None
        usage = bool(isinstance(options, dict) and options.get("include_usage"))
        started: Json | None = None
        if stream and behaviour.stream_starts_at_once and path == CHAT_PATH and fault is None:
            started = stream_events(path, model, plan, include_usage=False)[0]
            self._start_stream()
            self._write_chunk(f"data: {_dumps(started)}\n\n")
            self.wfile.flush()
        latency = behaviour.latency_s
        if behaviour.wrong_latency_s is not None and not behaviour.is_right(record.question):
            latency = behaviour.wrong_latency_s
        latency -= time.monotonic() - begun  # reading and planning the answer are inside it
        try:
            waited = engine._sleep(latency) if started is None else self._wait_unless_gone(latency)
            if waited:
                self.close_connection = True
                return
        finally:
            engine._release_slot()
        plan = _apply_content_fault(plan, fault)
        if behaviour.overlong_chars or behaviour.answer_text is not None:
            plan = Completion(
                plan.prompt_tokens,
                tuple(
                    Choice(
                        behaviour.answer_text
                        if behaviour.answer_text is not None
                        else (c.text or "") + "x" * behaviour.overlong_chars,
                        c.finish_reason,
                        c.stop_reason,
                        c.completion_tokens,
                    )
                    for c in plan.choices
                ),
            )
        record.finish_reason = plan.choices[0].finish_reason if plan.choices else None
        record.completion_tokens = plan.completion_tokens
        if behaviour.extra_choice_first and not stream:
            answer = (chat_response if path == CHAT_PATH else completions_response)(model, plan)
            stray = json.loads(json.dumps(answer["choices"][0]))
            stray["index"] = 1
            if path == CHAT_PATH:
                stray["message"]["content"] = UNKNOWN_REPLY
            else:
                stray["text"] = UNKNOWN_REPLY
            answer["choices"].insert(0, stray)
            self._send_json(200, answer, fault)
            return
        if stream:
            events = stream_events(path, model, plan, include_usage=usage)
            if started is not None:  # its role chunk went out before the latency
                events = [{**event, "id": started["id"]} for event in events[1:]]
            self._send_stream(events, fault, started=started is not None)
        elif path == CHAT_PATH:
            self._send_json(
                200, chat_response(model, plan, behaviour.answer_field, behaviour.thinking), fault
            )
        else:
            self._send_json(200, completions_response(model, plan), fault)

    # -- writing

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_json(self, status: int, obj: Json, fault: Fault | None = None) -> None:
        data = _dumps(obj).encode()
        action = fault.action if fault is not None else None
        if action == "malformed_json":
            data = data[: len(data) // 2]
        if action != "die_mid_stream":
            self._send(status, data, "application/json")
            return
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self._abort()

    def _send_rejection(self, rejection: Rejection, path: str, *, stream: bool = False) -> None:
        behaviour = self.server.engine.behaviour
        if behaviour.router == "dynamo":
            answer = dynamo_rejection(rejection, words=behaviour.dynamo_words, stream=stream)
            if stream:  # HTTP 200, then the error as an event
                self._start_stream()
                self._write_chunk(f"data: {_dumps(answer)}\n\n")
                self._write_chunk("data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
            else:
                self._send_json(rejection.status, answer)
            return
        body = error_body(behaviour.dialect, rejection)
        if behaviour.router_wraps_errors and path in GENERATION_PATHS and rejection.status < 500:
            text = router_wrapped_text(rejection.status, body)
            self._send(500, text.encode(), "text/plain; charset=utf-8")
        else:
            self._send_json(rejection.status, body)

    def _wait_unless_gone(self, seconds: float) -> bool:
        """Wait `seconds` while the client listens; True when stopped or the client hung up
        (a probe that read its first event): the slot is free again at once, as in vLLM."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self.server.engine._sleep(min(left, 0.02)):
                return True
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                return True
        return False

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _send_stream(
        self, events: list[Json], fault: Fault | None, *, started: bool = False
    ) -> None:
        if not started:
            self._start_stream()
        action = fault.action if fault is not None else None
        die_after = (
            (fault.tokens or 1) if fault is not None and action == "die_mid_stream" else None
        )
        for number, event in enumerate(events):
            if die_after is not None and number >= die_after:
                self._abort()
                return
            data = _dumps(event)
            if action == "malformed_json" and number == 0:
                data = data[: len(data) // 2]
            self._write_chunk(f"data: {data}\n\n")
        self._write_chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _write_chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _abort(self) -> None:
        """Drop the connection in the middle of an answer."""
        self.close_connection = True
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)


def _parse_object(raw: bytes) -> tuple[Json | None, str | None]:
    try:
        parsed = json.loads(raw or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"JSON decode error: {exc}"
    if not isinstance(parsed, dict):
        return None, "a JSON object body is required"
    return parsed, None


class Served:
    """A server at `host` and `port` answering the OpenAI API under /v1."""

    host: str

    @property
    def port(self) -> int:
        raise NotImplementedError

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The OpenAI base URL, ending in /v1."""
        return f"{self.root_url}/v1"


class _Count:
    """One of the engine's counters (`_name` on it), read under its lock."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.field = f"_{name}"

    def __get__(self, engine: FakeEngine, owner: type | None = None) -> int:
        with engine._cond:
            return int(getattr(engine, self.field))


class FakeEngine(Served):
    """A running fake engine on 127.0.0.1. Use as a context manager, or call stop().

    `FakeEngine(behaviour, **overrides)` sets `overrides` on the behaviour (a new default one
    when None). `start=False` only reserves a port; `start()` serves it, again after `stop()`.
    `host`: the address to listen on (another than 127.0.0.1 inside a network namespace).
    """

    def __init__(
        self,
        behaviour: EngineBehaviour | None = None,
        *,
        port: int = 0,
        start: bool = True,
        host: str = "127.0.0.1",
        **overrides: object,
    ) -> None:
        self.host = host
        self.behaviour = behaviour if behaviour is not None else EngineBehaviour()
        for name, value in overrides.items():
            if not hasattr(self.behaviour, name):
                raise TypeError(f"EngineBehaviour has no setting {name!r}")
            setattr(self.behaviour, name, value)
        self._cond = threading.Condition(threading.RLock())
        self._log: list[RequestRecord] = []
        self._attempts: Counter[str] = Counter()
        self._in_flight = self._peak_in_flight = 0
        self._active = self._peak_active = 0
        self._hanging = 0
        self._releases = 0
        self._stopping = False
        self._stopped = threading.Event()
        """Set with _stopping: what sleeping handlers wait on, so that the condition's every
        notify (a request in, a request out) does not wake all 64 sleepers to no purpose."""
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._server: _Server | None = None
        self._serving: threading.Thread | None = None
        self._port = port if port or start else unused_port()
        if start:
            self.start()

    # -- life cycle

    def start(self) -> FakeEngine:
        """Serve (again, on the same port after stop())."""
        with self._cond:
            if self._server is not None:
                return self
            self._stopping = False
            self._stopped.clear()
            self._server = _Server(self, self._port)
            self._port = self._server.server_address[1]
            self._serving = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.02},
                name=f"fakeengine-{self._port}",
                daemon=True,
            )
            self._serving.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving: close the port and every open connection, and wake every waiting
        handler (hung, delayed, queued), then wait up to `timeout` for the handlers to end."""
        with self._cond:
            server, serving = self._server, self._serving
            if server is None or serving is None:
                return
            self._stopping = True
            self._stopped.set()
            self._cond.notify_all()
        server.shutdown()
        server.server_close()
        serving.join(timeout)
        with self._cond:
            connections = dict(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for thread in connections.values():
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            self._server = self._serving = None

    def __enter__(self) -> FakeEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        return self._port

    # -- control

    def release(self) -> None:
        """Let every request hung by a "hang" fault go on and answer."""
        with self._cond:
            self._releases += 1
            self._cond.notify_all()

    def inject(self, fault: Fault) -> Fault:
        """Add a fault while running (same as appending to behaviour.faults)."""
        self.behaviour.faults.append(fault)
        return fault

    def clear(self) -> None:
        """Forget the request log and counters (the faults keep theirs)."""
        with self._cond:
            self._log.clear()
            self._attempts.clear()
            self._peak_in_flight = self._in_flight
            self._peak_active = self._active

    def wait_until(self, predicate: Callable[[FakeEngine], bool], timeout: float = 5.0) -> bool:
        """Wait (without polling) until predicate(engine) holds; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout)

    # -- what happened

    @property
    def log(self) -> list[RequestRecord]:
        """Every request, all paths, in arrival order."""
        with self._cond:
            return list(self._log)

    @property
    def requests(self) -> list[RequestRecord]:
        """The generation requests (chat and completions), in arrival order."""
        with self._cond:
            return [r for r in self._log if r.path in GENERATION_PATHS]

    @property
    def total(self) -> int:
        return len(self.requests)

    @property
    def status_counts(self) -> Counter[int | None]:
        """Generation requests by the status sent (None: ended without an answer)."""
        return Counter(
            r.status for r in self.requests if r.status is not None or r.finished_at is not None
        )

    @property
    def attempts_by_question(self) -> Counter[str]:
        """How often each GSM8K question was asked (stripped text)."""
        with self._cond:
            return Counter(self._attempts)

    def attempts(self, question: str) -> int:
        with self._cond:
            return self._attempts[question.strip()]

    in_flight = _Count()
    """Generation requests received and not finished."""
    peak_in_flight = _Count()
    active = _Count()
    """Generation requests holding a concurrency slot now."""
    peak_active = _Count()
    hanging = _Count()
    """Requests held by a "hang" fault now."""

    # -- used by the handlers

    def _track(self, connection: socket.socket, thread: threading.Thread) -> None:
        with self._cond:
            self._connections[connection] = thread

    def _untrack(self, connection: socket.socket, thread: threading.Thread) -> None:
        with self._cond:
            if self._connections.get(connection) is thread:
                del self._connections[connection]
            self._cond.notify_all()

    def _receive(
        self,
        method: str,
        path: str,
        body: Json | None,
        questions: tuple[str, ...],
        stream: bool,
    ) -> RequestRecord:
        with self._cond:
            record = RequestRecord(
                len(self._log) + 1, method, path, body, questions, stream, time.monotonic()
            )
            self._log.append(record)
            if path in GENERATION_PATHS:
                self._in_flight += 1
                self._peak_in_flight = max(self._peak_in_flight, self._in_flight)
                self._attempts.update(questions)
            self._cond.notify_all()
            return record

    def _finish(self, record: RequestRecord) -> None:
        with self._cond:
            record.finished_at = time.monotonic()
            if record.path in GENERATION_PATHS:
                self._in_flight -= 1
            self._cond.notify_all()

    def _pick_fault(self, path: str, question: str | None) -> Fault | None:
        with self._cond:
            now = time.monotonic()
            for fault in list(self.behaviour.faults):
                if fault._admit(path, question, now):
                    return fault
            return None

    def _hang(self) -> bool:
        """Hold until release() or stop(); True when stopped."""
        with self._cond:
            releases = self._releases
            self._hanging += 1
            self._cond.notify_all()
            try:
                self._cond.wait_for(lambda: self._stopping or self._releases != releases)
            finally:
                self._hanging -= 1
                self._cond.notify_all()
            return self._stopping

    def _sleep(self, seconds: float) -> bool:
        """Wait `seconds` unless stopped first; True when stopped."""
        return self._stopped.wait(seconds) if seconds > 0 else self._stopped.is_set()

    def _acquire_slot(self) -> float | None:
        """Queue for a concurrency slot: the time it was granted after queueing (0.0 when one
        was free at once); None when stopped first."""

        def free() -> bool:
            cap = self.behaviour.max_concurrency
            return self._stopping or cap is None or self._active < cap

        with self._cond:
            granted = 0.0 if free() else None
            self._cond.wait_for(free)
            if self._stopping:
                return None
            self._active += 1
            self._peak_active = max(self._peak_active, self._active)
            self._cond.notify_all()
            return time.monotonic() if granted is None else granted

    def _release_slot(self) -> None:
        with self._cond:
            self._active -= 1
            self._cond.notify_all()


def iter_sse(lines: Iterator[bytes]) -> Iterator[str]:
    """The `data:` payloads of an SSE byte stream (for tests reading streams with urllib)."""
    for line in lines:
        text = line.decode().rstrip("\r\n")
        if text.startswith("data: "):
            yield text[len("data: ") :]
