"""The contract at the model boundary: what the engine hands a runner and what comes back. Pure Python.

`reachtui.model.run.Runner` (torch), `reachtui.serving.ServerRunner` and `reachtui.cluster.RayRunner`
implement `Runner` (on `RunnerDefaults`); tests drive the engine with a fake that implements it too. Nothing
here imports torch, so the engine, the app and the tables can name these types without loading a model.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from reachtui.errors import ReachError

if TYPE_CHECKING:
    from reachtui.intervention import Intervention


#: The sampler new runs draw with (recorded in the protocol, so a run never matches one drawn otherwise).
#: 1: one torch.Generator per row, torch.multinomial row by row (runs stored before version 2).
#: 2: inverse-CDF sampling of the whole batch at once, each row's uniform a counter-based hash of its seed
#:    and step (`reachtui.model.sampling`): the same noise on every device, batch-invariant.
SAMPLER_VERSION = 2
SAMPLERS = (1, 2)

#: The smallest temperature above 0: below it softmax(logits / T) overflows to NaN (0 is greedy decoding).
MIN_TEMPERATURE = 0.01


def check_decoding(temperature: float, top_p: float, *, where: str = "",
                   names: tuple[str, str] = ("temperature", "top_p")) -> None:
    """The one check of a decoding's temperature and top-p (a `Decoding`, a protocol and its probes, `reachtui
    generate`'s flags): a temperature is a finite 0 (greedy) or at least MIN_TEMPERATURE, below which every
    sample is NaN (a run would fail again on every resume); top-p is in (0, 1]. `where` opens the line and
    `names` are the two values as the caller's user writes them ("protocol: probe sample: ", --top-p)."""
    t, p = names
    if not math.isfinite(temperature):
        raise ReachError(f"{where}{t} must be a finite number, not {temperature}")
    if temperature < 0:
        raise ReachError(f"{where}{t} must be >= 0, not {temperature}")
    if 0 < temperature < MIN_TEMPERATURE:
        raise ReachError(f"{where}{t} {temperature} is below {MIN_TEMPERATURE}, where sampling overflows; use 0 for "
                         f"greedy decoding")
    if not 0 < top_p <= 1:
        raise ReachError(f"{where}{p} must be in (0, 1], not {top_p}")


@dataclass(frozen=True)
class Decoding:
    """How tokens are chosen: greedy at temperature 0, else sampling with top-p (by sampler `sampler`, see
    SAMPLER_VERSION); generation stops at `max_new_tokens`, EOS, or the first stop string (cut from the
    text)."""

    max_new_tokens: int = 48
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    sampler: int = SAMPLER_VERSION

    def __post_init__(self) -> None:
        check_decoding(self.temperature, self.top_p)

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    @classmethod
    def of(cls, protocol: Any, temperature: float | None = None, top_p: float | None = None) -> Decoding:
        """The protocol's decoding (its default one, or a probe's `temperature`/`top_p`): the one place a
        protocol becomes a Decoding, for the audit, the app's live runs and `reachtui generate`."""
        return cls(max_new_tokens=protocol.max_new_tokens,
                   temperature=protocol.temperature if temperature is None else temperature,
                   top_p=protocol.top_p if top_p is None else top_p, stop=tuple(protocol.stop),
                   sampler=protocol.sampler)


@dataclass
class Generation:
    """One prompt's output: the text (special tokens dropped, cut at the first stop string), every generated
    token id, their mean log-prob under the un-tempered distribution, and the compute it took
    (layers executed x tokens)."""

    text: str
    token_ids: list[int]
    mean_logprob: float
    new_tokens: int
    layers_executed: int
    compute: int
    prompt_tokens: int = 0
    finish: str = field(default="length")   # "eos" | "stop" | "length"



def adds_special_tokens(tokenizer: Any, prompt: str) -> bool:
    """Whether a prompt is tokenized with the tokenizer's special tokens (its BOS): yes, unless it already
    starts with the BOS token (a rendered chat template holds its own)."""
    bos: str | None = getattr(tokenizer, "bos_token", None)
    return not (bos and prompt.startswith(bos))


def prompt_ids(tokenizer: Any, prompt: str) -> list[int]:
    """The prompt's token ids as every runner feeds them to the model (`adds_special_tokens`)."""
    return list(tokenizer(prompt, add_special_tokens=adds_special_tokens(tokenizer, prompt))["input_ids"])


def prompt_token_counts(tokenizer: Any, prompts: Sequence[str]) -> list[int]:
    """len(prompt_ids(tokenizer, p)) for every prompt, tokenized as one batch per special-token setting (a
    fast tokenizer encodes a batch on all cores): what counts against the model's position limit."""
    counts = [0] * len(prompts)
    for special in (True, False):
        at = [i for i, p in enumerate(prompts) if adds_special_tokens(tokenizer, p) is special]
        if at:
            ids = tokenizer([prompts[i] for i in at], add_special_tokens=special)["input_ids"]
            for i, row in zip(at, ids):
                counts[i] = len(row)
    return counts


@dataclass(frozen=True)
class Traced:
    """One greedy (or sampled) generation read token by token (`Runner.inspect`): per generated token its
    text in context (`pieces`, which join to the decoded output), its log-prob and the `top` next tokens
    (id, probability) under the model's own logits at that step. `key` names the runner's record of the
    steps' logits and residual streams, which `ranks` and `lens` read; `lens_problem` says, in one line,
    why this model has no lens (None: it has one)."""

    generation: Generation
    route: tuple[int, ...]
    token_ids: tuple[int, ...]
    pieces: tuple[str, ...]
    logprobs: tuple[float, ...]
    top: tuple[tuple[tuple[int, float], ...], ...]
    key: int
    lens_problem: str | None = None


@dataclass(frozen=True)
class LensRow:
    """The logit lens at one route position: the residual stream after `layer` (its `position`-th block of
    the route) through the final norm and the unembedding. Per watched token its rank (1 = the top) and
    probability; `top` is the token on top there."""

    position: int
    layer: int
    ranks: tuple[int, ...]
    probs: tuple[float, ...]
    top: int


class Runner(Protocol):
    """Everything the engine (and the app, through it) asks of a runner: a model that generates. One owner at
    a time: every call holds `lock` (reentrant), so the app's live runs queue between the audit's batches.

    `RunnerDefaults` gives the members a runner may have nothing to say about (no position limit, no
    notes, nothing kept, no trace); tests/test_runner_contract.py checks that every runner has every member
    with a signature this one accepts, and mypy that each is a `Runner`."""

    @property
    def num_layers(self) -> int: ...

    @property
    def tokenizer(self) -> Any:
        """Renders chat templates and counts tokens; None where prompts need none."""

    @property
    def lock(self) -> threading.RLock: ...

    @property
    def batch_size_hint(self) -> int | None:
        """The most rows a batch holds since an out-of-memory error halved them (None: none did)."""

    @property
    def max_positions(self) -> int | None:
        """Prompt + generated tokens the model has positions for (None: no limit known, nothing checked)."""

    @property
    def info(self) -> dict[str, Any]:
        """What a run records of where it ran: name, path, model_class, device, dtype, versions, load_report."""

    @property
    def losses(self) -> Sequence[str]:
        """One line per worker lost mid-job (the audit prints them at its end)."""

    def generate(self, prompts: list[str], intervention: Intervention | None = None, *,
                 decoding: Decoding = Decoding(), seeds: list[int] | None = None,
                 batch_size: int = 64) -> list[Generation]:
        """Every prompt under one intervention (None: the model as deployed)."""

    def generate_many(self, prompts: list[str], interventions: Sequence[Intervention], *,
                      decoding: Decoding = Decoding(), seeds: list[list[int]] | None = None, batch_size: int = 64,
                      on_done: Callable[[int, list[Generation]], None] | None = None,
                      rows: list[list[int]] | None = None) -> list[list[Generation]]:
        """Every prompt under every intervention (`rows`: intervention i on prompts rows[i] only)."""

    def suggest_batch_size(self, prompts: list[str], max_new_tokens: int, route_len: int) -> tuple[int, str]:
        """Prompts per generation job for this device, and why."""

    def resolve(self, intervention: Intervention | None) -> Intervention:
        """The intervention checked against the model, its route written out (the identity route when it
        has none); ReachError, one line, where it does not fit the model."""

    def prompt_lengths(self, prompts: list[str]) -> list[int]:
        """Tokens of each prompt as the model is fed it (what counts against `max_positions`)."""

    def take_notes(self) -> list[str]:
        """What the runner has to tell the run since it was last asked (kept with the run as events)."""

    def forget_prefixes(self) -> None:
        """The engine is done with a phase of mixed calls: what was kept across them may go."""

    # -- reading one generation token by token (the app's trace pane, `reachtui trace`) ---------------

    def inspect(self, prompt: str, interventions: Sequence[Intervention | None], *, decoding: Decoding = Decoding(),
                seed: int = 0, top: int = 5) -> list[Traced]:
        """One prompt under each intervention, every step's logits and residual streams kept (`Traced.key`)."""

    def ranks(self, key: int, step: int, ids: Sequence[int]) -> list[tuple[int, float]]:
        """(rank, probability) of each token id under the model's own logits at `step` of trace `key`."""

    def lens(self, key: int, step: int, ids: Sequence[int]) -> list[LensRow]:
        """The logit lens at `step` of trace `key`, one row per route position, watching `ids`."""

    def continuation(self, prompt: str, text: str) -> list[int]:
        """The tokens `text` adds after `prompt` (as the prompt plus the text encode)."""

    def token_texts(self, ids: Sequence[int]) -> list[str]:
        """Each token id as text, on its own."""


class RunnerDefaults:
    """The members of `Runner` a runner may have nothing to say about, said once: no position limit known,
    prompts counted with `tokenizer`, no notes, nothing kept across calls, no worker lost, and no trace
    (`cannot_trace` says why, in the one line the app and `reachtui trace` show)."""

    tokenizer: Any = None
    batch_size_hint: int | None = None
    max_positions: int | None = None
    losses: Sequence[str] = ()
    cannot_trace = "this runner cannot read a generation token by token"

    def prompt_lengths(self, prompts: list[str]) -> list[int]:
        return prompt_token_counts(self.tokenizer, prompts)

    def take_notes(self) -> list[str]:
        return []

    def forget_prefixes(self) -> None:
        return None

    def inspect(self, prompt: str, interventions: Sequence[Intervention | None], *, decoding: Decoding = Decoding(),
                seed: int = 0, top: int = 5) -> list[Traced]:
        raise ReachError(self.cannot_trace)

    def ranks(self, key: int, step: int, ids: Sequence[int]) -> list[tuple[int, float]]:
        raise ReachError(self.cannot_trace)

    def lens(self, key: int, step: int, ids: Sequence[int]) -> list[LensRow]:
        raise ReachError(self.cannot_trace)

    def continuation(self, prompt: str, text: str) -> list[int]:
        raise ReachError(self.cannot_trace)

    def token_texts(self, ids: Sequence[int]) -> list[str]:
        raise ReachError(self.cannot_trace)


class PromptRefused(ReachError):
    """A runner's refusal of one prompt (a serving engine's context-length error), with the prompt: the engine
    names its question."""

    def __init__(self, message: str, prompt: str | None = None) -> None:
        super().__init__(message)
        self.prompt = prompt


@runtime_checkable
class CallPool(Protocol):
    """A runner with workers of its own (`--ray`): it runs many engine calls at once and yields
    (call index, intervention index, generations) as each intervention finishes."""

    def run_calls(self, calls: list, cancel: threading.Event | None = None
                  ) -> Generator[tuple[int, int, list], None, None]:
        ...
