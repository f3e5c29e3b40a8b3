"""How long TRL's GRPO takes per step on the demo model on this CPU: the measurement behind GRPO being
the recipe of `demo-tuned` (reachtui/model/training/tuned.py). Needs `pip install 'reachtui[train]'`:

    python tests/bench/time_grpo_trl.py --steps 4

Prints seconds per GRPO step (8 prompts x 8 generations, completions up to 48 tokens, as the shipped
recipe) and what the shipped 60 steps then take."""

from __future__ import annotations

import argparse
import tempfile
import time

from reachtui.assets import DEMO_MODEL_DIR
from reachtui.tasks.demo import format_prompt, training_items
from reachtui.grading import grade


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(args.threads)
    items = training_items(8 * args.steps, seed=11)
    gold = {format_prompt(it.question): str(it.answer) for it in items}
    data = Dataset.from_list([{"prompt": p} for p in gold])   # datasets 5.2 fails here: use <5 (the extra pins it)

    def reward(prompts, completions, **_):
        return [float(grade(c.split("\n", 1)[0], gold[p]).correct) for p, c in zip(prompts, completions)]

    tok = AutoTokenizer.from_pretrained(DEMO_MODEL_DIR)
    model = AutoModelForCausalLM.from_pretrained(DEMO_MODEL_DIR)
    with tempfile.TemporaryDirectory() as out:
        cfg = GRPOConfig(output_dir=out, per_device_train_batch_size=64, num_generations=8,
                         max_completion_length=48, learning_rate=5e-5, max_steps=args.steps, logging_steps=1,
                         report_to=[], use_cpu=True, save_strategy="no", temperature=1.0, beta=0.04,
                         dataloader_num_workers=0)
        trainer = GRPOTrainer(model=model, reward_funcs=reward, args=cfg, train_dataset=data,
                              processing_class=tok)
        t0 = time.perf_counter()
        trainer.train()
        took = time.perf_counter() - t0
    per_step = took / args.steps
    print(f"TRL GRPO: {args.steps} steps of 8 prompts x 8 generations in {took:.1f} s: {per_step:.1f} s/step")
    print(f"the shipped recipe's 60 steps: ~{60 * per_step / 60:.1f} min")


if __name__ == "__main__":
    main()
