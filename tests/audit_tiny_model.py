"""A tiny random-weight Llama with a character tokenizer, saved as a model directory (for audit CLI tests
that must not wait for, or depend on, the trained demo model). Seeded: the same directory every time."""

from __future__ import annotations

import string
from pathlib import Path

CHARS = string.digits + string.ascii_letters + " +-*=#.,:?!\n"


def build(out: Path, layers: int = 6, seed: int = 0) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from conftest import char_tokenizer

    out = Path(out)
    if (out / "config.json").is_file():
        return out
    tokenizer = char_tokenizer(CHARS)
    vocab = tokenizer.get_vocab()
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False,
                      initializer_range=0.3)
    model = LlamaForCausalLM(cfg).eval()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


if __name__ == "__main__":
    import sys

    print(build(Path(sys.argv[1])))
