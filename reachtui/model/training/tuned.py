"""Make the bundled `demo-tuned` model: the demo model further trained on problems that are not in the
demo task, with reachtui's own grader as the reward.

    pip install 'reachtui[train]'
    python -m reachtui.model.training.tuned --out assets/models/demo-tuned          # GRPO, as shipped
    python -m reachtui.model.training.tuned --method expert-iteration --out DIR    # the alternative recipe

The shipped model is made by **GRPO** with TRL's GRPOTrainer: per step 8 prompts x 8 completions sampled
at temperature 1.0 (as the `sample` probe draws them), reward 1 when the completion's first line grades
correct under reachtui's grader (the audit's stop string is the newline), else 0; no KL term (beta 0, as
DAPO), so no reference model; 60 steps at a constant lr 3e-5. It runs here in reasonable time: 60 steps
took 9.8 min on the shared 2-core CPU (6-8 s a step; tests/bench/time_grpo_trl.py times one).

`--method expert-iteration` (rejection-sampling fine-tuning) is the cheaper alternative: each round samples
8 completions per prompt with reachtui's own Runner and fine-tunes on the correct ones of prompts whose
greedy answer was wrong (loss on the completion only). The model card gives what each recipe measured.

The prompts come from `reachtui.tasks.demo.training_items` with a seed other than the demo model's
training stream, and never include a question of the shipped demo task. A fixed seed and one thread
make the run repeatable on the same CPU. The tokenizer is the demo model's, copied unchanged.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from reachtui.assets import DEMO_MODEL_DIR
from reachtui.grading import grade
from reachtui.tasks.demo import format_prompt, training_items
from reachtui.model.training.examples import batches, held_out_items, quick_eval

DEFAULTS = dict(method="grpo", rounds=2, prompts_per_round=640, samples=8, epochs=2, lr=3e-4,
                batch_size=16, steps=60, prompts_per_step=8, lr_grpo=3e-5, beta=0.0, temperature=1.0,
                max_completion_length=48, seed=23, threads=1, eval_n=300)
GRPO_KEYS = ("steps", "prompts_per_step", "beta")
EI_KEYS = ("rounds", "prompts_per_round", "epochs", "batch_size")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def first_line_reward(gold: dict[str, str]):
    """The reward function: 1.0 when the completion's first line grades correct against the prompt's gold."""
    def reward(prompts, completions, **_):
        return [float(grade(c.split("\n", 1)[0], gold[p]).correct) for p, c in zip(prompts, completions)]
    return reward


def train_grpo(out: Path, *, steps: int, prompts_per_step: int, samples: int, lr_grpo: float, beta: float,
               temperature: float, max_completion_length: int, seed: int, threads: int, eval_n: int) -> dict:
    """GRPO with TRL: one policy step per 8 prompts x `samples` completions, reward 0/1, no KL (beta 0)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer


    t0 = time.time()
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    items = training_items(steps * prompts_per_step, seed=seed)
    gold = {format_prompt(it.question): str(it.answer) for it in items}
    check = held_out_items(eval_n, seed + 10_000, {it.question for it in items})
    tok = AutoTokenizer.from_pretrained(DEMO_MODEL_DIR)
    model = AutoModelForCausalLM.from_pretrained(DEMO_MODEL_DIR)
    before = quick_eval(model, tok, check)
    print(f"demo model: greedy {before:.1%} on {len(check)} held-out problems", flush=True)

    data = Dataset.from_list([{"prompt": format_prompt(it.question)} for it in items])
    with tempfile.TemporaryDirectory() as work:
        cfg = GRPOConfig(output_dir=work, per_device_train_batch_size=prompts_per_step * samples,
                         num_generations=samples, max_completion_length=max_completion_length,
                         learning_rate=lr_grpo, lr_scheduler_type="constant", beta=beta, temperature=temperature,
                         max_steps=steps, logging_steps=10, report_to=[], use_cpu=True, save_strategy="no",
                         seed=seed, data_seed=seed, dataloader_num_workers=0, disable_tqdm=True)
        trainer = GRPOTrainer(model=model, reward_funcs=first_line_reward(gold), args=cfg, train_dataset=data,
                              processing_class=tok)
        t_train = time.time()
        trainer.train()
        train_s = time.time() - t_train
        history = [(h["step"], round(float(h["reward"]), 4)) for h in trainer.state.log_history if "reward" in h]
    model = trainer.model.eval()
    after = quick_eval(model, tok, check)
    print(f"demo-tuned: greedy {after:.1%} on the same {len(check)} held-out problems", flush=True)

    save(model, out)
    import trl

    info = dict(method="GRPO (TRL GRPOTrainer)", steps=steps, prompts_per_step=prompts_per_step,
                generations=samples, lr=lr_grpo, beta=beta, temperature=temperature,
                max_completion_length=max_completion_length, seed=seed, threads=threads,
                train_prompts=len(items), greedy_held_out_before=round(before, 4),
                greedy_held_out_after=round(after, 4), held_out=len(check), train_seconds=round(train_s, 1),
                total_seconds=round(time.time() - t0, 1), torch=torch.__version__, trl=trl.__version__,
                reward_history=history)
    print(json.dumps({k: v for k, v in info.items() if k != "reward_history"}), flush=True)
    return info


