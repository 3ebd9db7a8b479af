"""evalgate.context.limits: vLLM 0.32's native maximum length, on real models' config.json files.

The files under tests/data/model_configs/ are the published config.json of each model. The
expected values of the real models and of the rule table were checked against vLLM 0.32.0 itself
(transformers' AutoConfig, then vLLM's ``derive_max_model_len_and_key`` and
``_get_and_verify_max_len`` on the same dict); where evalgate departs from vLLM on purpose (no
length key: "unknown", not 2048), the test says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.context.limits import load_native_max_len, native_max_len
from evalgate.errors import ContextError

pytestmark = pytest.mark.unit

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


# -- real models, read from their files -----------------------------------------------------

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


@pytest.mark.parametrize(("name", "expected", "source", "step"), REAL_MODELS)
def test_real_model_config_file(name, expected, source, step):
    found = load_native_max_len(CONFIGS / f"{name}.json")

    assert found.value == expected
    assert found.source == f"{name}.json: {source}"
    assert any(step in line for line in found.steps), found.steps


# -- the rules, one variation at a time -----------------------------------------------------

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


@pytest.mark.parametrize(
    ("cfg", "expected", "step"), [case[1:] for case in RULES], ids=[case[0] for case in RULES]
)
def test_native_rules(cfg, expected, step):
    found = native_max_len(cfg)

    assert found.value == expected
    assert step in found.steps, found.steps


def test_gemma3_never_multiplies_the_rope_factor():
    # Gemma 3 12B as transformers re-saves it: text_config spelled out, linear rope x8.
    cfg = config("gemma-3-12b-it")
    cfg["text_config"]["max_position_embeddings"] = 131072

    found = native_max_len(cfg, name="config.json")

    assert found.value == 131072  # not 1048576
    assert "config.json: rope factor 8 ignored for gemma3_text" in found.steps


def test_gemma3_as_published_has_no_length_key_and_is_reported_unknown():
    # google/gemma-3-12b-it's config.json leaves max_position_embeddings to the transformers
    # class default (vLLM then derives 131072). evalgate reads only the file: it says "unknown"
    # and lets the served limit decide, rather than guessing.
    found = native_max_len(config("gemma-3-12b-it"))

    assert found.value is None
    assert found.source == "no length key"
    assert any("no length key" in step for step in found.steps)


def test_no_length_key_is_unknown_not_2048():
    found = native_max_len({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})

    assert found.value is None
    assert found.source == "no length key"


def test_a_boolean_is_not_a_length():
    found = native_max_len({"model_type": "x", "max_position_embeddings": True, "seq_length": 8})

    assert found.value == 8


def test_steps_name_the_file_they_read():
    found = native_max_len(config("gpt2"), name="config.json")

    assert found.steps == ("config.json: smallest length key: n_positions=1024",)


# -- a model directory ----------------------------------------------------------------------


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


def test_directory_without_tokenizer_config(tmp_path):
    folder = write_model_dir(tmp_path / "gpt2", config("gpt2"), None)

    assert load_native_max_len(folder).value == 1024


def test_tokenizer_model_max_length_sentinel_changes_nothing(tmp_path):
    # transformers writes VERY_LARGE_INTEGER when a tokenizer has no limit.
    folder = write_model_dir(
        tmp_path / "Llama-2-7b-hf", config("llama-2-7b-hf"), {"model_max_length": int(1e30)}
    )

    assert load_native_max_len(folder).value == 4096


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


# -- errors the user sees -------------------------------------------------------------------


def test_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "nowhere" / "config.json"

    with pytest.raises(ContextError) as caught:
        load_native_max_len(missing)

    assert str(missing) in caught.value.message
    assert "--model-config" in caught.value.message
    assert caught.value.exit_code == 2


def test_directory_without_config_json_names_the_file_it_looked_for(tmp_path):
    with pytest.raises(ContextError) as caught:
        load_native_max_len(tmp_path)

    assert f"No model config at {tmp_path / 'config.json'}" in caught.value.message


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
