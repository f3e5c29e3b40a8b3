"""Where the answer changes: one question's default output beside its output under an intervention, read token
by token, and the logit lens along the route (the app's trace pane, `reachtui trace`, `reachtui export lens`).

Both outputs are greedy under the protocol (its prompt, stop strings, max new tokens and seed). The
*divergence* is the first token where they differ. At one token position (the divergence by default, else
where the default output leaves the gold; `move` picks another) each output shows its top next
tokens, the rank and probability of the gold token (below), and the lens: per route position, as
the route ran (a repeated layer twice, a skipped one absent), the rank and probability of the tokens the
outputs chose there and of the gold token.

The gold token is where the default output leaves the gold answer: of "the default output up to its
answer, then the gold, then the protocol's first stop string" (encoded after the prompt), the first token the
default output does not have — the gold's first token, or a later one where the two answers begin alike
(gold 14 against 12: the 4; gold 6 against 66: the stop after the 6). Where the default output is right, it
is the gold's first token, where its answer begins. Pure Python: the model is
reached through the
`reachtui.generation.Runner` contract (`inspect`, `ranks`, `lens`, `continuation`, `token_texts`).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from reachtui.engine.record import graded
from reachtui.errors import ReachError
from reachtui.generation import Decoding, LensRow, Traced
from reachtui.intervention import Intervention
from reachtui.routes import format_route, format_silenced

#: Next tokens shown per output; the lens's "in the top-k" uses the same k.
TOP_K = 5
#: How a token's probability is drawn: (lowest probability, glyph, style), the most confident first. The
#: glyphs read without colour (a bar under each token: full = sure).
CONFIDENCE = ((0.9, "█", "green"), (0.5, "▆", "yellow"), (0.2, "▄", "dark_orange"), (0.05, "▂", "red"),
              (0.0, "▁", "bold red"))


def confidence(logprob: float) -> tuple[str, str]:
    """(glyph, style) of a token of log-prob `logprob` (`CONFIDENCE`)."""
    p = math.exp(logprob) if math.isfinite(logprob) else 0.0
    return next((glyph, style) for low, glyph, style in CONFIDENCE if p >= low)


def visible(piece: str) -> str:
    """A token's text as a trace shows it: a newline as ↵, a tab as ⇥, other control characters as their
    symbols, a token that decodes to nothing as ∅ (so every token takes room and the bars line up)."""
    if not piece:
        return "∅"
    out = piece.replace("\n", "↵").replace("\t", "⇥").replace("\r", "␍")
    return "".join(chr(0x2400 + ord(c)) if ord(c) < 32 else "␡" if ord(c) == 127 else "�" if 0x80 <= ord(c) < 0xA0
                   else c for c in out)


def cells(text: str) -> int:
    """Terminal columns `text` takes (wide East Asian characters 2, combining marks 0): a token's bar width."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def token_rows(pieces: Sequence[str], logprobs: Sequence[float], width: int) -> list[list[tuple[str, str, str]]]:
    """An output's tokens as lines of at most `width` columns, broken between tokens: per token its text as
    shown (`visible`), its bar (the confidence glyph, once per column of the text) and the style of both."""
    rows: list[list[tuple[str, str, str]]] = [[]]
    used = 0
    for piece, lp in zip(pieces, logprobs):
        text = visible(piece)
        w = cells(text)
        if used and used + w > width:
            rows.append([])
            used = 0
        glyph, style = confidence(lp)
        rows[-1].append((text, glyph * w, style))
        used += w
    return rows


def legend() -> str:
    """The confidence glyphs in words, for the pane and the command line."""
    parts = [f"{glyph} p≥{low:g}" for low, glyph, _ in CONFIDENCE[:-1]]
    return "token probability: " + " ".join(parts) + f" {CONFIDENCE[-1][1]} less"


class Cancelled(Exception):
    """A newer request took over (the app's trace pane): this one stops between steps."""


@dataclass(frozen=True)
class Token:
    id: int
    text: str
    prob: float


@dataclass(frozen=True)
class Output:
    """One output read token by token (`Runner.inspect`), graded."""

    name: str                   # "default" | "edited"
    intervention: str           # for people: "silence MLP 4", "default (identity route, nothing silenced)"
    route: str                  # as it ran
    silenced: str
    text: str
    answer: str | None
    correct: bool
    traced: Traced = field(repr=False, compare=False)

    @property
    def tokens(self) -> tuple[int, ...]:
        return self.traced.token_ids

    @property
    def pieces(self) -> tuple[str, ...]:
        return self.traced.pieces

    @property
    def logprobs(self) -> tuple[float, ...]:
        return self.traced.logprobs


