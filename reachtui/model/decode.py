"""The decoding loop: one forward per step over a prefilled batch, each row greedy or sampled with its own
generator, stopping at EOS, a stop string (cut from the text) or the token limit."""

from __future__ import annotations

import math

import torch

from reachtui.generation import Decoding, Generation
from reachtui.model import routing


def eos_ids(model, tokenizer) -> set[int]:
    ids: set[int] = set()
    for value in (getattr(getattr(model, "generation_config", None), "eos_token_id", None),
                  getattr(model.config, "eos_token_id", None),
                  getattr(tokenizer, "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value if isinstance(v, int))
    return ids


def cut_at_stop(text: str, stops) -> tuple[str, bool]:
    """Cut `text` at the earliest occurrence of any stop string."""
    best = -1
    for s in stops:
        if s:
            k = text.find(s)
            if k >= 0 and (best < 0 or k < best):
                best = k
    return (text[:best], True) if best >= 0 else (text, False)


def decode(model, tokenizer, eos_ids: set[int], ids: list[list[int]], cache, attention, logits, seeds: list[int],
           dec: Decoding, route_lens: list[int], record: list | None = None) -> list[Generation]:
    """Decode a prefilled batch: `ids` are the rows' prompt tokens, `cache`/`attention`/`logits` the
    prefill's; row r is greedy, or sampled with its own generator seeded `seeds[r]` (so a row never
    depends on its batch companions), until EOS, a stop string or `dec.max_new_tokens`. `record`
    collects every step's logits (traces)."""
    device = logits.device
    b = len(ids)
    position_ids = attention.sum(-1, keepdim=True) - 1
    gens = None
    if not dec.greedy:
        gens = [torch.Generator(device=device).manual_seed(s) for s in seeds]
    eos = torch.tensor(sorted(eos_ids) or [-1], device=device)
    stops = tuple(s for s in dec.stop if s)

    tokens: list[list[int]] = [[] for _ in range(b)]
    logps: list[list[float]] = [[] for _ in range(b)]
    finish = ["length"] * b
    rows = list(range(b))   # the original row of each tensor row; None once it has finished
    for step in range(dec.max_new_tokens):
        logits = logits.float()
        if record is not None:
            record.append(logits.clone())
        logprobs = torch.log_softmax(logits, dim=-1)
        if gens is None:
            nxt = logits.argmax(dim=-1)
        else:
            nxt = sample(logits, dec, [None if r is None else gens[r] for r in rows])
        chosen = logprobs.gather(1, nxt[:, None])[:, 0]
        is_eos = torch.isin(nxt, eos)
        nxt_list = nxt.tolist()
        lp_list = chosen.tolist()
        eos_list = is_eos.tolist()
        live: list[int] = []        # tensor rows still generating
        for j, r in enumerate(rows):
            if r is None:
                continue
            tokens[r].append(nxt_list[j])
            logps[r].append(lp_list[j])
            if eos_list[j]:
                finish[r] = "eos"
            else:
                live.append(j)
        if stops and live:
            texts = tokenizer.batch_decode([tokens[rows[j]] for j in live], skip_special_tokens=True)
            kept = []
            for j, text in zip(live, texts):
                if any(s in text for s in stops):
                    finish[rows[j]] = "stop"
                else:
                    kept.append(j)
            live = kept
        if not live or step == dec.max_new_tokens - 1:
            break
        attention = torch.cat([attention, attention.new_ones((attention.shape[0], 1))], dim=1)
        position_ids = position_ids + 1
        live_set = set(live)
        rows = [r if j in live_set else None for j, r in enumerate(rows)]
        if 4 * (len(rows) - len(live)) >= len(rows):
            # finished rows leave the batch once they are a quarter of it (each step reads every row's
            # cache; each removal copies the live rows' caches once)
            index = torch.tensor(live, device=device)
            routing.select_rows(cache, index)
            attention, position_ids, nxt = attention[index], position_ids[index], nxt[index]
            rows = [rows[j] for j in live]
        logits = routing.forward_last_logits(model, nxt[:, None], attention, position_ids, cache)
    del cache

    out = []
    for r in range(b):
        text = tokenizer.decode(tokens[r], skip_special_tokens=True)
        text, _ = cut_at_stop(text, stops)
        n_new = len(tokens[r])
        mean = sum(logps[r]) / n_new if n_new else float("nan")
        out.append(
            Generation(
                text=text,
                token_ids=tokens[r],
                mean_logprob=mean if math.isfinite(mean) else float("-inf"),
                new_tokens=n_new,
                layers_executed=route_lens[r],
                compute=route_lens[r] * (len(ids[r]) + n_new),
                prompt_tokens=len(ids[r]),
                finish=finish[r],
            )
        )
    return out


def sample(logits, dec: Decoding, gens) -> torch.Tensor:
    """One token per row, row j drawn with its own generator gens[j] (batch-independent); a row
    whose generator is None (finished, still in the batch) takes the argmax and draws nothing."""
    probs = torch.softmax(logits / dec.temperature, dim=-1)
    order = None
    if dec.top_p < 1.0:
        probs, order = probs.sort(dim=-1, descending=True)
        drop = (probs.cumsum(dim=-1) - probs) > dec.top_p
        probs = probs.masked_fill(drop, 0.0)
    picks = [probs[j].argmax(-1, keepdim=True) if g is None else torch.multinomial(probs[j], 1, generator=g)
             for j, g in enumerate(gens)]
    nxt = torch.cat(picks)
    if order is not None:
        nxt = order.gather(1, nxt[:, None])[:, 0]
    return nxt
