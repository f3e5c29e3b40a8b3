"""Stop strings found as tokens arrive, with host work per step that does not grow with the text.

The rule (unchanged): a row stops at the first step n at which
`any(s in tokenizer.decode(tokens[:n], skip_special_tokens=True) for s in stops)`. Decoding every row's
whole text at every step costs O(length) per row per step; `StopWatch` gets the same answer in three
levels:

1. a vocabulary table: token t can complete an occurrence of stop s only if s lies inside t's text, or a
   non-empty suffix of s is a prefix of t's text (s = [end of the earlier text] + [start of t's text]).
   t's text is taken both alone and after an ordinary token (a leading space some decoders add in
   context). Tokens whose text is empty, holds U+FFFD (a partial byte sequence) or a character that
   the tokenizer's clean-up moves (`. , ! ? '`) are always suspects, and a row is checked when either of
   its last two tokens is a suspect (decoders that act on a token's neighbour act on the next one).
2. for those rows only, the last W tokens are decoded (W covers the longest stop several times over); no
   stop there means none in the whole text (a decoder's effect of one token reaches a few characters).
   A window whose text is too short to tell is decoded whole instead.
3. a stop seen in a window is confirmed on the row's whole text, with the exact rule.

`confirm_final` runs the exact rule once more on each finished row's final text: a stop level 1 or 2
missed (none was ever seen) would show there, and the row is cut at the first step the exact rule names.
tests/test_stops.py compares it with the full-decode rule on random and adversarial token streams.
"""

from __future__ import annotations

import numpy as np

#: Characters `clean_up_tokenization` removes a space before: a token holding one can change the text
#: before it.
_CLEANUP_CHARS = frozenset(".,!?'")


def _backend_decode_batch(tokenizer):
    """The tokenizer's fast batch decode (the Rust backend), or None."""
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    decode_batch = getattr(backend, "decode_batch", None)
    return (lambda seqs: decode_batch(seqs, skip_special_tokens=True)) if callable(decode_batch) else None


def _ordinary_token(tokenizer) -> int | None:
    """A token id whose text is a plain letter (the context for a token's text as it reads mid-sentence)."""
    for text in ("a", "e", "x", "1"):
        try:
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        except Exception:  # noqa: BLE001 - a tokenizer that cannot encode it: try the next
            continue
        if len(ids) == 1:
            return int(ids[0])
    return None


def suspect_table(tokenizer, stops: tuple[str, ...]) -> np.ndarray | None:
    """Level 1: a bool per token id, True where the token may complete a stop (see the module); None
    when the tokenizer has no fast backend (every row is then checked at level 2)."""
    decode_batch = _backend_decode_batch(tokenizer)
    if decode_batch is None:
        return None
    size = len(tokenizer)
    ids = list(range(size))
    alone = decode_batch([[i] for i in ids])
    ctx = _ordinary_token(tokenizer)
    if ctx is not None:
        head = decode_batch([[ctx]])[0]
        pairs = decode_batch([[ctx, i] for i in ids])
        after = [p[len(head):] if p.startswith(head) else None for p in pairs]
    else:
        after = alone
    cleanup = bool(getattr(tokenizer, "clean_up_tokenization_spaces", False))
    out = np.zeros(size, dtype=bool)
    for i in ids:
        for text in (alone[i], after[i]):
            if text is None or text == "" or "\ufffd" in text or (cleanup and not _CLEANUP_CHARS.isdisjoint(text)):
                out[i] = True
                break
            if any(s in text or any(text.startswith(s[-k:]) for k in range(1, len(s))) for s in stops):
                out[i] = True
                break
    return out


def cut_at_stop(text: str, stops) -> tuple[str, bool]:
    """Cut `text` at the earliest occurrence of any stop string."""
    best = -1
    for s in stops:
        if s:
            k = text.find(s)
            if k >= 0 and (best < 0 or k < best):
                best = k
    return (text[:best], True) if best >= 0 else (text, False)


def has_stop(text: str, stops) -> bool:
    return any(s in text for s in stops)


class StopWatch:
    """Which rows' texts newly hold a stop string, step by step (see the module). `check` is given the
    tokens so far of every row (a [rows, max_new] array with `length[row]` tokens each)."""

    def __init__(self, tokenizer, stops, table: np.ndarray | None = None) -> None:
        self.tokenizer = tokenizer
        self.stops = tuple(s for s in stops if s)
        self.table = table
        longest = max((len(s) for s in self.stops), default=1)
        self.window = 16 + 4 * longest
        self.margin = 8 + longest
        self.full_decodes = 0          # level-3 decodes (for the benchmarks)
        self.window_decodes = 0

    def _decode(self, seqs: list[list[int]]) -> list[str]:
        return self.tokenizer.batch_decode(seqs, skip_special_tokens=True)

    def suspects(self, tokens: np.ndarray) -> np.ndarray:
        """Which of these token ids may take part in a stop string (the suspect table; an id the tokenizer
        does not know always may; every id without a table)."""
        tokens = np.asarray(tokens)
        if self.table is None:
            return np.ones(tokens.shape, dtype=bool)
        inside = (tokens >= 0) & (tokens < len(self.table))
        sus = ~inside                   # an id the tokenizer does not know: always checked
        sus[inside] |= self.table[tokens[inside]]
        return sus

    def check(self, tokens: np.ndarray, length: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Of `rows` (each just given its token at index length[row] - 1), those whose text now holds a
        stop, by the exact rule."""
        if not self.stops or len(rows) == 0:
            return rows[:0]
        rows = np.asarray(rows)
        if self.table is not None:
            last = tokens[rows, length[rows] - 1]
            prev = np.where(length[rows] >= 2, tokens[rows, np.maximum(length[rows] - 2, 0)], last)
            rows = rows[self.suspects(last) | self.suspects(prev)]
        if len(rows) == 0:
            return rows
        starts = np.maximum(length[rows] - self.window, 0)
        windows = [tokens[r, s:length[r]].tolist() for r, s in zip(rows, starts)]
        tails = [w[-2:] for w in windows]
        self.window_decodes += len(windows)
        texts = self._decode(windows + tails)
        wins, tail_texts = texts[:len(windows)], texts[len(windows):]
        hits, full = [], []
        for k, (r, s) in enumerate(zip(rows, starts)):
            if s == 0:                  # the window is the whole text: the exact rule itself
                if has_stop(wins[k], self.stops):
                    hits.append(r)
            elif has_stop(wins[k], self.stops) or len(wins[k]) < len(tail_texts[k]) + self.margin:
                full.append(r)
        if full:
            self.full_decodes += len(full)
            texts = self._decode([tokens[r, :length[r]].tolist() for r in full])
            hits += [r for r, text in zip(full, texts) if has_stop(text, self.stops)]
        return np.asarray(sorted(hits), dtype=rows.dtype)

    def first_stop(self, ids: list[int]) -> int | None:
        """The exact rule on one row's tokens: the first count n whose text holds a stop (None: none)."""
        if not self.stops or not has_stop(self.tokenizer.decode(ids, skip_special_tokens=True), self.stops):
            return None
        texts = self._decode([ids[:n] for n in range(1, len(ids) + 1)])
        return next((n for n, t in enumerate(texts, 1) if has_stop(t, self.stops)), None)
