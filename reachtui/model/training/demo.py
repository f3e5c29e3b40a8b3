"""Train the bundled demo model from scratch: a tiny character-level LlamaForCausalLM that solves the
demo arithmetic word problems (reachtui.tasks.demo) — sometimes.

    python -m reachtui.model.training.demo --out assets/models/demo

Deterministic for a given seed and step count (fixed data stream, fixed schedule): on the same kind
of CPU, rerunning the default command reproduces the shipped `model.safetensors` byte for byte, and the
weights do not depend on the torch thread count (1 and 2 threads gave identical bytes). The default is
two threads (fastest on 2 idle cores); on a 2-core machine shared with other jobs, `--threads 1` is
several times faster than 2 and gives the same model. The training stream comes from
`reachtui.tasks.demo.training_items`, which never yields a question of the shipped demo task. The loss
is on the answer only (the worked solution, the closing newline and EOS), not on the question.

The result is saved with `save_pretrained(safe_serialization=True)` (float32) together with a
character-level `PreTrainedTokenizerFast` (tokenizer.json), and loads offline with
`AutoModelForCausalLM.from_pretrained` / `AutoTokenizer.from_pretrained`.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

from reachtui.tasks.demo import PROMPT_TEMPLATE, TRAIN_SEED, training_items
from reachtui.model.training.examples import batches, encode_examples, held_out_items, quick_eval

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = [PAD, BOS, EOS, UNK]
# Every printable ASCII character plus newline: any ASCII question tokenizes without <unk>.
ALPHABET = ["\n"] + [chr(c) for c in range(32, 127)]

DEFAULTS = dict(
    layers=8, hidden=128, heads=4, intermediate=448, max_positions=512,
    steps=2000, batch_size=16, lr=2e-3, warmup=100, min_lr_frac=0.1, weight_decay=0.01,
    seed=TRAIN_SEED, threads=2,
)


def build_tokenizer():
    """A character-level PreTrainedTokenizerFast: one token per character, no BOS added."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + ALPHABET)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD, unk_token=UNK,
        clean_up_tokenization_spaces=False, model_max_length=DEFAULTS["max_positions"],
        padding_side="left",
    )
    return fast


def build_model(vocab_size: int, tokenizer, *, layers: int, hidden: int, heads: int, intermediate: int,
                max_positions: int):
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=intermediate,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
        max_position_embeddings=max_positions, rms_norm_eps=1e-5, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, initializer_range=0.02,
    )
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, max_new_tokens=48, do_sample=False,
    )
    return model


def train(out: Path, *, steps: int, batch_size: int, lr: float, warmup: int, min_lr_frac: float,
          weight_decay: float, seed: int, threads: int, layers: int, hidden: int, heads: int,
          intermediate: int, max_positions: int, eval_every: int = 0, eval_n: int = 200,
          log_every: int = 100) -> dict:
    import torch

    t0 = time.time()
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = random.Random(seed)

    tokenizer = build_tokenizer()
    model = build_model(len(tokenizer), tokenizer, layers=layers, hidden=hidden, heads=heads,
                        intermediate=intermediate, max_positions=max_positions)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {layers} layers, hidden {hidden}, {n_params:,} parameters; vocab {len(tokenizer)}", flush=True)

    items = training_items(steps * batch_size, seed=seed)
    examples = encode_examples(tokenizer, items)
    held_out = held_out_items(eval_n, seed + 10_000, {it.question for it in items}) if eval_every else []
    print(f"data: {len(examples):,} examples, {sum(len(e[0]) for e in examples):,} tokens "
          f"({time.time() - t0:.1f}s)", flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.98), eps=1e-8)

    def lr_at(step: int) -> float:
        if step < warmup:
            return lr * (step + 1) / warmup
        frac = (step - warmup) / max(1, steps - warmup)
        return lr * (min_lr_frac + (1 - min_lr_frac) * 0.5 * (1 + math.cos(math.pi * frac)))

    model.train()
    t_train, cpu_train = time.time(), time.process_time()
    running = 0.0
    history = []
    for step, (ids, labels, mask) in enumerate(batches(examples, batch_size, rng, tokenizer.pad_token_id)):
        if step >= steps:
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running += loss.item()
        if (step + 1) % log_every == 0:
            print(f"step {step + 1}/{steps} loss {running / log_every:.4f} lr {lr_at(step):.2e} "
                  f"{time.time() - t_train:.0f}s", flush=True)
            history.append((step + 1, round(running / log_every, 4)))
            running = 0.0
        if eval_every and (step + 1) % eval_every == 0:
            acc = quick_eval(model, tokenizer, held_out)
            print(f"  eval step {step + 1}: greedy {acc:.1%} on {len(held_out)} held-out", flush=True)
    train_s, train_cpu_s = time.time() - t_train, time.process_time() - cpu_train

    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer._tokenizer.no_padding()   # evaluation's padded calls must not leak into tokenizer.json
    tokenizer.save_pretrained(out)
    info = dict(steps=steps, batch_size=batch_size, lr=lr, warmup=warmup, min_lr_frac=min_lr_frac,
                weight_decay=weight_decay, seed=seed, threads=threads, layers=layers, hidden=hidden,
                heads=heads, intermediate=intermediate, params=n_params, train_seconds=round(train_s, 1), train_cpu_seconds=round(train_cpu_s, 1),
                total_seconds=round(time.time() - t0, 1), torch=torch.__version__,
                prompt_template=PROMPT_TEMPLATE, loss_history=history)
    print(json.dumps({k: v for k, v in info.items() if k != "loss_history"}), flush=True)
    return info


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m reachtui.model.training.demo", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="directory to save the model and tokenizer in")
    for key in ("steps", "batch_size", "warmup", "seed", "threads", "layers", "hidden", "heads",
                "intermediate", "max_positions"):
        ap.add_argument("--" + key.replace("_", "-"), type=int, default=DEFAULTS[key])
    for key in ("lr", "min_lr_frac", "weight_decay"):
        ap.add_argument("--" + key.replace("_", "-"), type=float, default=DEFAULTS[key])
    ap.add_argument("--eval-every", type=int, default=0, help="greedy accuracy on held-out problems every N steps")
    ap.add_argument("--eval-n", type=int, default=200)
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--info", type=Path, default=None, help="write the training record (JSON) here")
    args = vars(ap.parse_args(argv))
    out, info_path = args.pop("out"), args.pop("info")
    info = train(out, **args)
    if info_path:
        info_path.write_text(json.dumps(info, indent=1) + "\n")


if __name__ == "__main__":
    main()
