"""One generation read token by token, and the logit lens along its route (`Runner.inspect`, `ranks`, `lens`).

A traced generation is the ordinary decoding loop (`decode.py`) with every step's logits recorded and a
`ResidualTap` on every route position, which keeps the residual stream each block hands on at the newest
token of every forward. So the lens reads the route as it generated: a repeated layer's second position is
its second application, with its own KV-cache slot (`routing.installed`), and a silenced MLP is silenced
there too. The lens at step t and route position p is the model's final norm and unembedding (`LensHead`,
with the model's own logit soft-capping or scaling) applied to that stream; at the last position it is the
model's own logits, which every trace checks before it offers a lens.

The runner keeps the last few traces' logits and streams (`Traces`), so moving the lens to another token,
or asking a rank, costs one norm and one unembedding, not a forward.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from reachtui.errors import ReachError
from reachtui.generation import Decoding, LensRow, Traced
from reachtui.intervention import Intervention

#: Traces a runner keeps (each: its steps' float32 log-probs over the vocabulary, in host memory, and its
#: streams): the default and the edited output of the last three questions or edits.
KEEP = 6


class ResidualTap:
    """Wraps each route position's block (`routing.installed(watch=...)`, or each step of a mixed batch:
    `mixed.installed_mixed(watch=...)`) and keeps, per forward, the stream it hands on at the last token of
    every row: `states[p][call]`, a [rows, hidden] tensor on `device`."""

    def __init__(self, positions: int, device=None) -> None:
        self.states: list[list[torch.Tensor]] = [[] for _ in range(positions)]
        self.device = device

    def wrap(self, p: int, inner):
        def forward(*args, **kwargs):
            out = inner(*args, **kwargs)
            h = out[0] if isinstance(out, tuple) else out
            self.states[p].append(h[:, -1].detach().to(self.device or h.device, copy=True))
            return out

        return forward

    def stacked(self, steps: int) -> torch.Tensor:
        """[steps, positions, hidden]: the streams of the first `steps` forwards of a one-row call."""
        return torch.stack([torch.stack([x[0] for x in s[:steps]]) for s in self.states], dim=1)


class PairTap:
    """The taps of a traced mixed batch (`Runner._decode_mixed`, one row per plan): one on each plan's
    prefill, one on the batch's steps; plan j's route position p ran at step `slots[j][p]` (`mixed.schedule`)."""

    def __init__(self, plans: list[Intervention], device=None) -> None:
        from reachtui.model.mixed import schedule

        steps, self.slots = schedule(plans)
        self.prefills = [ResidualTap(len(iv.route), device) for iv in plans]
        self.steps = ResidualTap(len(steps), device)

    def stacked(self, j: int, steps: int) -> torch.Tensor:
        """[steps, positions, hidden] of plan j (batch row j): its prefill's last token, then each step's."""
        first = torch.stack([s[0][0] for s in self.prefills[j].states])
        later = [torch.stack([self.steps.states[t][c][j] for t in self.slots[j]]) for c in range(steps - 1)]
        return torch.stack([first, *later])


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class LensHead:
    """The model's way from a residual stream to logits: its final norm, its unembedding, then the
    soft-capping (Gemma) or scaling (Cohere, Granite) its forward applies. `problem`: why there is none."""

    def __init__(self, model, arch) -> None:
        self.norm = arch.final_norm
        get = getattr(model, "get_output_embeddings", None)
        self.head = get() if callable(get) else None
        self.problem = None
        if self.norm is None:
            self.problem = f"no logit lens: {arch.model_class}'s final norm was not found"
        elif self.head is None:
            self.problem = f"no logit lens: {arch.model_class}'s unembedding (output head) was not found"
        configs = (arch.config, getattr(model, "config", None))
        self.softcap = next((v for c in configs if (v := _number(getattr(c, "final_logit_softcapping", None)))), None)
        self.scale = _number(getattr(model, "logit_scale", None))
        self.divide = next((v for c in configs if (v := _number(getattr(c, "logits_scaling", None)))), None)

    def __call__(self, states: torch.Tensor) -> torch.Tensor:
        """float32 logits of `states` [..., hidden]."""
        with torch.inference_mode():
            logits = self.head(self.norm(states)).float()
        if self.scale is not None:
            logits = logits * self.scale
        if self.divide:
            logits = logits / self.divide
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def check(self, last: torch.Tensor, logits: torch.Tensor, model_class: str) -> str | None:
        """None where the lens at the route's last position gives the model's own `logits`; else why not."""
        mine = self(last)
        scale = 1.0 + float(logits.abs().max())
        tol = (1e-4 if last.dtype == torch.float32 else 2e-2) * scale
        diff = float((mine - logits).abs().max())
        if not math.isfinite(diff) or diff > tol:
            return (f"no logit lens: {model_class}'s final norm and unembedding do not give its own logits "
                    f"(they differ by {diff:.3g})")
        return None


@dataclass
class _Record:
    route: tuple[int, ...]
    logp: torch.Tensor                 # [steps, vocab] float32 log-probs under the model's own logits
    states: torch.Tensor | None        # [steps, positions, hidden]; None without a lens


class Traces:
    """The last `KEEP` traces of a runner, by key, and the calls that made them (asked again: the same)."""

    def __init__(self) -> None:
        self.records: OrderedDict[int, _Record] = OrderedDict()
        self.made: OrderedDict[tuple, Traced] = OrderedDict()
        self.next_key = 1

    def get(self, key: int) -> _Record:
        rec = self.records.get(key)
        if rec is None:
            raise ReachError(f"trace {key} is no longer kept (only the last {KEEP} are): trace it again")
        return rec

    def add(self, call: tuple, rec: _Record, make) -> Traced:
        key, self.next_key = self.next_key, self.next_key + 1
        self.records[key] = rec
        traced = self.made[call] = make(key)
        while len(self.records) > KEEP:
            old, _ = self.records.popitem(last=False)
            for c in [c for c, t in self.made.items() if t.key == old]:
                del self.made[c]
        return traced


def pieces(tokenizer, ids: Sequence[int]) -> tuple[str, ...]:
    """Each token's text in context: what decoding the first i+1 tokens adds to decoding the first i (so
    the pieces join to the decoded text); a special token that decodes to nothing shows its name."""
    ids = list(ids)
    texts = tokenizer.batch_decode([ids[: i + 1] for i in range(len(ids))], skip_special_tokens=True) if ids else []
    out, before = [], ""
    for i, text in enumerate(texts):
        piece = text[len(before):] if text.startswith(before) else text
        if not piece and ids[i] in set(getattr(tokenizer, "all_special_ids", ()) or ()):
            piece = tokenizer.convert_ids_to_tokens(ids[i])
        out.append(piece)
        before = text
    return tuple(out)


def inspect(runner, prompt: str, interventions, decoding: Decoding, seed: int, top: int) -> list[Traced]:
    """`Runner.inspect`: the generations as `generate` makes them, read token by token (see the module). The
    interventions not traced before decode as one mixed batch where the model allows it (one forward per
    step for all of them), else one after another."""
    ivs: list[Intervention] = [runner.resolve(iv) for iv in interventions]
    head = runner.lens_head
    ids = runner.encode(prompt)
    if not ids:
        raise ReachError("a prompt encodes to no tokens")
    calls = [(tuple(ids), iv, decoding, int(seed), int(top)) for iv in ivs]
    made = [runner.traces.made.get(c) for c in calls]
    if all(t is not None for t in made):      # traced before: no need to wait for the model
        return made
    with runner.lock:
        todo = list(dict.fromkeys(c for c in calls if c not in runner.traces.made))
        if todo:
            runner._check_fits([ids], decoding.max_new_tokens)
        device = head.head.weight.device if head.problem is None and hasattr(head.head, "weight") else None
        if len(todo) > 1 and runner.mixing:
            plans = [c[1] for c in todo]
            tap, record = PairTap(plans, device), []
            gens = runner._decode_mixed([(iv, [ids], [int(seed)]) for iv in plans], decoding, record=record,
                                        watch=tap)
            for j, (call, [gen]) in enumerate(zip(todo, gens)):
                n = len(gen.token_ids)
                logits = torch.stack([step[j] for step in record[:n]]) if n else None
                _keep(runner, call, gen, logits, tap.stacked(j, n) if n else None, head)
        else:
            for call in todo:
                tap, record = ResidualTap(len(call[1].route), device), []
                [(_, [gen])] = list(runner._generate_batch([ids], [call[1]], [[int(seed)]], decoding, record=record,
                                                           watch=tap))
                n = len(gen.token_ids)
                _keep(runner, call, gen, torch.cat(record)[:n] if n else None, tap.stacked(n) if n else None, head)
        return [runner.traces.made[c] for c in calls]


def _keep(runner, call: tuple, gen, logits: torch.Tensor | None, states: torch.Tensor | None, head: LensHead) -> None:
    """Keep one traced generation (`Traces`): its log-probs, top tokens and pieces, and its streams where the
    lens gives the model's own logits at the route's last position."""
    iv, top = call[1], call[4]
    n = len(gen.token_ids)
    vocab = head.head.out_features if hasattr(head.head, "out_features") else 1
    # kept in host memory: a long output of a large vocabulary is hundreds of MB, no use on a GPU
    logp = torch.log_softmax(logits.float(), dim=-1).cpu() if n else torch.zeros((0, vocab))
    problem = head.problem
    if problem is None and n:
        problem = head.check(states[-1, -1], logits[-1].float(), runner.arch.model_class)
    chosen = torch.tensor(gen.token_ids, dtype=torch.long, device=logp.device)
    logprobs = logp.gather(1, chosen[:, None])[:, 0].tolist() if n else []
    k = min(int(top), logp.shape[-1])
    tops = ()
    if n:
        best_p, best_i = logp.topk(k, dim=-1)
        tops = tuple(tuple((int(i), math.exp(float(p))) for i, p in zip(row_i, row_p))
                     for row_i, row_p in zip(best_i.tolist(), best_p.tolist()))
    rec = _Record(tuple(iv.route.layers), logp, states if problem is None else None)
    runner.traces.add(call, rec, lambda key: Traced(
        generation=gen, route=rec.route, token_ids=tuple(gen.token_ids), pieces=pieces(runner.tokenizer, gen.token_ids),
        logprobs=tuple(logprobs), top=tops, key=key, lens_problem=problem))


def _ranked(logp: torch.Tensor, ids: Sequence[int]) -> tuple[list[int], list[float]]:
    """Ranks (1 = the top; ties share the better rank) and probabilities of `ids` under log-probs [..., vocab]."""
    index = torch.tensor(list(ids), dtype=torch.long, device=logp.device)
    picked = logp.index_select(-1, index)                       # [..., len(ids)]
    ranks = (logp.unsqueeze(-2) > picked.unsqueeze(-1)).sum(-1) + 1
    return ranks.tolist(), picked.exp().tolist()


def _check_step(rec: _Record, step: int) -> None:
    steps = rec.logp.shape[0]
    if not 0 <= step < steps:
        raise ReachError(f"token {step} is out of range: the output has {steps} tokens (0-{steps - 1})")


def ranks(runner, key: int, step: int, ids: Sequence[int]) -> list[tuple[int, float]]:
    """`Runner.ranks`: (rank, probability) of each of `ids` under the model's own logits at `step`."""
    rec = runner.traces.get(key)
    _check_step(rec, step)
    r, p = _ranked(rec.logp[step], ids)
    return list(zip(r, p))


