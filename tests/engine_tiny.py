"""Tiny random-weight models of every architecture the engine supports, and a character tokenizer.

Nothing is downloaded: each model is built from a small config with seeded random weights.
"""

from __future__ import annotations

import string

import conftest

VOCAB_CHARS = string.digits + string.ascii_letters + " +-*=#.,:?!\n"

# (family, builder) pairs; each config: 4 layers, hidden 32, vocab ~100; sliding windows short (6) so
# prompts of ~10 tokens plus generation cross them.
ARCHS = ["llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "gemma2", "gemma3", "phi3",
         "gpt2", "gpt_neox", "olmo2"]


def char_tokenizer():
    return conftest.char_tokenizer(VOCAB_CHARS)


VOCAB = 4 + len(VOCAB_CHARS)  # 80 < 97: the model's vocab is a bit larger than the tokenizer's


def config(arch: str, layers: int = 4):
    import transformers as T

    common = dict(
        vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=layers, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, bos_token_id=1, eos_token_id=2, pad_token_id=0,
        tie_word_embeddings=False, initializer_range=0.2,
    )
    alt = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    if arch == "llama":
        return T.LlamaConfig(**common)
    if arch == "mistral":
        return T.MistralConfig(**common, sliding_window=6)
    if arch == "qwen2":
        return T.Qwen2Config(**common, use_sliding_window=True, sliding_window=6, max_window_layers=layers // 2)
    if arch == "qwen3":
        return T.Qwen3Config(**common, head_dim=8)
    if arch == "qwen2_moe":
        return T.Qwen2MoeConfig(**common, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                                shared_expert_intermediate_size=32, decoder_sparse_step=1, mlp_only_layers=[1])
    if arch == "qwen3_moe":
        return T.Qwen3MoeConfig(**common, head_dim=8, num_experts=4, num_experts_per_tok=2,
                                moe_intermediate_size=16, decoder_sparse_step=1, mlp_only_layers=[2])
    if arch == "gemma2":
        return T.Gemma2Config(**common, head_dim=8, sliding_window=6, layer_types=alt)
    if arch == "gemma3":
        return T.Gemma3TextConfig(**common, head_dim=8, sliding_window=6, layer_types=alt)
    if arch == "phi3":
        return T.Phi3Config(**common)
    if arch == "olmo2":
        return T.Olmo2Config(**common)
    if arch == "gpt2":
        return T.GPT2Config(vocab_size=97, n_embd=32, n_layer=layers, n_head=4, n_positions=256, bos_token_id=1,
                            eos_token_id=2, pad_token_id=0, initializer_range=0.2)
    if arch == "gpt_neox":
        return T.GPTNeoXConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                               num_attention_heads=4, max_position_embeddings=256, bos_token_id=1, eos_token_id=2,
                               pad_token_id=0, rotary_pct=0.5, initializer_range=0.2)
    raise KeyError(arch)


def build_model(arch: str, layers: int = 4, seed: int = 0):
    import torch
    from transformers import AutoModelForCausalLM

    from reachtui.model.load import quiet_transformers

    quiet_transformers()
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config(arch, layers))
    # Random init leaves some weights tiny (e.g. zero-initialised norms in Gemma); perturb everything a bit
    # so that every layer matters and greedy paths differ between routes.
    with torch.no_grad():
        g = torch.Generator().manual_seed(seed + 1)
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.02)
    return model.eval()


def loaded(arch: str, layers: int = 4, seed: int = 0):
    from reachtui.model.layers import discover
    from reachtui.model.load import LoadedModel

    model = build_model(arch, layers, seed)
    return LoadedModel(name=f"tiny-{arch}", path=None, model=model, tokenizer=char_tokenizer(), device="cpu",
                       dtype="float32", arch=discover(model))


def recompute_greedy(lm, prompt, route, silenced=frozenset(), new=8):
    """Greedy tokens of `lm` under (route, silenced) by a full forward over the whole sequence at every step
    (no cache): the reference a cached, routed generation must equal. EOS is token 2."""
    import torch

    from reachtui.model import routing

    ids = lm.tokenizer(prompt, return_tensors="pt").input_ids
    seq = ids
    with routing.installed(lm.arch, route, silenced, force=True), torch.inference_mode():
        for _ in range(new):
            nxt = routing.forward_full_logits(lm.model, seq)[:, -1].argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], dim=1)
            if nxt.item() == 2:
                break
    return seq[0, ids.shape[1]:].tolist()

