"""Whether every question's prompt fits the model's positions, found before anything runs.

A question fits when its prompt, rendered exactly as the engine feeds it (template, few-shot examples, system
text, chat template), plus max_new_tokens stays within the model's position limit. `prompt_fit` checks a whole
task with the tokenizer alone — `audit`, `open`, `serve` and `generate` before the model loads, the engine again
with the runner's — and bounds its work, so that an absurd input is refused within seconds:

- a prompt of B UTF-8 bytes is at most B + SPECIAL_SLACK tokens (a token of a byte-level, SentencePiece or
  WordPiece vocabulary covers at least one byte; the slack holds BOS, EOS and a prefix space), so a short
  prompt fits without being tokenized (`reachtui open demo` loads no tokenizer before its first screen);
- a prompt of C characters is at least C / W tokens, W the longest token of the vocabulary in characters, so
  a prompt far over the limit and over EXACT_CHARS (thousands of few-shot examples) is over without being
  tokenized; the prompt
  around the question (its frame: system text, few-shot examples, template, chat markup) is looked at first,
  so such a task renders one prompt, not one per question;
- the rest are tokenized as one batch (`reachtui.generation.prompt_token_counts`, the runner's own rule).

`PromptFit.refusal` is the one line that names what does not fit and offers only fixes that can work;
`--skip-long` audits the questions that fit and stores the others with the run (`Store.skipped_questions`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from reachtui.errors import ReachError
from reachtui.generation import prompt_token_counts

#: Tokens a prompt may have beyond its UTF-8 bytes (BOS, EOS, a SentencePiece prefix space, ...).
SPECIAL_SLACK = 8
#: How many over-long question ids a refusal names.
SHOWN_IDS = 5
#: A prompt up to this many characters is tokenized even where its characters alone put it over the limit
#: (the refusal then names its length exactly); only a longer one is over by its characters.
EXACT_CHARS = 100_000


@dataclass(frozen=True)
class PromptFit:
    """What `prompt_fit` found: the limit (None: the model gives none, nothing is checked), the questions
    checked, and the over-long ones as (question id, prompt tokens) in task order, the tokens None where a
    prompt is over by its characters alone (not tokenized). `longest`: the longest over-long prompt's tokens
    (a lower bound where `at_least`); `frame`: tokens of the prompt without its question (None: not
    counted), `frame_parts` what can shorten it ("": nothing)."""

    limit: int | None
    max_new_tokens: int
    n: int
    over: tuple[tuple[str, int | None], ...] = ()
    longest: int = 0
    at_least: bool = False
    frame: int | None = None
    frame_parts: str = ""

    @property
    def skipped(self) -> tuple[tuple[str, int | None], ...]:
        """The questions `--skip-long` leaves out (the over-long ones)."""
        return self.over

    def check(self, skip_long: bool) -> None:
        """ReachError (`refusal`) unless every prompt fits, or `skip_long` and some do."""
        if self.over and not (skip_long and len(self.over) < self.n):
            raise ReachError(self.refusal(skip_long))

    def _ids(self) -> str:
        k = len(self.over)
        return (f"question id{'s' if k > 1 else ''} " + ", ".join(qid for qid, _ in self.over[:SHOWN_IDS])
                + (f" and {k - SHOWN_IDS:,} more" if k > SHOWN_IDS else ""))

    def left_out_line(self) -> str:
        """What --skip-long leaves out, said as the audit starts."""
        return (f"--skip-long: leaving out {len(self.over):,} of {self.n:,} questions whose prompt plus "
                f"--max-new-tokens {self.max_new_tokens} does not fit the model's position limit of "
                f"{int(self.limit or 0):,} tokens ({self._ids()}); the run stores them")

    def refusal(self, skip_long: bool = False) -> str:
        """One line: how many questions do not fit, the first ids, the longest prompt, the limit, and the fixes
        that can work — a lower --max-new-tokens only where the longest prompt leaves room for one, --skip-long
        only where some question fits, a shorter prompt around the question only where that alone would do."""
        k, n, limit = len(self.over), self.n, int(self.limit or 0)
        longest = f"{'at least ' if self.at_least else ''}{self.longest:,} tokens"
        if n == 1:      # one question (generate's PROMPT): its own words
            qid = self.over[0][0]
            head = (f"{qid if qid == 'PROMPT' else f'question id {qid}'}: the prompt is {longest}; with --max-new-tokens "
                    f"{self.max_new_tokens} it does not fit the model's position limit of {limit:,} tokens")
        else:
            head = (f"{k:,} of {n:,} questions do{'es' if k == 1 else ''} not fit the model's position limit of "
                    f"{limit:,} tokens with --max-new-tokens {self.max_new_tokens} ({self._ids()}; the longest "
                    f"prompt is {longest})")
        fixes = []
        if not self.at_least and self.longest < limit:
            fixes.append(f"--max-new-tokens {limit - self.longest} makes {'every prompt' if n > 1 else 'it'} fit")
        if k < n and not skip_long:
            fixes.append(f"--skip-long audits the other {n - k:,}")
        excess = self.longest - (limit - self.max_new_tokens)
        if self.frame_parts and self.frame is None and self.at_least:      # the frame alone is over
            fixes.append(f"the prompt around the question is too long by itself: {self.frame_parts}")
        elif self.frame_parts and self.frame is not None and not self.at_least and self.frame >= excess:
            fixes.append(f"the prompt around the question takes {self.frame:,} tokens: {self.frame_parts}")
        if skip_long and k == n:
            head += "; --skip-long leaves nothing to audit"
        if not fixes:
            return f"{head}; the question{'s themselves are' if n > 1 else ' itself is'} too long for this model"
        return f"{head}; {'; or '.join(fixes)}"


def longest_token(tokenizer: Any) -> int | None:
    """The most characters one token of the vocabulary covers (its longest entry, added tokens included); None
    for a tokenizer without a vocabulary to read."""
    try:
        vocab = tokenizer.get_vocab()
    except Exception:  # noqa: BLE001 - no vocabulary: no bound
        return None
    return max((len(t) for t in vocab), default=0) or None


#: A template's own text (less the question) from which a shorter --template is worth suggesting.
LONG_TEMPLATE = 100


def _frame_parts(protocol) -> str:
    """What can shorten the prompt around the question, as a refusal's fix ("" where nothing can): fewer
    few-shot examples, a shorter system text or (a long one) template, no chat template."""
    parts = []
    if protocol.fewshot:
        parts.append(f"fewer --fewshot examples ({len(protocol.fewshot):,} now)")
    if protocol.system:
        parts.append("a shorter --system")
    if len(protocol.template.replace("{question}", "")) > LONG_TEMPLATE:
        parts.append("a shorter --template")
    if protocol.chat:
        parts.append("--no-chat")
    return " or ".join(parts)


def _fits_by_bytes(prompt: str, room: int) -> bool:
    return len(prompt.encode("utf-8", "surrogatepass")) + SPECIAL_SLACK <= room


def prompt_fit(protocol, questions: Sequence[tuple[str, str]], limit: int | None, *,
               tokenizer: Callable[[], Any], count: Callable[[list[str]], list[int]] | None = None) -> PromptFit:
    """Check every (question id, question text) of `questions` under `protocol` against `limit` (the model's
    position limit; None: nothing to check). `tokenizer()` gives the tokenizer (None where there is none here),
    called only when a prompt needs it (a chat template, a prompt not short enough to fit by its bytes);
    `count(prompts)` counts tokens as the runner will (default: `prompt_token_counts` with that tokenizer)."""
    m = protocol.max_new_tokens
    n = len(questions)
    if not limit or not n:
        return PromptFit(limit, m, n)
    room = limit - m
    got: dict[str, Any] = {}

    def tok():
        if "tok" not in got:
            got["tok"] = tokenizer()
        return got["tok"]

    def width() -> int | None:
        if "width" not in got:
            got["width"] = longest_token(tok()) if tok() is not None else None
        return got["width"]

    counter = count if count is not None else (lambda prompts: prompt_token_counts(tok(), prompts))
    render = lambda q: protocol.render_prompt(q, tok() if protocol.chat else None)  # noqa: E731
    parts = _frame_parts(protocol)
    frame = render("")
    # the prompt around the question alone is over by its characters: every prompt is (none is rendered)
    if not _fits_by_bytes(frame, room) and (w := width()) and len(frame) > max(max(room, 0) * w, EXACT_CHARS):
        return PromptFit(limit, m, n, tuple((qid, None) for qid, _ in questions), math.ceil(len(frame) / w), True,
                         None, parts)
    prompts = [render(q) for _, q in questions]
    unsure = [i for i, p in enumerate(prompts) if not _fits_by_bytes(p, room)]
    # a prompt of more than `bound` characters is over by its characters alone: at least len / width tokens
    bound: int | None = None
    estimated: dict[int, int] = {}
    if unsure and (w := width()):
        bound = max(max(room, 0) * w, EXACT_CHARS)
        estimated = {i: math.ceil(len(prompts[i]) / w) for i in unsure if len(prompts[i]) > bound}
    to_count = [i for i in unsure if i not in estimated]
    tokens = dict(zip(to_count, counter([prompts[i] for i in to_count]))) if to_count else {}
    over = [i for i in unsure if i in estimated or tokens[i] > room]
    if not over:
        return PromptFit(limit, m, n)
    longest, at_least = max((estimated[i], True) if i in estimated else (tokens[i], False) for i in over)
    frame_tokens = None if bound is not None and len(frame) > bound else counter([frame])[0]
    return PromptFit(limit, m, n, tuple((questions[i][0], tokens.get(i)) for i in over), longest, at_least,
                     frame_tokens, parts)