def save(model, out: Path) -> None:
    """The weights (safetensors, float32) and the demo model's tokenizer files, unchanged."""
    out.mkdir(parents=True, exist_ok=True)
    model.config.use_cache = True          # TRL turns it off for training; generation wants it
    model.save_pretrained(out, safe_serialization=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(DEMO_MODEL_DIR / name, out / name)


def correct_samples(runner, items, samples: int, temperature: float, max_new_tokens: int, seed: int):
    """(prompt, completion) for the sampled completions that grade correct on prompts whose greedy answer
    is wrong (what sampling reaches but the default does not realize), each distinct pair once; and the
    fraction of all samples that were correct. Prompts the model already realizes add nothing: its
    correct samples there are mostly its greedy output again."""
    from reachtui.generation import Decoding
    from reachtui.intervention import Intervention

    prompts = [format_prompt(it.question) for it in items]
    greedy = runner.generate(prompts, decoding=Decoding(max_new_tokens=max_new_tokens, stop=("\n",)))
    decoding = Decoding(max_new_tokens=max_new_tokens, temperature=temperature, stop=("\n",))
    seeds = [[seed * 1_000_003 + i * samples + s for i in range(len(prompts))] for s in range(samples)]
    runs = runner.generate_many(prompts, [Intervention()] * samples, decoding=decoding, seeds=seeds)
    kept, hits = {}, 0
    for gens in runs:
        for it, prompt, gen, first in zip(items, prompts, gens, greedy):
            if grade(gen.text, str(it.answer)).correct:
                hits += 1
                if not grade(first.text, str(it.answer)).correct:
                    kept.setdefault((prompt, gen.text), None)
    return list(kept), hits / (len(items) * samples)


def fine_tune(model, tokenizer, pairs, *, epochs: int, lr: float, batch_size: int, seed: int) -> float:
    """Supervised steps on (prompt, completion): loss on the completion, its newline and EOS; mean loss."""
    import random

    import torch

    eos = tokenizer.eos_token_id
    examples = []
    for prompt, completion in pairs:
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        a = tokenizer(completion + "\n", add_special_tokens=False)["input_ids"] + [eos]
        examples.append((p + a, [-100] * len(p) + a))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
    rng, losses = random.Random(seed), []
    model.train()
    for _ in range(epochs):
        rng.shuffle(examples)
        for ids, labels, mask in batches(examples, batch_size, rng, tokenizer.pad_token_id):
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
    model.eval()
    return sum(losses) / max(1, len(losses))


def train_expert_iteration(out: Path, *, rounds: int, prompts_per_round: int, samples: int, epochs: int,
                           lr: float, batch_size: int, temperature: float, max_completion_length: int, seed: int,
                           threads: int, eval_n: int) -> dict:
    """Rounds of: sample `samples` completions per new prompt, keep the correct ones, fine-tune on them."""
    import torch

    from reachtui.model.load import load_model
    from reachtui.model.run import Runner

    t0 = time.time()
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    items = training_items(rounds * prompts_per_round, seed=seed)
    check = held_out_items(eval_n, seed + 10_000, {it.question for it in items})
    runner = Runner(load_model("demo", device="cpu"))
    model, tok = runner.model, runner.tokenizer
    before = quick_eval(model, tok, check)
    print(f"demo model: greedy {before:.1%} on {len(check)} held-out problems", flush=True)
    history = []
    for r in range(rounds):
        chunk = items[r * prompts_per_round:(r + 1) * prompts_per_round]
        with torch.no_grad():
            pairs, rate = correct_samples(runner, chunk, samples, temperature, max_completion_length, seed + r)
        loss = fine_tune(model, tok, pairs, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed + r)
        acc = quick_eval(model, tok, check)
        model.eval()
        history.append(dict(round=r + 1, sample_correct=round(rate, 4), kept=len(pairs), loss=round(loss, 4),
                            greedy_held_out=round(acc, 4)))
        print(f"round {r + 1}: {rate:.1%} of {len(chunk) * samples} samples correct, {len(pairs)} distinct kept; "
              f"loss {loss:.3f}; greedy {acc:.1%} held-out ({time.time() - t0:.0f} s)", flush=True)
    save(model, out)
    info = dict(method="expert iteration", rounds=rounds, prompts_per_round=prompts_per_round, samples=samples,
                epochs=epochs, lr=lr, batch_size=batch_size, temperature=temperature,
                max_completion_length=max_completion_length, seed=seed, threads=threads, train_prompts=len(items),
                greedy_held_out_before=round(before, 4), greedy_held_out_after=history[-1]["greedy_held_out"],
                held_out=len(check), total_seconds=round(time.time() - t0, 1), torch=torch.__version__,
                rounds_record=history)
    print(json.dumps(info), flush=True)
    return info


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m reachtui.model.training.tuned", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="directory to save the tuned model in")
    for key, value in DEFAULTS.items():
        ap.add_argument("--" + key.replace("_", "-"), type=type(value), default=value)
    ap.add_argument("--info", type=Path, default=None, help="write the training record (JSON) here")
    args = vars(ap.parse_args(argv))
    out, info_path, method = args.pop("out"), args.pop("info"), args.pop("method")
    if method == "grpo":
        info = train_grpo(out, **{k: v for k, v in args.items() if k not in EI_KEYS + ("lr",)})
    elif method == "expert-iteration":
        info = train_expert_iteration(out, **{k: v for k, v in args.items() if k not in GRPO_KEYS + ("lr_grpo",)})
    else:
        raise SystemExit(f"error: --method {method}: expert-iteration or grpo")
    if info_path:
        info_path.write_text(json.dumps(info, indent=1) + "\n")


if __name__ == "__main__":
    main()
