"""Gathering the limits: a length evalgate cannot read is never dropped in silence.

A limit the engine reports in a form evalgate cannot use is a warning (the other sources still
decide); one the user gave that cannot be read is an error naming it (exit 2), since the
user named it because it matters. And the pure parts: the cautious token estimate and the
merge of the limit /tokenize reports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from evalgate.context.limits import (
    estimate_tokens,
    load_native_max_len,
    longest_prompt_tokens,
    merge_tokenize_limit,
    native_max_len,
)
from evalgate.engine.discovery import TokenCount
from evalgate.engine.served import counted
from evalgate.errors import (
    ContextError,
)
from evalgate.evidence.model import Limit
from evalgate.tasks.dataset import load_dataset
from evalgate.tasks.spec import Prompt, build_prompts, load_task
from tests.conftest import (
    QUICK,
    gate,
    json_scalars,
)
from tests.fakeengine import EngineBehaviour, FakeEngine, Fault

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


# evalgate.context.limits: vLLM 0.32's native maximum length, on real models' config.json files.
#
# The files under tests/data/model_configs/ are the published config.json of each model. The
# expected values of the real models and of the rule table were checked against vLLM 0.32.0 itself
# (transformers' AutoConfig, then vLLM's ``derive_max_model_len_and_key`` and
# ``_get_and_verify_max_len`` on the same dict); where evalgate departs from vLLM on purpose (no
# length key: "unknown", not 2048), the test says so.

CONFIGS = Path(__file__).parent / "data" / "model_configs"


def config(name: str) -> dict[str, Any]:
    """A real model's config.json, parsed (a fresh copy each time)."""
    return json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8"))


def llama2(**changes: Any) -> dict[str, Any]:
    """Llama-2-7b's config (max_position_embeddings 4096, no rope scaling) with changes."""
    return {**config("llama-2-7b-hf"), **changes}