def lens(runner, key: int, step: int, ids: Sequence[int]) -> list[LensRow]:
    """`Runner.lens`: per route position of trace `key`, the ranks and probabilities of `ids` at `step`."""
    rec = runner.traces.get(key)
    _check_step(rec, step)
    if rec.states is None:
        raise ReachError(runner.lens_head.problem or "this trace has no logit lens")
    # the final norm and the unembedding are never swapped by a route: no need to wait for the model's owner
    logp = torch.log_softmax(runner.lens_head(rec.states[step]), dim=-1)     # [positions, vocab]
    r, p = _ranked(logp, ids)
    tops = logp.argmax(-1).tolist()
    return [LensRow(position=i, layer=layer, ranks=tuple(r[i]), probs=tuple(p[i]), top=int(tops[i]))
            for i, layer in enumerate(rec.route)]


def continuation(runner, prompt: str, text: str) -> list[int]:
    """`Runner.continuation`: the tokens `prompt + text` has beyond `prompt`'s own."""
    base, both = runner.encode(prompt), runner.encode(prompt + text)
    if both[: len(base)] == base:
        return both[len(base):]
    k = 0
    while k < min(len(base), len(both)) and base[k] == both[k]:
        k += 1
    return both[k:]


def token_texts(runner, ids: Sequence[int]) -> list[str]:
    """`Runner.token_texts`: each token decoded on its own (special tokens by name)."""
    return [runner.tokenizer.decode([int(i)], skip_special_tokens=False) for i in ids]
