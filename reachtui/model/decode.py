"""The decoding loop: one forward per step over a prefilled batch (a stepper, `steppers.py`), each row greedy
or sampled (`sampling.py`), stopping at EOS, a stop string (`stops.py`, cut from the text) or the token
limit.

What the host does per step does not grow with the batch's text: the rows' chosen tokens and their
log-probs come back in one copy (into pinned memory on a GPU), and the host reads step t-1's while the
device already computes step t (one step of lag: a row that finished at t-1 decodes one more token,
which is dropped). Finished rows leave the batch once they are a quarter of it. Stop strings are found
incrementally, with the exact rule of a whole-text decode (`StopWatch`).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from reachtui.generation import Decoding, Generation
from reachtui.model.sampling import pick, pick_v1, uniforms
from reachtui.model.stops import StopWatch, cut_at_stop

LIVE, EOS, STOP = 0, 1, 2
#: On a GPU the sampler works on this many bytes of float32 logits at a time (its copies stay bounded).
_SAMPLER_BYTES = 1 << 30
_FINISH = {LIVE: "length", EOS: "eos", STOP: "stop"}


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


def pad_id(model, tokenizer) -> int:
    """The id a batch's shorter prompts are padded with: the tokenizer's pad token, else its first end of
    sequence id, else 0 (masked out, but still looked up in the embedding: `load.check_vocabulary` checks it)."""
    pad = getattr(tokenizer, "pad_token_id", None)
    if pad is None:
        eos = eos_ids(model, tokenizer)
        pad = min(eos) if eos else 0
    return int(pad)


class _ToHost:
    """A step's chosen tokens and log-probs on their way to the host: one asynchronous copy into pinned
    memory on a GPU (waited for only when the host reads them), the tensors themselves on a CPU."""

    def __init__(self, tokens: torch.Tensor, logps: torch.Tensor, rows: np.ndarray) -> None:
        self.rows = rows
        if tokens.device.type == "cuda":
            both = torch.empty((2, tokens.shape[0]), dtype=torch.float64, pin_memory=True)
            self.pair = torch.stack([tokens.to(torch.float64), logps.to(torch.float64)])
            both.copy_(self.pair, non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record()
            self.host = both
        else:
            self.event = None
            self.host = (tokens, logps)

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        if self.event is None:
            tokens, logps = self.host
            return tokens.numpy(), logps.numpy()
        self.event.synchronize()
        both = self.host.numpy()
        return both[0].astype(np.int64), both[1].astype(np.float32)


class _Rows:
    """The host's record of a batch: every row's tokens and log-probs so far and how it finished."""

    def __init__(self, b: int, steps: int, eos: set[int], watch: StopWatch) -> None:
        self.tokens = np.zeros((b, steps), dtype=np.int64)
        self.logps = np.zeros((b, steps), dtype=np.float32)
        self.length = np.zeros(b, dtype=np.int64)
        self.finish = np.full(b, LIVE, dtype=np.int8)
        self.eos = np.asarray(sorted(eos) or [-1], dtype=np.int64)
        self.watch = watch
        self.host_s = 0.0      # reading each step's tokens: eos, stop strings, bookkeeping
        self.wait_s = 0.0      # waiting for the device's copy of them

    def live(self) -> np.ndarray:
        return self.finish == LIVE

    def absorb(self, step: int, pending: _ToHost) -> None:
        """Record step `step`'s tokens of the rows still generating; mark those that end there."""
        t0 = time.perf_counter()
        tokens, logps = pending.read()
        t1 = time.perf_counter()
        self.wait_s += t1 - t0
        try:
            self._absorb(step, pending.rows, tokens, logps)
        finally:
            self.host_s += time.perf_counter() - t1

    def _absorb(self, step: int, rows_of: np.ndarray, tokens: np.ndarray, logps: np.ndarray) -> None:
        alive = self.finish[rows_of] == LIVE
        if not alive.any():
            return
        rows, tok = rows_of[alive], tokens[alive]
        self.tokens[rows, step] = tok
        self.logps[rows, step] = logps[alive]
        self.length[rows] = step + 1
        ended = np.isin(tok, self.eos)
        self.finish[rows[ended]] = EOS
        stopped = self.watch.check(self.tokens, self.length, rows[~ended])
        self.finish[stopped] = STOP

    def confirm_final(self) -> None:
        """The exact stop rule once more on every row's text before its last step (all of it for a row
        that ran to the limit): a stop the incremental check missed, or saw late, shows there, and the row
        is cut where the rule stops it."""
        if not self.watch.stops:
            return
        for r in range(len(self.finish)):
            n = int(self.length[r]) - (self.finish[r] != LIVE)
            if n > 0 and self.finish[r] != STOP and not self.watch.suspects(self.tokens[r, :n]).any():
                continue            # no token of this row can end a stop string
            first = self.watch.first_stop(self.tokens[r, :n].tolist()) if n > 0 else None
            if first is not None:
                self.length[r], self.finish[r] = first, STOP