def write_model_dir(folder: Path, cfg: dict[str, Any], tokenizer: dict[str, Any] | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    if tokenizer is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    return folder


REAL_MODELS = [
    # (file, native max, source, a step the user reads with --explain)
    (
        "llama-3.1-8b-instruct",
        131072,
        "config max_position_embeddings",
        "rope type llama3: length already scaled, factor ignored",
    ),
    (
        # DeepSeek-R1 spells the rope type with the legacy "type" key: {"type": "yarn"}.
        "deepseek-r1",
        163840,
        "config max_position_embeddings",
        "rope type yarn: length already scaled, factor ignored",
    ),
    (
        "gpt-oss-120b",
        131072,
        "config max_position_embeddings",
        "rope type yarn: length already scaled, factor ignored",
    ),
    (
        # Multimodal: the lengths live in text_config (llama3 rope, factor 16 not applied).
        "llama-4-scout-17b-16e-instruct",
        10485760,
        "config max_position_embeddings",
        "read the nested text_config",
    ),
    ("gpt2", 1024, "config n_positions", "smallest length key: n_positions=1024"),
    (
        "c4ai-command-r-v01",
        131072,
        "config model_max_length",
        "model_max_length=131072 wins outright",
    ),
    ("llama-2-7b-hf", 4096, "config max_position_embeddings", "max_position_embeddings=4096"),
]


@pytest.mark.unit
@pytest.mark.parametrize(("name", "expected", "source", "step"), REAL_MODELS)
def test_real_model_config_file(name, expected, source, step):
    found = load_native_max_len(CONFIGS / f"{name}.json")

    assert found.value == expected
    assert found.source == f"{name}.json: {source}"
    assert any(step in line for line in found.steps), found.steps


RULES = [
    # (case, config, expected, a step that must be shown)
    (
        "linear x4 (legacy 'type' key) multiplies",
        llama2(rope_scaling={"type": "linear", "factor": 4.0}),
        16384,
        "rope type linear x4 -> 16384",
    ),
    (
        "linear x4 (rope_type key) multiplies",
        llama2(rope_scaling={"rope_type": "linear", "factor": 4.0}),
        16384,
        "rope type linear x4 -> 16384",
    ),
    (
        "dynamic x2 (legacy 'type' key) multiplies",
        llama2(rope_scaling={"type": "dynamic", "factor": 2.0}),
        8192,
        "rope type dynamic x2 -> 8192",
    ),
    (
        "dynamic x2 (rope_type key) multiplies",
        llama2(rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
        8192,
        "rope type dynamic x2 -> 8192",
    ),
    (
        "transformers 5 spelling: rope_parameters",
        {
            **{k: v for k, v in llama2().items() if k != "rope_scaling"},
            "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0},
        },
        16384,
        "rope type linear x4 -> 16384",
    ),
    (
        "default rope without a factor leaves the length alone",
        llama2(rope_scaling={"rope_type": "default"}),
        4096,
        "smallest length key: max_position_embeddings=4096",
    ),
    (
        "the smallest length key wins",
        llama2(seq_length=2048),
        2048,
        "smallest length key: seq_length=2048",
    ),
    (
        "the smallest key, then the rope factor",
        llama2(max_sequence_length=2048, rope_scaling={"type": "linear", "factor": 4.0}),
        8192,
        "rope type linear x4 -> 8192",
    ),
    (
        "model_max_length wins even when larger than the rest",
        llama2(model_max_length=65536),
        65536,
        "model_max_length=65536 wins outright",
    ),
    (
        "deepseek_yarn is already scaled",
        llama2(rope_scaling={"rope_type": "deepseek_yarn", "factor": 40}),
        4096,
        "rope type deepseek_yarn: length already scaled, factor ignored",
    ),
]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("cfg", "expected", "step"), [case[1:] for case in RULES], ids=[case[0] for case in RULES]
)
def test_native_rules(cfg, expected, step):
    found = native_max_len(cfg)

    assert found.value == expected
    assert step in found.steps, found.steps


@pytest.mark.unit
def test_gemma3_never_multiplies_the_rope_factor():
    # Gemma 3 12B as transformers re-saves it: text_config spelled out, linear rope x8.
    cfg = config("gemma-3-12b-it")
    cfg["text_config"]["max_position_embeddings"] = 131072

    found = native_max_len(cfg, name="config.json")

    assert found.value == 131072  # not 1048576
    assert "config.json: rope factor 8 ignored for gemma3_text" in found.steps


@pytest.mark.unit
def test_gemma3_as_published_has_no_length_key_and_is_reported_unknown():
    # google/gemma-3-12b-it's config.json leaves max_position_embeddings to the transformers
    # class default (vLLM then derives 131072). evalgate reads only the file: it says "unknown"
    # and lets the served limit decide, rather than guessing.
    found = native_max_len(config("gemma-3-12b-it"))

    assert found.value is None
    assert found.source == "no length key"
    assert any("no length key" in step for step in found.steps)


@pytest.mark.unit
def test_no_length_key_is_unknown_not_2048():
    found = native_max_len({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})

    assert found.value is None
    assert found.source == "no length key"


@pytest.mark.unit
def test_a_boolean_is_not_a_length():
    found = native_max_len({"model_type": "x", "max_position_embeddings": True, "seq_length": 8})

    assert found.value == 8


@pytest.mark.unit
def test_steps_name_the_file_they_read():
    found = native_max_len(config("gpt2"), name="config.json")

    assert found.steps == ("config.json: smallest length key: n_positions=1024",)


@pytest.mark.unit
def test_directory_reads_its_config_json(tmp_path):
    # Llama 3.1's own tokenizer_config.json says 131072, the same as its config.
    folder = write_model_dir(
        tmp_path / "Llama-3.1-8B-Instruct",
        config("llama-3.1-8b-instruct"),
        {"model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast"},
    )

    found = load_native_max_len(folder)

    assert found.value == 131072
    assert found.source == "config.json: config max_position_embeddings"


@pytest.mark.unit
def test_directory_without_tokenizer_config(tmp_path):
    folder = write_model_dir(tmp_path / "gpt2", config("gpt2"), None)

    assert load_native_max_len(folder).value == 1024


@pytest.mark.unit
def test_tokenizer_model_max_length_sentinel_changes_nothing(tmp_path):
    # transformers writes VERY_LARGE_INTEGER when a tokenizer has no limit.
    folder = write_model_dir(
        tmp_path / "Llama-2-7b-hf", config("llama-2-7b-hf"), {"model_max_length": int(1e30)}
    )

    assert load_native_max_len(folder).value == 4096


@pytest.mark.unit
@pytest.mark.parametrize(
    ("cfg", "tokenizer", "expected"),
    [
        # DeepSeek-R1's published tokenizer_config.json carries model_max_length 16384;
        # vLLM 0.32 serves it at 163840 without --max-model-len.
        (
            config("deepseek-r1"),
            {"model_max_length": 16384, "tokenizer_class": "LlamaTokenizerFast"},
            163840,
        ),
        (llama2(rope_scaling={"type": "linear", "factor": 4.0}), {"model_max_length": 4096}, 16384),
    ],
    ids=["deepseek-r1", "linear-x4-with-tokenizer-4096"],
)
def test_generative_model_ignores_tokenizer_model_max_length(tmp_path, cfg, tokenizer, expected):
    folder = write_model_dir(tmp_path / "model", cfg, tokenizer)

    assert load_native_max_len(folder).value == expected


@pytest.mark.unit
def test_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "nowhere" / "config.json"

    with pytest.raises(ContextError) as caught:
        load_native_max_len(missing)

    assert str(missing) in caught.value.message
    assert "--model-config" in caught.value.message
    assert caught.value.exit_code == 2


@pytest.mark.unit
def test_directory_without_config_json_names_the_file_it_looked_for(tmp_path):
    with pytest.raises(ContextError) as caught:
        load_native_max_len(tmp_path)

    assert f"No model config at {tmp_path / 'config.json'}" in caught.value.message


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"max_position_embeddings": 4096,', "is not valid JSON (line 1"),
        ("", "is not valid JSON (line 1"),
        ("[4096]", "holds a JSON list, not an object"),
        ('"4096"', "holds a JSON str, not an object"),
    ],
    ids=["truncated", "empty", "array", "string"],
)
def test_unreadable_config_names_the_path(tmp_path, text, says):
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(ContextError) as caught:
        load_native_max_len(path)

    assert f"{path} " in caught.value.message
    assert says in caught.value.message
    assert "model's own config.json" in caught.value.message


