"""Batched generation under (route, silenced MLPs, decoding): the engine every probe runs on.

`Runner.generate` takes many prompts and one intervention, left-pads them into batches (prompts sorted by
length so batches carry little padding), and decodes with a hand-written incremental loop over the
model's own forward and a KV cache sized for the route (see routing.py for how a route is installed).
Greedy or temperature sampling with top-p; one torch.Generator per prompt seeded with seeds[i], so a row's
output does not depend on its batch companions. A row stops at EOS or at any stop string (cut from the
text); the loop ends when every row has stopped or after max_new_tokens. On CUDA out-of-memory the batch
size halves and the batch is retried.

Per prompt: text (special tokens dropped, cut at the first stop string), token ids (every generated
token, the EOS or stop-completing token included), mean log-prob of those tokens under the un-tempered
distribution, new_tokens = len(token_ids), layers_executed = len(route), compute = layers_executed x
(prompt tokens + new tokens).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import torch

from reachtui.errors import ReachError
from reachtui.model import routing
from reachtui.model.routes import Route, identity, validate_route


@dataclass(frozen=True)
class Decoding:
    max_new_tokens: int = 48
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


@dataclass
class Generation:
    text: str
    token_ids: list[int]
    mean_logprob: float
    new_tokens: int
    layers_executed: int
    compute: int
    prompt_tokens: int = 0
    finish: str = field(default="length")   # "eos" | "stop" | "length"


def _is_oom(exc: BaseException) -> bool:
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def _eos_ids(model, tokenizer) -> set[int]:
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


class Runner:
    """Runs generations on one loaded model; one owner at a time (`lock`)."""

    def __init__(self, loaded):
        self.loaded = loaded
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.arch = loaded.arch
        self.num_layers = self.arch.num_layers
        self.lock = threading.RLock()
        from reachtui.model.load import input_device   # where input ids go (also under a device map)

        self.device = input_device(self.model)
        self.eos_ids = _eos_ids(self.model, self.tokenizer)
        pad = getattr(self.tokenizer, "pad_token_id", None)
        if pad is None:
            pad = min(self.eos_ids) if self.eos_ids else 0
        self.pad_id = int(pad)
        self.batch_size_hint: int | None = None   # set when an out-of-memory error halved the batch

    # ------------------------------------------------------------------ public

    def encode(self, prompt: str) -> list[int]:
        """The prompt's token ids, with the tokenizer's defaults (as `tokenizer(prompt)` gives them) —
        except that a prompt already starting with the BOS token (a rendered chat template) gets no
        second one."""
        bos = getattr(self.tokenizer, "bos_token", None)
        already = bool(bos) and prompt.startswith(bos)
        return list(self.tokenizer(prompt, add_special_tokens=not already)["input_ids"])

    def check_route(self, route) -> Route:
        if route is None:
            return identity(self.num_layers)
        if isinstance(route, str):
            from reachtui.model.routes import parse_route

            return parse_route(route, self.num_layers, max_repeat=10**9)
        return validate_route(route, self.num_layers, max_repeat=10**9)

    def generate(
        self,
        prompts: list[str],
        *,
        route: Route | None = None,
        silenced: frozenset[int] = frozenset(),
        decoding: Decoding = Decoding(),
        seeds: list[int] | None = None,
        batch_size: int = 64,
    ) -> list[Generation]:
        route = self.check_route(route)
        silenced = frozenset(silenced)
        bad = sorted(i for i in silenced if not 0 <= i < self.num_layers)
        if bad:
            raise ReachError(f"silenced layer {bad[0]} is out of range (the model has {self.num_layers} layers)")
        if decoding.max_new_tokens < 1:
            raise ReachError("max_new_tokens must be at least 1")
        if not 0.0 < decoding.top_p <= 1.0:
            raise ReachError(f"top_p must be in (0, 1], got {decoding.top_p}")
        if seeds is None:
            seeds = [0] * len(prompts)
        if len(seeds) != len(prompts):
            raise ReachError(f"{len(seeds)} seeds for {len(prompts)} prompts")
        if not prompts:
            return []
        with self.lock:
            encoded = [self.encode(p) for p in prompts]
            if any(len(e) == 0 for e in encoded):
                raise ReachError("a prompt encodes to no tokens")
            order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))
            results: list[Generation | None] = [None] * len(prompts)
            bs = max(1, int(batch_size))
            if self.batch_size_hint is not None:   # an earlier call ran out of memory at a larger size
                bs = min(bs, self.batch_size_hint)
            start = 0
            with routing.installed(self.arch, route.layers, silenced), torch.inference_mode():
                while start < len(order):
                    chunk = order[start : start + bs]
                    try:
                        gens = self._generate_batch(
                            [encoded[i] for i in chunk], [int(seeds[i]) for i in chunk], decoding, len(route)
                        )
                    except Exception as exc:  # noqa: BLE001 - only OOM is handled here
                        if not _is_oom(exc):
                            raise
                        if bs == 1:
                            raise ReachError("out of memory even at batch size 1") from exc
                        bs = max(1, bs // 2)
                        self.batch_size_hint = bs
                        if torch.cuda.is_available():
                            torch.cuda.empty_cache()
                        continue
                    for i, g in zip(chunk, gens):
                        results[i] = g
                    start += len(chunk)
            return results  # type: ignore[return-value]

    def trace(
        self,
        prompt: str,
        *,
        route: Route | None = None,
        silenced: frozenset[int] = frozenset(),
        decoding: Decoding = Decoding(),
        seed: int = 0,
        force: bool = False,
    ):
        """One prompt: (Generation, logits of every decoding step as a [steps, vocab] float32 tensor).

        `force` installs the identity route through the routing machinery too (tests use it)."""
        route = self.check_route(route)
        record: list = []
        with self.lock:
            ids = self.encode(prompt)
            with routing.installed(self.arch, route.layers, frozenset(silenced), force=force), \
                    torch.inference_mode():
                gen = self._generate_batch([ids], [seed], decoding, len(route), record=record)[0]
        return gen, torch.cat(record, dim=0)

    # ------------------------------------------------------------------ internals

    def _generate_batch(self, ids: list[list[int]], seeds: list[int], dec: Decoding, route_len: int,
                        record: list | None = None):
        device = self.device
        b = len(ids)
        width = max(len(x) for x in ids)
        input_ids = torch.full((b, width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((b, width), dtype=torch.long)
        for r, x in enumerate(ids):
            input_ids[r, width - len(x):] = torch.tensor(x, dtype=torch.long)
            attention[r, width - len(x):] = 1
        input_ids = input_ids.to(device)
        attention = attention.to(device)
        position_ids = (attention.cumsum(-1) - 1).masked_fill(attention == 0, 0)

        gens = None
        if not dec.greedy:
            gens = [torch.Generator(device=device).manual_seed(s) for s in seeds]
        eos = torch.tensor(sorted(self.eos_ids) or [-1], device=device)
        stops = tuple(s for s in dec.stop if s)

        tokens: list[list[int]] = [[] for _ in range(b)]
        logps: list[list[float]] = [[] for _ in range(b)]
        finish = ["length"] * b
        rows = list(range(b))          # original row of each row of the tensors (shrinks as rows finish)
        cache = routing.new_cache(self.arch)
        logits = routing.forward_last_logits(self.model, input_ids, attention, position_ids, cache)
        for step in range(dec.max_new_tokens):
            logits = logits.float()
            if record is not None:
                record.append(logits.clone())
            logprobs = torch.log_softmax(logits, dim=-1)
            if gens is None:
                nxt = logits.argmax(dim=-1)
            else:
                nxt = self._sample(logits, dec, [gens[r] for r in rows])
            chosen = logprobs.gather(1, nxt[:, None])[:, 0]
            is_eos = torch.isin(nxt, eos)
            nxt_list = nxt.tolist()
            lp_list = chosen.tolist()
            eos_list = is_eos.tolist()
            keep: list[int] = []        # tensor rows still generating
            for j, r in enumerate(rows):
                tokens[r].append(nxt_list[j])
                logps[r].append(lp_list[j])
                if eos_list[j]:
                    finish[r] = "eos"
                else:
                    keep.append(j)
            if stops and keep:
                texts = self.tokenizer.batch_decode([tokens[rows[j]] for j in keep], skip_special_tokens=True)
                kept = []
                for j, text in zip(keep, texts):
                    if any(s in text for s in stops):
                        finish[rows[j]] = "stop"
                    else:
                        kept.append(j)
                keep = kept
            if not keep or step == dec.max_new_tokens - 1:
                break
            attention = torch.cat([attention, attention.new_ones((attention.shape[0], 1))], dim=1)
            position_ids = position_ids[:, -1:] + 1
            if len(keep) < len(rows):
                # finished rows leave the batch: later steps cost only what is still generating
                index = torch.tensor(keep, device=device)
                routing.select_rows(cache, index)
                attention, position_ids, nxt = attention[index], position_ids[index], nxt[index]
                rows = [rows[j] for j in keep]
            logits = routing.forward_last_logits(self.model, nxt[:, None], attention, position_ids, cache)
        del cache

        out = []
        for r in range(b):
            text = self.tokenizer.decode(tokens[r], skip_special_tokens=True)
            text, _ = cut_at_stop(text, stops)
            n_new = len(tokens[r])
            mean = sum(logps[r]) / n_new if n_new else float("nan")
            out.append(
                Generation(
                    text=text,
                    token_ids=tokens[r],
                    mean_logprob=mean if math.isfinite(mean) else float("-inf"),
                    new_tokens=n_new,
                    layers_executed=route_len,
                    compute=route_len * (len(ids[r]) + n_new),
                    prompt_tokens=len(ids[r]),
                    finish=finish[r],
                )
            )
        return out

    @staticmethod
    def _sample(logits, dec: Decoding, gens) -> torch.Tensor:
        """One token per row, row j drawn with its own generator gens[j] (batch-independent)."""
        probs = torch.softmax(logits / dec.temperature, dim=-1)
        order = None
        if dec.top_p < 1.0:
            probs, order = probs.sort(dim=-1, descending=True)
            drop = (probs.cumsum(dim=-1) - probs) > dec.top_p
            probs = probs.masked_fill(drop, 0.0)
        picks = [torch.multinomial(probs[j], 1, generator=g) for j, g in enumerate(gens)]
        nxt = torch.cat(picks)
        if order is not None:
            nxt = order.gather(1, nxt[:, None])[:, 0]
        return nxt