@dataclass(frozen=True)
class At:
    """One output at the lens position: the token it chose, its top next tokens, the gold token's rank and
    probability under it, and the lens rows (None: the model has no lens)."""

    output: str
    chosen: Token
    top: tuple[Token, ...]
    gold_rank: int | None
    gold_prob: float | None
    lens: tuple[LensRow, ...] | None
    lens_tops: tuple[str, ...] = ()     # the text of each lens row's top token


@dataclass(frozen=True)
class Watched:
    """A token the lens follows: its id, text and who chose it ("default", "edited", "gold", joined by +)."""

    id: int
    text: str
    label: str


@dataclass(frozen=True)
class Trace:
    qid: str
    gold: str
    prompt: str
    default: Output
    edited: Output | None               # None: the intervention is the default
    divergence: int | None              # the first token where the outputs differ (None: they do not)
    gold_token: Token | None            # where the default output leaves the gold (see the module; prob unused: 0)
    gold_position: int | None           # the default output's token index there (None: not in the output)
    gold_index: int | None              # which of the gold's tokens it is (0: its first; None: the stop after it)
    position: int                       # the lens position (a token index)
    watched: tuple[Watched, ...]
    at: tuple[At, ...]                  # per output whose tokens reach the position
    lens_problem: str | None
    k: int = TOP_K

    @property
    def outputs(self) -> tuple[Output, ...]:
        return (self.default,) if self.edited is None else (self.default, self.edited)

    @property
    def longest(self) -> int:
        return max(len(o.tokens) for o in self.outputs)


def greedy(protocol) -> Decoding:
    """The protocol's decoding, greedy: what both outputs of a trace decode with."""
    return Decoding.of(protocol, temperature=0.0)


def divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first index where two token sequences differ (the shorter one's end counts), None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def answer_start(text: str, answer: str | None) -> int | None:
    """Where the extracted `answer` begins in `text` (its last occurrence), None where it is not found."""
    if not answer:
        return None
    at = text.rfind(answer)
    return at if at >= 0 else None


def gold_token(runner, prompt: str, default: Output, gold: str, end: str = "") -> tuple[int | None, int | None,
                                                                                        int | None]:
    """(the gold token, the default output's token index there, which of the gold's tokens it is: None for
    `end`, the stop string that ends the gold answer, where the default output goes on past a gold it holds
    whole, as 66 past 6) — see the module; (None, None, 0) where the gold adds no token."""
    start = answer_start(default.text, default.answer)
    context = default.text if start is None else default.text[:start]
    with_gold = runner.continuation(prompt, context + str(gold) + end)
    begins = _common(runner.continuation(prompt, context), with_gold)      # where the gold begins
    if begins >= len(with_gold):
        return None, None, 0
    tokens = list(default.tokens)
    if tokens[:begins] != with_gold[:begins]:       # the output's tokens are not its text's: the gold's first
        return int(with_gold[begins]), None, 0
    leaves = begins + _common(tokens[begins:], with_gold[begins:])
    if leaves >= len(with_gold):                    # the output has the whole gold: where it begins
        leaves = begins
    index = leaves - begins
    past_end = bool(end) and index >= len(runner.continuation(prompt, context + str(gold))) - begins
    return int(with_gold[leaves]), leaves if leaves < len(tokens) else None, None if past_end else index


def _end(protocol) -> str:
    """What ends an answer under the protocol: its first stop string ("" where it has none)."""
    return next((s for s in protocol.stop if s), "")


def _outputs(runner, prompt: str, ivs: list[Intervention], protocol, question: dict, top: int) -> list[Output]:
    """The question's outputs under `ivs` (the first is the default), read token by token in one call."""
    traced = runner.inspect(prompt, ivs, decoding=greedy(protocol), seed=protocol.seed, top=top)
    return [_output(runner, "default" if iv.is_default else "edited", iv, t, protocol, question)
            for iv, t in zip(ivs, traced)]


def _output(runner, name: str, iv: Intervention, traced: Traced, protocol, question: dict) -> Output:
    g = graded(traced.generation.text, question["gold"], protocol.answer_format)
    return Output(name=name, intervention=iv.describe(runner.num_layers), route=format_route(traced.route),
                  silenced=format_silenced(iv.silenced), text=traced.generation.text, answer=g["answer"],
                  correct=bool(g["correct"]), traced=traced)


def trace_question(runner, protocol, question: dict[str, Any], intervention: Intervention | None = None, *,
                   position: int | None = None, top: int = TOP_K,
                   cancelled: Callable[[], bool] | None = None) -> Trace:
    """`question` (qid, question, gold) by default and under `intervention`, read at token `position` (None:
    the divergence, else where the default output leaves the gold). ReachError (one line) for a position out of range;
    `Cancelled` where `cancelled()` turns true between steps."""
    def check() -> None:
        if cancelled is not None and cancelled():
            raise Cancelled()

    iv = Intervention.of(intervention).normalized(runner.num_layers)
    runner.resolve(iv)                   # a route or a layer that does not fit: one line, before any work
    prompt = protocol.render_prompt(question["question"], runner.tokenizer)
    check()
    default, *rest = _outputs(runner, prompt, [Intervention()] + ([] if iv.is_default else [iv]), protocol, question,
                              top)
    edited = rest[0] if rest else None
    check()
    gold_id, gold_at, gold_index = gold_token(runner, prompt, default, question["gold"], _end(protocol))
    gold = None if gold_id is None else Token(gold_id, runner.token_texts([gold_id])[0], 0.0)
    split = None if edited is None else divergence(default.tokens, edited.tokens)
    trace = Trace(qid=str(question.get("qid", "")), gold=str(question["gold"]), prompt=prompt, default=default,
                  edited=edited, divergence=split, gold_token=gold, gold_position=gold_at, gold_index=gold_index,
                  position=0,
                  watched=(), at=(), lens_problem=default.traced.lens_problem, k=top)
    if position is None:
        position = split if split is not None else gold_at if gold_at is not None else 0
        position = min(position, max(trace.longest - 1, 0))
    return move(runner, trace, position)


def move(runner, trace: Trace, position: int) -> Trace:
    """The same outputs, read at token `position` (ReachError, one line, where no output has that token)."""
    longest = trace.longest
    if not 0 <= position < longest:
        sizes = " and ".join(str(len(o.tokens)) for o in trace.outputs)
        raise ReachError(f"position {position} is out of range: the output{'s have' if trace.edited else ' has'} "
                         f"{sizes} tokens (positions 0-{longest - 1})")
    reach = [o for o in trace.outputs if position < len(o.tokens)]
    watched = _watched(runner, reach, position, trace.gold_token)
    ids = [w.id for w in watched]
    at = []
    for o in reach:
        top = o.traced.top[position]
        texts = runner.token_texts([i for i, _ in top])
        chosen_id = o.tokens[position]
        chosen = Token(chosen_id, o.pieces[position], math.exp(o.logprobs[position]))
        gold_rank = gold_prob = None
        if trace.gold_token is not None:
            [(gold_rank, gold_prob)] = runner.ranks(o.traced.key, position, [trace.gold_token.id])
        rows = None if o.traced.lens_problem else tuple(runner.lens(o.traced.key, position, ids))
        at.append(At(output=o.name, chosen=chosen, top=tuple(Token(i, t, p) for (i, p), t in zip(top, texts)),
                     gold_rank=gold_rank, gold_prob=gold_prob, lens=rows,
                     lens_tops=tuple(runner.token_texts([r.top for r in rows])) if rows else ()))
    return replace(trace, position=position, watched=watched, at=tuple(at))


def _watched(runner, reach: list[Output], position: int, gold: Token | None) -> tuple[Watched, ...]:
    """The tokens the lens follows at `position`: each output's choice there, then the gold token."""
    labels: dict[int, list[str]] = {}
    for o in reach:
        labels.setdefault(o.tokens[position], []).append(o.name)
    if gold is not None:
        labels.setdefault(gold.id, []).append("gold")
    ids = list(labels)
    return tuple(Watched(i, t, "+".join(labels[i])) for i, t in zip(ids, runner.token_texts(ids)))


# ---- the failure set: where the gold token is best, and where it leaves the top-k ------------------------


def lens_summary(rows: Sequence[LensRow], k: int = TOP_K, watch: int = 0) -> dict[str, Any]:
    """Along one lens (rows per route position) for the watched token `watch`: its best rank and the first
    route position that has it, the last position where it is in the top `k`, its final rank and
    probability, and whether it was in the top k somewhere but not at the end (pushed out)."""
    ranks = [r.ranks[watch] for r in rows]
    best = min(ranks)
    best_at = ranks.index(best)
    inside = [i for i, r in enumerate(ranks) if r <= k]
    last = inside[-1] if inside else None
    final = len(rows) - 1
    return dict(best_rank=best, best_position=best_at, best_layer=rows[best_at].layer,
                last_topk_position=last, last_topk_layer=None if last is None else rows[last].layer,
                final_rank=ranks[-1], final_prob=rows[-1].probs[watch],
                pushed_out=last is not None and last < final, positions=len(rows))


def lens_row(runner, protocol, question: dict[str, Any], intervention: Intervention | None = None,
             k: int = TOP_K) -> dict[str, Any]:
    """One question's row of `reachtui export lens`: its output under `intervention` (the default: none),
    the gold token where that output leaves the gold, and `lens_summary` of it there."""
    iv = Intervention.of(intervention).normalized(runner.num_layers)
    prompt = protocol.render_prompt(question["question"], runner.tokenizer)
    [out] = _outputs(runner, prompt, [iv], protocol, question, k)
    gold_id, at, _ = gold_token(runner, prompt, out, question["gold"], _end(protocol))
    row = dict(qid=str(question["qid"]), gold=str(question["gold"]), answer=out.answer, correct=out.correct,
               position=at, gold_token=None if gold_id is None else runner.token_texts([gold_id])[0],
               chosen=None if at is None else out.pieces[at], note=None)
    empty = dict.fromkeys(("best_rank", "best_position", "best_layer", "last_topk_position", "last_topk_layer",
                           "final_rank", "final_prob", "pushed_out", "positions"))
    if gold_id is None or at is None:
        row.update(empty, note="the output has no token where the gold would begin")
    elif out.traced.lens_problem:
        row.update(empty, note=out.traced.lens_problem)
    else:
        row.update(lens_summary(runner.lens(out.traced.key, at, [gold_id]), k))
    return row


def lens_rows(runner, protocol, questions: Sequence[dict[str, Any]], intervention: Intervention | None = None, *,
              k: int = TOP_K, on_row: Callable[[int, dict], None] | None = None,
              cancelled: Callable[[], bool] | None = None) -> list[dict[str, Any]]:
    """`lens_row` of every question, in order (`on_row(i, row)` as each is done; `Cancelled` between two)."""
    rows = []
    for i, q in enumerate(questions):
        if cancelled is not None and cancelled():
            raise Cancelled()
        rows.append(lens_row(runner, protocol, q, intervention, k))
        if on_row is not None:
            on_row(i, rows[-1])
    return rows


def trace_json(trace: Trace) -> dict[str, Any]:
    """The trace as `reachtui trace --json` prints it."""
    def output(o: Output) -> dict[str, Any]:
        return dict(intervention=o.intervention, route=o.route, silenced=o.silenced or None, text=o.text,
                    answer=o.answer, correct=o.correct,
                    tokens=[dict(id=i, text=t, logprob=lp) for i, t, lp in zip(o.tokens, o.pieces, o.logprobs)])

    def at(a: At) -> dict[str, Any]:
        return dict(chosen=vars(a.chosen), top=[vars(t) for t in a.top],
                    gold=None if a.gold_rank is None else dict(rank=a.gold_rank, prob=a.gold_prob),
                    lens=None if a.lens is None else [
                        dict(position=r.position, layer=r.layer, top=dict(id=r.top, text=text),
                             watched=[dict(id=w.id, rank=rank, prob=prob)
                                      for w, rank, prob in zip(trace.watched, r.ranks, r.probs)])
                        for r, text in zip(a.lens, a.lens_tops)])

    return dict(qid=trace.qid, gold=trace.gold, prompt=trace.prompt,
                outputs={o.name: output(o) for o in trace.outputs}, divergence=trace.divergence,
                gold_token=None if trace.gold_token is None else dict(id=trace.gold_token.id, text=trace.gold_token.text),
                gold_position=trace.gold_position, gold_index=trace.gold_index, position=trace.position, k=trace.k,
                watched=[vars(w) for w in trace.watched], at={a.output: at(a) for a in trace.at},
                lens_problem=trace.lens_problem)