def decode(stepper, tokenizer, eos: set[int], ids: list[list[int]], logits: torch.Tensor, seeds: list[int],
           dec: Decoding, route_lens: list[int], record: list | None = None,
           stop_table: np.ndarray | None = None, stats: dict | None = None) -> list[Generation]:
    """Decode a prefilled batch: `ids` are the rows' prompt tokens, `logits` the prefill's last-position
    logits, `stepper` the forward of every later step. Row r is greedy, or sampled with seed `seeds[r]`
    (so a row never depends on its batch companions), until EOS, a stop string or `dec.max_new_tokens`.
    `record` collects every step's logits (traces; decoded without lag, every row kept to the end, so that
    row r of each recorded step is row r). `stop_table`: the tokenizer's
    level-1 stop table for `dec.stop` (`stops.suspect_table`), if the caller keeps one. `stats` (a dict)
    gains the steps taken, the host's seconds reading them (`host_s`) and waiting for them (`wait_s`)."""
    state = _Rows(len(ids), dec.max_new_tokens, eos, StopWatch(tokenizer, dec.stop, stop_table))
    loop = _Loop(stepper, state, logits.device, seeds, dec, record)
    taken = loop.run(logits)
    t0 = time.perf_counter()
    state.confirm_final()
    state.host_s += time.perf_counter() - t0
    if stats is not None:
        for key, value in (("steps", taken), ("host_s", state.host_s), ("wait_s", state.wait_s)):
            stats[key] = stats.get(key, 0) + value
    return finish(tokenizer, state, ids, route_lens)


