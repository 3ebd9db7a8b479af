"""Gathering the limits: a length evalgate cannot read is never dropped in silence.

A limit the engine reports in a form evalgate cannot use is a warning (the other sources still
decide); one the user gave that cannot be read is an error naming it (exit 2), since the
user named it because it matters. And the pure parts: the cautious token estimate and the
merge of the limit /tokenize reports.
"""

from __future__ import annotations

import json

import pytest

from evalgate.context.limits import estimate_tokens, longest_prompt_tokens, merge_tokenize_limit
from evalgate.engine.discovery import TokenCount
from evalgate.engine.served import counted
from evalgate.evidence.model import Limit
from evalgate.tasks.dataset import load_dataset
from evalgate.tasks.spec import Prompt, build_prompts, load_task
from tests.fakeengine import EngineBehaviour, FakeEngine

CONTEXT = ["context", "--isl", "1024", "--osl", "1024", "--format", "json"]


@pytest.mark.loopback
@pytest.mark.parametrize("listed", ["9472", -1, 0, 9472.5, True, None], ids=repr)
def test_an_unreadable_max_model_len_on_v1_models_is_warned_not_dropped(cli, listed):
    behaviour = EngineBehaviour(max_model_len=4096, listed_max_model_len=listed)
    if listed is None:
        behaviour.list_max_model_len = False  # no field at all: TensorRT-LLM, not a problem
    with FakeEngine(behaviour) as engine:
        done = cli(*CONTEXT, "--base-url", engine.url, "--model", "fake-model")

    assert done.code == 0, done.err
    document = json.loads(done.out)
    sources = [limit["source"] for limit in document["served"]]
    assert "/v1/models of the endpoint" not in sources
    warned = [w for w in document["warnings"] if "max_model_len" in w and "ignored" in w]
    if listed is None:
        assert warned == []
    else:
        assert warned == [
            f"/v1/models of the endpoint reports max_model_len {listed!r} for fake-model, "
            "not a positive whole number: ignored"
        ]
        assert f"warning: {warned[0]}" in done.err


@pytest.mark.unit
@pytest.mark.parametrize(
    "args",
    [
        "--max-model-len abc",
        "--max-model-len=abc",
        "--max-model-len 8k9 --port 1",
        "--max-model-len",
    ],
)
def test_a_server_argument_length_that_cannot_be_read_is_an_error(cli, args):
    done = cli(*CONTEXT, "--served-max-model-len", "4096", f"--decode-server-config={args}")

    assert done.code == 2
    assert "ContextError: DECODE_SERVER_CONFIG holds --max-model-len" in done.err
    assert "not a number of tokens" in done.err


@pytest.mark.unit
def test_a_model_config_without_a_usable_length_key_is_an_error(cli, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096}))

    done = cli(*CONTEXT, "--served-max-model-len", "4096", "--model-config", str(config))

    assert done.code == 2
    assert f"ContextError: The model config {config} has none of the length keys" in done.err
    assert "--eval-max-model-len" in done.err
    assert done.out == ""


def chat(*contents: str) -> Prompt:
    return Prompt(0, tuple({"role": "user", "content": c} for c in contents), None)


def text(value: str) -> Prompt:
    return Prompt(0, None, value)


ESTIMATES = [
    # (case, prompt, tokens): UTF-8 bytes / 3, rounded up, + 16 per chat turn and the reply's
    ("empty text", text(""), 0),
    ("3 bytes", text("abc"), 1),
    ("4 bytes round up", text("abcd"), 2),
    ("a 2-byte character", text("é"), 1),
    ("a 4-byte emoji and 2 letters", text("\U0001f600ab"), 2),
    ("one chat turn", chat("abc"), 1 + 2 * 16),
    ("two chat turns", chat("abc", "abc"), 2 + 3 * 16),
    ("empty chat turns still cost their overhead", chat("", ""), 3 * 16),
]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("prompt", "tokens"), [c[1:] for c in ESTIMATES], ids=[c[0] for c in ESTIMATES]
)
def test_estimate_tokens(prompt, tokens):
    assert estimate_tokens(prompt) == tokens


