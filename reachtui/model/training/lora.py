"""Make a LoRA adapter of the demo model with peft: a few optimizer steps on arithmetic problems that are
not in the demo task, saved as an adapter directory (`adapter_config.json` + `adapter_model.safetensors`)
that `reachtui audit DIR` opens as a model (its base merged with it).

    pip install 'reachtui[peft]'
    python -m reachtui.model.training.lora --out demo-lora            # 8 steps, a few seconds on a CPU

It exists so that a fine-tuned checkpoint as people get them (an adapter, not full weights) can be tried
on the demo model, and so the tests train one with the real library. The adapter's base is recorded as
`demo` (the bundled model, found wherever reachtui is installed), or `--base PATH` for the same weights
read from a directory. A fixed seed and one thread make the run repeatable on the same CPU.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from reachtui.assets import DEMO_MODEL_DIR
from reachtui.tasks.demo import training_items
from reachtui.model.training.examples import encode_examples, pad_batch

#: LoRA on attention (q, v) and on the MLP's down projection: an MLP block silenced in an audit silences
#: the adapter's share of it too (merged, it is one weight).
TARGETS = ["q_proj", "v_proj", "down_proj"]


def train_lora(out: Path, *, steps: int = 8, batch_size: int = 16, lr: float = 3e-3, rank: int = 8, seed: int = 7,
               base: str = "demo", threads: int = 1) -> dict:
    """Train and save the adapter at `out`; returns what it did (steps, the loss before and after)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reachtui.model.load import quiet_transformers

    quiet_transformers()          # no progress bar, no deprecation warnings: its one line of output is its result
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(DEMO_MODEL_DIR)
    model = AutoModelForCausalLM.from_pretrained(DEMO_MODEL_DIR, dtype=torch.float32)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=TARGETS, task_type="CAUSAL_LM")
    model = get_peft_model(model, config)
    examples = encode_examples(tok, training_items(steps * batch_size, seed=seed))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    losses = []
    for step in range(steps):
        batch = examples[step * batch_size:(step + 1) * batch_size]
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        ids, labels, mask = pad_batch(batch, pad)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(round(float(loss.detach()), 4))
    model.eval()
    model.peft_config["default"].base_model_name_or_path = base     # what `reachtui` finds the base by
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True, save_embedding_layers=False)
    return dict(steps=steps, batch_size=batch_size, lr=lr, rank=rank, targets=TARGETS, seed=seed, base=base,
                loss_first=losses[0], loss_last=losses[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m reachtui.model.training.lora", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="The adapter directory to write.")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--base", default="demo", help="The base as the adapter records it: demo or a directory.")
    args = parser.parse_args(argv)
    info = train_lora(args.out, steps=args.steps, lr=args.lr, rank=args.rank, seed=args.seed, base=args.base)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