class _Loop:
    """One batch's decoding steps: choose each row's token (`choose`), hand it to the host (`read`, one step
    behind on a GPU), drop the finished rows (`drop_finished`), and step the model (`run`)."""

    def __init__(self, stepper, state: _Rows, device, seeds: list[int], dec: Decoding, record: list | None) -> None:
        self.stepper, self.state, self.device, self.dec, self.record = stepper, state, device, dec, record
        steps = dec.max_new_tokens
        self.gens = self.u = None
        if not dec.greedy and dec.sampler == 1:
            self.gens = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]
        elif not dec.greedy:
            self.u = torch.from_numpy(uniforms(seeds, steps)).to(device)
        self.rows = np.arange(len(seeds))          # the batch row of each tensor row
        # a GPU runs one step ahead of the host; a CPU computes as it is asked (no lag: the same batches, and
        # so the same numbers, as a loop that reads every step before the next)
        self.lag = 1 if device.type == "cuda" and record is None else 0
        self.pending: list[tuple[int, _ToHost]] = []
        self.keep: np.ndarray | None = None        # tensor rows to keep before the next forward

    def run(self, logits: torch.Tensor) -> int:
        """Every step until no row generates or the token limit; returns the steps taken."""
        steps, lag = self.dec.max_new_tokens, self.lag
        taken = 0
        for step in range(steps):
            taken += 1
            nxt, chosen = self.choose(logits, step)
            self.pending.append((step, _ToHost(nxt, chosen, self.rows)))
            if lag == 0 and not self.read(step):
                break
            if step == steps - 1:
                break
            nxt = self.drop_finished(nxt)
            logits = self.stepper.step(nxt)       # on a GPU, queued: the host reads the last step meanwhile
            if lag and not self.read(step - lag):
                break
        self.read(steps)
        return taken

    def read(self, upto: int) -> bool:
        """Absorb the pending steps up to `upto`; decide which rows stay. False once no row generates."""
        state = self.state
        while self.pending and self.pending[0][0] <= upto:
            state.absorb(*self.pending.pop(0))
        live = state.live()
        if not live.any():
            return False
        alive = live[self.rows]
        if self.record is None and 4 * int((~alive).sum()) >= len(self.rows):
            # finished rows leave the batch once they are a quarter of it (each step reads every row's
            # cache; each removal copies the live rows' caches once)
            self.keep = np.nonzero(alive)[0]
        return True

    def drop_finished(self, nxt: torch.Tensor) -> torch.Tensor:
        """The rows `read` decided to drop leave the cache, the next tokens and the sampler's draws."""
        if self.keep is None:
            return nxt
        index = torch.as_tensor(self.keep, device=self.device)
        self.stepper.keep(index)
        if self.u is not None:
            self.u = self.u.index_select(0, index)
        self.rows, self.keep = self.rows[self.keep], None
        return nxt.index_select(0, index)

    def choose(self, logits: torch.Tensor, step: int):
        """Each row's next token and its log-prob under the un-tempered distribution, in float32, a slice of
        rows at a time on a GPU (a float32 copy of a batch's logits can take gigabytes)."""
        dec, gens, u, rows, record = self.dec, self.gens, self.u, self.rows, self.record
        n = logits.shape[0]
        size = n if self.device.type == "cpu" else max(1, _SAMPLER_BYTES // (4 * logits.shape[-1]))
        live = self.state.live() if gens is not None else None
        picked, logps = [], []
        for a in range(0, n, size):
            chunk = logits[a:a + size]
            if record is None and gens is None and u is None:
                # greedy: the argmax of the model's own logits is that of their float32 copy, and the
                # log-softmax converts them itself (no float32 copy of the batch's logits)
                nxt = chunk.argmax(dim=-1)
                picked.append(nxt)
                logps.append(torch.log_softmax(chunk, dim=-1, dtype=torch.float32).gather(1, nxt[:, None])[:, 0])
                continue
            lf = chunk.float()
            if record is not None:
                record.append(lf.clone())
            if gens is not None:
                nxt = pick_v1(lf, dec.temperature, dec.top_p, [gens[r] if live[r] else None for r in rows[a:a + size]])
            else:
                nxt = pick(lf, dec.temperature, dec.top_p, None if u is None else u[a:a + size, step])
            picked.append(nxt)
            logps.append(torch.log_softmax(lf, dim=-1).gather(1, nxt[:, None])[:, 0])
        if len(picked) == 1:
            return picked[0], logps[0]
        return torch.cat(picked), torch.cat(logps)


def finish(tokenizer, state: _Rows, ids: list[list[int]], route_lens: list[int]) -> list[Generation]:
    """Each row's Generation: its tokens, text (cut at the first stop string), mean log-prob and costs."""
    out = []
    stops = state.watch.stops
    token_lists = [state.tokens[r, : int(state.length[r])].tolist() for r in range(len(ids))]
    texts = tokenizer.batch_decode(token_lists, skip_special_tokens=True)
    for r, tokens in enumerate(token_lists):
        n_new = int(state.length[r])
        text, _ = cut_at_stop(texts[r], stops)
        mean = sum(state.logps[r, :n_new].tolist()) / n_new if n_new else float("nan")
        out.append(Generation(
            text=text,
            token_ids=tokens,
            mean_logprob=mean if math.isfinite(mean) else float("-inf"),
            new_tokens=n_new,
            layers_executed=route_lens[r],
            compute=route_lens[r] * (len(ids[r]) + n_new),
            prompt_tokens=len(ids[r]),
            finish=_FINISH[int(state.finish[r])],
        ))
    return out