@pytest.mark.unit
@pytest.mark.parametrize(
    ("api", "tokens", "measured"), [("chat", 2045, 1853), ("completions", 1698, 1663)]
)
def test_the_longest_gsm8k_prompt_is_estimated_above_its_real_length(api, tokens, measured):
    """Question 314's 5-shot prompt, the longest by the estimate: `measured` tokens by
    SmolLM2's tokenizer and chat template (vLLM's /tokenize); a cautious estimate stays above."""
    dataset = load_dataset()
    prompts = build_prompts(load_task(api), dataset.test, dataset.train, None)

    longest = max(prompts, key=estimate_tokens)

    assert (longest.doc_id, estimate_tokens(longest)) == (314, tokens)
    assert tokens > measured


ROUTER = Limit(3072, "/v1/models of the endpoint")
DECODE = Limit(1536, "/tokenize of the endpoint")
MERGES = [
    # (case, served, told by /tokenize, served after the merge)
    ("nothing told", [ROUTER], None, [ROUTER]),
    ("a new value is the decode's, added", [ROUTER], DECODE, [ROUTER, DECODE]),
    ("a value already seen is not repeated", [ROUTER], Limit(3072, "/tokenize"), [ROUTER]),
    (
        "seen from another source",
        [ROUTER, Limit(1536, "--served-max-model-len")],
        DECODE,
        [ROUTER, Limit(1536, "--served-max-model-len")],
    ),
    ("no other source at all", [], DECODE, [DECODE]),
]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("served", "told", "merged"), [c[1:] for c in MERGES], ids=[c[0] for c in MERGES]
)
def test_merge_tokenize_limit(served, told, merged):
    assert merge_tokenize_limit(served, told) == merged


class Tokenizer:
    """An engine's POST /tokenize: counts by prompt, and the max_model_len it reports."""

    def __init__(self, counts: dict[int, int | None], max_model_len: int | None) -> None:
        self.counts = counts
        self.max_model_len = max_model_len

    def count_tokens(self, model: str, prompt: Prompt) -> TokenCount | None:
        count = self.counts[prompt.doc_id]
        return None if count is None else TokenCount(count, self.max_model_len)


CANDIDATES = [Prompt(1, None, "a" * 30), Prompt(2, None, "b" * 60), Prompt(3, None, "c" * 45)]
COUNTS = [
    # (case, counts by doc, max_model_len told, (tokens, source, doc), limit told)
    (
        "counted: the longest in the engine's tokens",
        {1: 50, 2: 40, 3: 45},
        1536,
        (50, "/tokenize", 1),
        Limit(1536, "/tokenize of the endpoint"),
    ),
    ("counted, no length told", {1: 5, 2: 9, 3: 7}, None, (9, "/tokenize", 2), None),
    (
        "one prompt not counted: all estimated",
        {1: 50, 2: None, 3: 45},
        1536,
        (20, "estimate: UTF-8 bytes / 3 + chat-turn overhead", 2),
        None,
    ),
]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("counts", "told", "longest", "limit"), [c[1:] for c in COUNTS], ids=[c[0] for c in COUNTS]
)
def test_longest_prompt_tokens(counts, told, longest, limit):
    found = counted(Tokenizer(counts, told), "m", CANDIDATES)  # type: ignore[arg-type]  # duck-typed EngineInfo
    tokens, prompt, reported = longest_prompt_tokens(found, CANDIDATES)

    assert (tokens.value, tokens.source, prompt.doc_id) == longest
    assert reported == limit


@pytest.mark.unit
def test_no_endpoint_means_the_estimate():
    tokens, prompt, reported = longest_prompt_tokens([], CANDIDATES)

    assert (tokens.value, prompt.doc_id, reported) == (20, 2, None)