# A /tokenize that resets: the cautious estimate sizes the budget, and the run leaves a result.


@pytest.mark.usefixtures("nineteen_of_twenty")
@pytest.mark.loopback
def test_a_reset_on_tokenize_still_leaves_a_result(engine, tmp_path):
    engine.inject(Fault("reset", paths={"/tokenize"}))

    run = gate(engine, tmp_path / "run")

    # No token counts from the engine: the cautious estimate sizes the budget, and says so.
    assert run.doc["status"] in ("pass", "fail")
    assert run.doc["context"]["prompt_tokens"]["source"].startswith("estimate")


# Any model config gives a positive length or a context error, never a crash.


configs = st.fixed_dictionaries(
    {},
    optional={
        "max_position_embeddings": json_scalars | st.integers(1, 1 << 20),
        "model_max_length": json_scalars,
        "seq_length": st.integers(1, 1 << 20) | st.floats(),
        "rope_scaling": st.fixed_dictionaries(
            {},
            optional={
                "factor": json_scalars | st.floats(0.5, 8),
                "rope_type": st.sampled_from(["linear", "yarn", "dynamic", ""]),
            },
        )
        | json_scalars,
        "model_type": st.sampled_from(["llama", "gemma3"]),
    },
)


@QUICK
@example({"max_position_embeddings": 4096, "rope_scaling": {"factor": "x"}})
@given(configs | st.builds(lambda c: {"text_config": c}, configs))
@pytest.mark.unit
def test_a_model_config_gives_a_positive_length_or_a_context_error(config):
    try:
        native = native_max_len(config, name="config.json")
    except ContextError:
        return
    assert native.value is None or native.value > 0
