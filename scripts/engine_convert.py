"""Convert a Llama-family GGUF file into a Hugging Face model directory that vLLM can serve.

Run by scripts/engine-setup inside the engine's virtualenv (transformers, gguf, accelerate):

    python scripts/engine_convert.py --gguf SmolLM2-135M-Instruct.Q4_1.gguf --out DIR

transformers can load a GGUF file, but refuses to `save_pretrained` a model loaded that way. So
the file is loaded fully dequantized, its weights are copied into a plain `LlamaForCausalLM`
built from the same config (minus the `quantization_config` entry naming the GGUF file: the
saved weights are plain), and that model is saved in bfloat16 with the tokenizer and its chat
template.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GgufConfig,
    LlamaConfig,
    LlamaForCausalLM,
)


def convert(gguf: Path, out: Path, dtype: torch.dtype = torch.bfloat16) -> None:
    """Write a `save_pretrained` model directory for `gguf` into `out`."""
    # dequantize=True: with the optional `kernels` package installed, transformers would otherwise
    # keep the weights in packed GGUF blocks, which a plain model cannot take.
    source = AutoModelForCausalLM.from_pretrained(
        gguf.parent,
        gguf_file=gguf.name,
        quantization_config=GgufConfig(dequantize=True),
        dtype=torch.float32,
    )
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if not tokenizer.chat_template:
        raise SystemExit(f"{gguf} carries no chat template; the chat endpoint would not work")

    settings = source.config.to_dict()
    settings.pop("quantization_config", None)
    settings["dtype"] = dtype
    model = LlamaForCausalLM(LlamaConfig.from_dict(settings))
    # strict: every weight must be matched, or the served model would be silently wrong.
    model.load_state_dict(source.state_dict(), strict=True)
    model.to(dtype).save_pretrained(out)
    tokenizer.save_pretrained(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", type=Path, required=True, help="the GGUF file to convert")
    parser.add_argument("--out", type=Path, required=True, help="directory to create")
    args = parser.parse_args()

    start = time.monotonic()
    convert(args.gguf.resolve(), args.out)
    size = sum(f.stat().st_size for f in args.out.iterdir()) / 2**20
    seconds = time.monotonic() - start
    print(f"converted {args.gguf.name} -> {args.out} ({size:.0f} MiB) in {seconds:.1f} s")


if __name__ == "__main__":
    main()
