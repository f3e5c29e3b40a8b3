"""What the three training recipes share (`demo`, `tuned`, `lora`): examples encoded with the loss on the
answer only, padded into batches, and a held-out set of problems with its greedy check."""

from __future__ import annotations

import random

from reachtui.tasks.demo import demo_question_texts, format_prompt, iter_items


def encode_examples(tokenizer, items):
    """(input_ids, labels) per example: prompt + solution + "\\n" + EOS; labels mask the prompt."""
    prompts = [format_prompt(it.question) for it in items]
    answers = [it.solution + "\n" for it in items]
    p_ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    a_ids = tokenizer(answers, add_special_tokens=False)["input_ids"]
    eos = tokenizer.eos_token_id
    out = []
    for p, a in zip(p_ids, a_ids):
        ids = p + a + [eos]
        labels = [-100] * len(p) + a + [eos]
        out.append((ids, labels))
    return out


def batches(examples, batch_size: int, rng: random.Random, pad_id: int):
    """Deterministic batches; examples are grouped by length within windows of 16 batches to cut
    padding, then the batches are shuffled."""
    window = batch_size * 16
    groups = []
    for start in range(0, len(examples), window):
        chunk = sorted(examples[start:start + window], key=lambda e: len(e[0]))
        group = [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
        rng.shuffle(group)
        groups.extend(group)
    for group in groups:
        yield pad_batch(group, pad_id)


def pad_batch(group, pad_id: int):
    """(ids, labels, attention mask) of (ids, labels) examples, int64 [rows, longest]: ids padded with
    `pad_id` on the right, labels with -100, the mask 1 over each row's own tokens."""
    import torch

    width = max(len(ids) for ids, _ in group)
    ids = torch.full((len(group), width), pad_id, dtype=torch.long)
    labels = torch.full((len(group), width), -100, dtype=torch.long)
    mask = torch.zeros((len(group), width), dtype=torch.long)
    for r, (i, l) in enumerate(group):
        ids[r, : len(i)] = torch.tensor(i)
        labels[r, : len(l)] = torch.tensor(l)
        mask[r, : len(i)] = 1
    return ids, labels, mask


def held_out_items(n: int, seed: int, exclude: set[str]) -> list:
    """`n` distinct problems of the stream for `seed` for a greedy check during training: neither `exclude`
    (the training prompts) nor demo-task questions."""
    seen, out = set(exclude) | demo_question_texts(), []
    for item in iter_items(seed):
        if len(out) == n:
            break
        if item.question not in seen:
            seen.add(item.question)
            out.append(item)
    return out


def quick_eval(model, tokenizer, questions, batch_size: int = 64) -> float:
    """Greedy accuracy (number after '####' vs gold) on `questions` (DemoItems)."""
    import torch

    correct = 0
    model.eval()
    with torch.no_grad():
        for s in range(0, len(questions), batch_size):
            chunk = questions[s:s + batch_size]
            enc = tokenizer([format_prompt(q.question) for q in chunk], return_tensors="pt",
                            padding=True, add_special_tokens=False)
            out = model.generate(**enc, max_new_tokens=48, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
            texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            for q, t in zip(chunk, texts):
                line = t.split("\n", 1)[0]
                got = line.rsplit("####", 1)[-1].strip() if "####" in line else None
                correct += got == str(q.answer)
    model.train()
    return correct / len(questions)
