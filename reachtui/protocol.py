"""The protocol: everything that decides an audit's outcomes, frozen, validated and hashed.

The hash identifies a run's protocol: it covers every field that can change an attempt (prompt, answer
format, stop strings, decoding, probes with budgets/temperatures, route sampler, MCTS, seed, the sampler and
the serving engine, if one generates) or the chance
control reported beside every reachability figure, and nothing that cannot (the model, the store path).
Values are coerced on construction (a temperature of 1 is 1.0, probes in canonical order), so equal
protocols written differently hash the same.

Comparisons match per probe (`Protocol.match_keys`, beside the hash): two runs are matched on realized when
their deployment settings agree, and on a probe when those and the probe's own settings agree, whatever
other probes either run has.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, NamedTuple, TypeVar

from reachtui.errors import ReachError, first_line
from reachtui.generation import SAMPLER_VERSION, SAMPLERS, check_decoding
from reachtui.grading import FORMATS
from reachtui.probes import registry
from reachtui.seeds import seed_deriver

PROBE_NAMES = tuple(registry.names())  # the probes a protocol may list, in order; realized always runs
ROUTES_MODES = ("shared", "per_question")
CONTROL_STRATA = ("format", "none")
DEFAULT_TEMPLATE = "Question: {question}\nAnswer:"
#: The most attempts per question a probe may have (K): a plan of questions x K work items is built whole.
MAX_BUDGET = 10_000
#: The most new tokens one answer may ask for (checked again against the model's position limit).
MAX_NEW_TOKENS = 1 << 24
#: Seeds are stored as SQLite integers.
MAX_SEED = 2**63 - 1
CHAT_TEMPLATE = "{question}"
_T = TypeVar("_T")


def _num(value: Any, name: str, kind: type) -> Any:
    """Coerce an int/float field, refusing bools, strings and non-finite floats."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReachError(f"protocol: {name} must be a number, not {value!r}")
    if kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise ReachError(f"protocol: {name} must be a whole number, not {value!r}")
        return int(value)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ReachError(f"protocol: {name} must be finite, not {_short(value)}")
    return number


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"


def _at_most(value: int | float, limit: int | float, name: str, why: str) -> None:
    if value > limit:
        raise ReachError(f"protocol: {name} must be at most {limit} ({why}), not {_short(value)}")


def _coerce(obj, prefix: str) -> None:
    """Coerce a frozen dataclass's numeric fields in place (bool/int/float by annotation)."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        name = f"{prefix}{f.name}"
        if f.type in ("int", "float"):
            object.__setattr__(obj, f.name, _num(value, name, int if f.type == "int" else float))
        elif f.type == "bool" and not isinstance(value, bool):
            raise ReachError(f"protocol: {name} must be true or false, not {value!r}")


#: The settings of the default deployment procedure: two runs' realized attempts are comparable when these agree
#: (with the grader, and the sampler where the default decoding samples). Every probe's attempts depend on them too.
DEPLOYMENT_FIELDS = ("template", "chat", "system", "fewshot", "answer_format", "choices", "stop", "max_new_tokens",
                     "temperature", "top_p", "seed")

#: (table, field, value before the field existed): settings added after runs were first stored. At that
#: value they are left out of the canonical JSON, so the hash of an older run's protocol does not change.
LATER_FIELDS = (("mcts", "widening", 2.0), ("", "sampler", 1), ("", "engine", None))


@dataclass(frozen=True)
class ProbeSpec:
    """One probe and its budget K. `temperature` defaults per probe (its registry record): 1.0 for
    sampling, 0.0 (greedy under each route) for the route probes."""

    name: str
    budget: int = 16
    temperature: float = None  # type: ignore[assignment]  # resolved in __post_init__
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if self.name not in PROBE_NAMES:
            raise ReachError(f"protocol: unknown probe {self.name!r} (known: {', '.join(PROBE_NAMES)})")
        if self.temperature is None:
            object.__setattr__(self, "temperature", registry.get(self.name).temperature)
        _coerce(self, f"probe {self.name}: ")
        if self.budget < 1:
            raise ReachError(f"protocol: probe {self.name}: budget must be at least 1, not {self.budget}")
        if self.budget > MAX_BUDGET:
            raise ReachError(f"protocol: probe {self.name}: budget must be at most {MAX_BUDGET}, not {self.budget}")
        check_decoding(self.temperature, self.top_p, where=f"protocol: probe {self.name}: ")


#: The largest route-sampler settings (far above any route studied; beyond them a draw never ends).
ROUTE_LIMITS = {"max_frac": (2.0, "a route of at most twice the model's layers"),
                "max_actions": (16, "actions applied to draw one route"),
                "max_block": (16, "layers skipped or repeated by one action"),
                "max_repeat": (8, "runs of one layer in a route")}


@dataclass(frozen=True)
class RouteSamplerParams:
    """Random layer routes: length as a fraction of the model's layers, 1-3 skip/repeat actions on blocks
    of up to 4 layers, a layer at most twice, first/last layers kept. Bounded (`ROUTE_LIMITS`): each route
    is drawn action by action, over every legal block, and every position of a route is a KV-cache slot."""

    min_frac: float = 0.6
    max_frac: float = 1.2
    min_actions: int = 1
    max_actions: int = 3
    max_block: int = 4
    max_repeat: int = 2
    keep_first: bool = True
    keep_last: bool = True

    def __post_init__(self) -> None:
        _coerce(self, "route_sampler.")
        if not 0 < self.min_frac <= self.max_frac:
            raise ReachError("protocol: route_sampler needs 0 < min_frac <= max_frac")
        if not 1 <= self.min_actions <= self.max_actions:
            raise ReachError("protocol: route_sampler needs 1 <= min_actions <= max_actions")
        if self.max_block < 1 or self.max_repeat < 1:
            raise ReachError("protocol: route_sampler.max_block and max_repeat must be at least 1")
        for name, (limit, why) in ROUTE_LIMITS.items():
            _at_most(getattr(self, name), limit, f"route_sampler.{name}", why)


@dataclass(frozen=True)
class MctsParams:
    """UCB = mean reward - lam * len/L + c * sqrt(ln N / n); a random child with probability p_random.
    Progressive widening: a node visited N times holds at most 1 + floor(widening * sqrt(N)) children
    (widening = 0: no limit, every untried action is expanded before the search descends)."""

    c: float = math.sqrt(2)
    lam: float = 5.0
    p_random: float = 0.1
    widening: float = 2.0

    def __post_init__(self) -> None:
        _coerce(self, "mcts.")
        if self.c < 0 or self.lam < 0 or self.widening < 0:
            raise ReachError("protocol: mcts.c, mcts.lam and mcts.widening must be >= 0")
        if not 0 <= self.p_random <= 1:
            raise ReachError(f"protocol: mcts.p_random must be in [0, 1], not {self.p_random}")


@dataclass(frozen=True)
class ControlParams:
    """The chance control (see `reachtui/control.py`): each question's attempts are re-scored against the
    gold answer of another question, a fixed derangement seeded by `seed`, within strata: "format" = the
    answer-format stratum (numbers: sign, integer or not, digits of the integer part; choice: one
    stratum), "none" = the whole task. It changes no attempt, only the control numbers beside them."""

    seed: int = 0
    strata: str = "format"

    def __post_init__(self) -> None:
        _coerce(self, "control.")
        if self.seed < 0:
            raise ReachError(f"protocol: control.seed must be >= 0, not {self.seed}")
        _at_most(self.seed, MAX_SEED, "control.seed", "a 64-bit integer")
        if self.strata not in CONTROL_STRATA:
            known = ", ".join(CONTROL_STRATA)
            raise ReachError(f"protocol: control.strata must be one of {known}, not {self.strata!r}")


def _default_probes() -> tuple[ProbeSpec, ...]:
    return (ProbeSpec(registry.SAMPLE.name), ProbeSpec(registry.ROUTES.name))



class Sampling(NamedTuple):
    """The temperature and top-p one probe's attempts are drawn with (`Protocol.decoding_of`), by name from
    the protocol to the planned attempt (`engine.plan.Work`) and the runner's `Decoding`."""

    temperature: float
    top_p: float

@dataclass(frozen=True)
class Protocol:
    template: str = DEFAULT_TEMPLATE  # plain template; {question}
    chat: bool = False
    system: str | None = None
    fewshot: tuple[tuple[str, str], ...] = ()
    answer_format: str = "number"
    choices: int | None = None  # number of options m for answer_format "choice" (chance baseline)
    stop: tuple[str, ...] = ("\n",)
    max_new_tokens: int = 48
    temperature: float = 0.0  # default (deployment) decoding: greedy
    top_p: float = 1.0
    probes: tuple[ProbeSpec, ...] = field(default_factory=_default_probes)
    routes_mode: str = "shared"  # "shared" pool of K routes | "per_question"
    route_sampler: RouteSamplerParams = field(default_factory=RouteSamplerParams)
    mcts: MctsParams = field(default_factory=MctsParams)
    seed: int = 0
    control: ControlParams = field(default_factory=ControlParams)  # the chance control's derangement
    sampler: int = SAMPLER_VERSION  # how sampled tokens are drawn (reachtui.generation.SAMPLER_VERSION)
    #: where attempts are generated: None in-process (reachtui's own decoding), else the serving engine
    #: (`reachtui.serving`: "KIND VERSION serving NAME"), whose sampler draws instead. Set by the command.
    engine: str | None = None

    def __post_init__(self) -> None:
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        _coerce(self, "")
        if not isinstance(self.template, str) or (not self.chat and "{question}" not in self.template):
            raise ReachError("protocol: template must contain {question} (unless chat = true)")
        if self.system is not None and not isinstance(self.system, str):
            raise ReachError("protocol: system must be text")
        try:
            set_("fewshot", tuple((str(q), str(a)) for q, a in self.fewshot))
        except (TypeError, ValueError):
            raise ReachError("protocol: fewshot must be a list of [question, answer] pairs") from None
        if isinstance(self.stop, str) or not all(isinstance(s, str) and s for s in self.stop):
            raise ReachError("protocol: stop must be a list of non-empty strings")
        set_("stop", tuple(self.stop))
        if self.answer_format not in FORMATS:
            raise ReachError(f"protocol: unknown answer_format {self.answer_format!r} (known: {', '.join(FORMATS)})")
        if self.choices is not None:
            set_("choices", _num(self.choices, "choices", int))
            if self.answer_format != "choice" or not 2 <= self.choices <= 26:
                raise ReachError("protocol: choices (2-26 options) only goes with answer_format = 'choice'")
        if self.max_new_tokens < 1:
            raise ReachError(f"protocol: max_new_tokens must be at least 1, not {self.max_new_tokens}")
        _at_most(self.max_new_tokens, MAX_NEW_TOKENS, "max_new_tokens", "tokens of one answer")
        check_decoding(self.temperature, self.top_p, where="protocol: ")
        if self.seed < 0:
            raise ReachError(f"protocol: seed must be >= 0, not {self.seed}")
        _at_most(self.seed, MAX_SEED, "seed", "a 64-bit integer")
        if self.engine is not None and (not isinstance(self.engine, str) or not self.engine.strip()):
            raise ReachError(f"protocol: engine must be a non-empty text, not {_short(self.engine)}")
        if self.sampler not in SAMPLERS:
            raise ReachError(f"protocol: sampler must be one of {', '.join(map(str, SAMPLERS))}, not {self.sampler}")
        if self.routes_mode not in ROUTES_MODES:
            known = ", ".join(ROUTES_MODES)
            raise ReachError(f"protocol: routes_mode must be one of {known}, not {self.routes_mode!r}")
        probes = tuple(self.probes)
        if not all(isinstance(p, ProbeSpec) for p in probes):
            raise ReachError("protocol: probes must be ProbeSpec values")
        names = [p.name for p in probes]
        if len(set(names)) != len(names):
            raise ReachError(f"protocol: a probe is listed twice in {', '.join(names)}")
        set_("probes", tuple(sorted(probes, key=lambda p: PROBE_NAMES.index(p.name))))

    # ------------------------------------------------------------------------------------ dict/hash

    def to_dict(self) -> dict:
        """Plain JSON/TOML-ready values (tuples become lists); `from_dict(to_dict())` == self."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["fewshot"] = [list(pair) for pair in self.fewshot]
        d["stop"] = list(self.stop)
        d["probes"] = [{f.name: getattr(p, f.name) for f in fields(p)} for p in self.probes]
        d["route_sampler"] = {f.name: getattr(self.route_sampler, f.name) for f in fields(RouteSamplerParams)}
        d["mcts"] = {f.name: getattr(self.mcts, f.name) for f in fields(MctsParams)}
        d["control"] = {f.name: getattr(self.control, f.name) for f in fields(ControlParams)}
        return d

    @classmethod
    def from_dict(cls, d: dict, *, stored: bool = False) -> Protocol:
        """Build from `to_dict()`-shaped data (missing keys take defaults; unknown keys are errors).
        `stored`: the data is a stored run's protocol, where a missing `sampler` means version 1 (the
        canonical JSON leaves it out at that value, and runs stored before it existed drew with it)."""
        if not isinstance(d, dict):
            raise ReachError("protocol: expected a table of settings")
        d = dict(d)
        if stored:
            d.setdefault("sampler", 1)
        d.pop("grader", None)    # written by canonical_json; the running grader's version is what counts
        _known(d, cls, "")
        if d.get("chat") is True and "template" not in d:
            d["template"] = CHAT_TEMPLATE
        if "fewshot" in d:
            d["fewshot"] = _fewshot(d["fewshot"])
        if "stop" in d:
            d["stop"] = [d["stop"]] if isinstance(d["stop"], str) else d["stop"]
            if not isinstance(d["stop"], (list, tuple)):
                raise ReachError("protocol: stop must be a list of strings")
        if "probes" in d:
            if not isinstance(d["probes"], (list, tuple)):
                raise ReachError("protocol: probes must be a list of tables")
            d["probes"] = tuple(_sub(ProbeSpec, p, "probes") for p in d["probes"])
        for key, kind in (("route_sampler", RouteSamplerParams), ("mcts", MctsParams), ("control", ControlParams)):
            if key in d:
                d[key] = _sub(kind, d[key], key)
        return cls(**d)

    def canonical_json(self) -> str:
        """`to_dict()` as sorted compact JSON, without the fields added after the first release while
        they hold the value that release used (`LATER_FIELDS`): older runs keep their hashes. The
        grader's version joins from version 2 on: a run stored under another grader no longer matches."""
        from reachtui.grading import GRADER_VERSION

        d = self.to_dict()
        for table, name, old in LATER_FIELDS:
            holder = d[table] if table else d
            if holder.get(name) == old:
                del holder[name]
        if GRADER_VERSION != 1:            # the grader that decides "correct" (version 1: before it counted)
            d["grader"] = GRADER_VERSION
        return json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)

    def hash(self) -> str:
        """12 hex chars identifying the outcome-relevant settings (sha256 of `canonical_json`: sorted keys,
        no spaces, floats as Python's shortest round-trip repr); equal hashes = comparable runs."""
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()[:12]

    def match_settings(self, probe: str = registry.REALIZED.name) -> dict:
        """What two runs must share to be compared on `probe` ("realized": the default deployment). The
        deployment: DEPLOYMENT_FIELDS and the grader's version, and the sampler version (with the serving
        engine, if any) where the default decoding samples. A probe: the deployment, and its own spec (budget,
        temperature, top_p; the sampler and engine where it samples) with the protocol sections its registry record `reads` (routes: the routes mode
        and the route sampler; MCTS: the route sampler and the search's settings). The chance control's
        settings are in neither: no attempt depends on them."""
        from reachtui.grading import GRADER_VERSION

        d = self.to_dict()
        deployment = {k: d[k] for k in DEPLOYMENT_FIELDS}
        deployment["grader"] = GRADER_VERSION
        if self.temperature > 0:
            deployment.update(self._drawn_by())
        if probe == registry.REALIZED.name:
            return deployment
        spec = self.probe(probe)
        if spec is None:
            raise ReachError(f"protocol: no probe {probe!r} in this protocol")
        own = {f.name: getattr(spec, f.name) for f in fields(spec)}
        if spec.temperature > 0:
            own.update(self._drawn_by())
        for section in registry.get(probe).reads:
            own[section] = d[section]
        return {"deployment": deployment, "probe": own}

    def _drawn_by(self) -> dict:
        """What draws sampled tokens: the sampler version, and the serving engine where there is one (greedy
        decoding is the same wherever it runs, so only where something samples)."""
        return {"sampler": self.sampler} if self.engine is None else {"sampler": self.sampler, "engine": self.engine}

    def match_keys(self) -> dict[str, str]:
        """{"realized": the deployment's key, each probe: its key}, 12 hex chars each (sha256 of
        `match_settings` as canonical JSON). Two runs are matched on a probe when its key is the same in
        both; `hash` (the whole protocol) identifies the run."""
        names = [registry.REALIZED.name] + [p.name for p in self.probes]
        return {name: _key(self.match_settings(name)) for name in names}

    def probe(self, name: str) -> ProbeSpec | None:
        return next((p for p in self.probes if p.name == name), None)

    def decoding_of(self, probe: str) -> Sampling:
        """How the attempts stored as `probe` were drawn: a budgeted probe's own spec; realized, mlp:<L> and
        explore:<id> decode as deployed (the protocol's default). The engine decodes with this and an export
        recomputes it, so the store does not keep it."""
        spec = self.probe(probe) if probe != registry.REALIZED.name else None
        if spec is not None:
            return Sampling(temperature=spec.temperature, top_p=spec.top_p)
        return Sampling(temperature=self.temperature, top_p=self.top_p)

    def attempt_seeder(self):
        """`(probe, route, silenced, task index, attempt) -> seed` of a sampled attempt (stored route and
        silenced text): the seed the engine gave it (`reachtui.seeds.attempt_seed` in the probe's seed
        stream), recomputed for an export. Caches one deriver per stream."""
        from reachtui.intervention import stream_of

        derivers: dict[tuple, Any] = {}

        def seed(probe: str, route: str | None, silenced: str | None, task_index: int, attempt: int) -> int:
            derive = derivers.get((probe, route, silenced))
            if derive is None:
                derive = derivers[probe, route, silenced] = seed_deriver(
                    self.seed, stream_of(probe, route, silenced))
            return derive(task_index, attempt)

        return seed

    # ------------------------------------------------------------------------------------ prompts

    def render_prompt(self, question: str, tokenizer=None) -> str:
        """The text the model is given for `question`.

        plain: `template` with `{question}` replaced (only that placeholder; other braces are literal, LaTeX
        is safe). Few-shot examples come first, each rendered with the same template followed by its answer
        (joined by one space unless the answer starts with whitespace), examples and question separated by
        a blank line. A `system` text, if any, opens the prompt, followed by a blank line.

        chat: the tokenizer's own chat template (`apply_chat_template(..., add_generation_prompt=True,
        enable_thinking=False)`; templates that know no `enable_thinking` ignore it). Messages: the system
        prompt, few-shot pairs as earlier user/assistant turns, then the question; each user turn is
        `template` with `{question}` replaced (default "{question}" in chat mode). The text returned already
        holds the template's special tokens (BOS and all): tokenize it with `add_special_tokens=False`."""
        fill = lambda q: self.template.replace("{question}", q)  # noqa: E731
        if not self.chat:
            parts = [self.system] if self.system else []
            for q, a in self.fewshot:
                parts.append(fill(q) + ("" if a[:1].isspace() else " ") + a)
            parts.append(fill(question))
            return "\n\n".join(parts)
        if tokenizer is None:
            raise ReachError("protocol: chat = true needs the model's tokenizer to render prompts")
        if not getattr(tokenizer, "chat_template", None):
            raise ReachError("protocol: chat = true but the tokenizer has no chat template; use a plain template")
        messages = [{"role": "system", "content": self.system}] if self.system else []
        for q, a in self.fewshot:
            messages += [{"role": "user", "content": fill(q)}, {"role": "assistant", "content": a}]
        messages.append({"role": "user", "content": fill(question)})
        try:
            return tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
            )
        except Exception as exc:  # jinja TemplateError ("System role not supported", ...)
            raise ReachError(f"protocol: the chat template refused the prompt: {first_line(exc)}") from None


def _key(settings: dict) -> str:
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def match_differences(a: Protocol, b: Protocol, probe: str = registry.REALIZED.name) -> list[str]:
    """The settings that keep two protocols from matching on `probe` (`Protocol.match_settings`), each as
    "name A vs B" (nested ones dotted: "route_sampler.max_block 4 vs 3"; a value over 40 characters is only
    named); empty when they match."""
    def flat(d: dict, prefix: str = "") -> dict:
        out = {}
        for k, v in d.items():
            name = k if k in ("deployment", "probe") else f"{prefix}{k}"
            if isinstance(v, dict):
                out.update(flat(v, "" if k in ("deployment", "probe") else f"{name}."))
            else:
                out[name] = v
        return out

    def said(k: str) -> str:     # a long value (a template, few-shot examples) is named, not printed
        va, vb = (json.dumps(f.get(k), ensure_ascii=False) for f in (fa, fb))
        return f"{k} {va} vs {vb}" if max(len(va), len(vb)) <= 40 else f"{k} differs"

    fa, fb = flat(a.match_settings(probe)), flat(b.match_settings(probe))
    return [said(k) for k in sorted(set(fa) | set(fb), key=lambda k: (k not in DEPLOYMENT_FIELDS, k))
            if fa.get(k) != fb.get(k)]


def _known(d: dict, kind: type, where: str) -> None:
    names = {f.name for f in fields(kind)}
    for key in d:
        if key not in names:
            raise ReachError(f"protocol: unknown key {where}{key!r} (known: {', '.join(sorted(names))})")


def _sub(kind: type, d: Any, where: str):
    if isinstance(d, kind):
        return d
    if not isinstance(d, dict):
        raise ReachError(f"protocol: {where} must be a table")
    _known(d, kind, f"{where}.")
    return kind(**d)


def _fewshot(raw: Any) -> tuple[tuple[str, str], ...]:
    """Few-shot examples as [question, answer] pairs or {question = ..., answer = ...} tables."""
    if not isinstance(raw, (list, tuple)):
        raise ReachError("protocol: fewshot must be a list of [question, answer] pairs")
    out = []
    for item in raw:
        if isinstance(item, dict) and set(item) == {"question", "answer"}:
            item = (item["question"], item["answer"])
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(x, str) for x in item)):
            raise ReachError("protocol: each fewshot example must be [question, answer] (two strings)")
        out.append(tuple(item))
    return tuple(out)


def load_protocol_file(path) -> Protocol:
    """A protocol from TOML with `to_dict()`'s keys: top-level settings, `[route_sampler]`, `[mcts]`, `[control]`,
    `[[probes]]` tables, `fewshot = [["q", "a"], ...]` (or `[[fewshot]]` with question/answer)."""
    from reachtui.inputs import PROTOCOL, short_name
    from reachtui.parsing import toml_file

    data = toml_file(path, short_name(str(path)), kind=PROTOCOL, missing="no such protocol file")
    try:
        return Protocol.from_dict(data)
    except ReachError as exc:
        raise ReachError(f"{path}: {str(exc).removeprefix('protocol: ')}") from None
    except TypeError as exc:
        raise ReachError(f"{path}: {exc}") from None


def read_stored(protocol_json: str, name: str = "a run") -> Protocol:
    """The protocol stored as `protocol_json` (a run's `runs.protocol_json`, `name` saying whose): older forms
    read as they were meant (`from_dict(stored=True)`); one ReachError line when it cannot be read. The store
    gives every reader a run's protocol through this (`Store.run_protocol`)."""
    try:
        return Protocol.from_dict(json.loads(protocol_json), stored=True)
    except (ValueError, TypeError, RecursionError) as exc:
        raise ReachError(f"{name}: its stored protocol cannot be read ({_short(str(exc))})") from None
    except ReachError as exc:
        raise ReachError(f"{name}: its stored protocol cannot be read ({str(exc).removeprefix('protocol: ')})") \
            from None


def protocol_to_toml(protocol: Protocol, comments: Sequence[str] = ()) -> str:
    """TOML that `load_protocol_file` reads back to the same protocol (for `--protocol` files), every value
    written by tomli-w (any text: control characters, DEL, quotes, backslashes); top-level settings first,
    then [route_sampler], [mcts], [control] and one [[probes]] table per probe. `comments`: first lines
    `# ...` (control characters written as spaces: TOML allows none in a comment)."""
    import tomli_w

    d = protocol.to_dict()
    tables = ("route_sampler", "mcts", "control")
    top = {k: v for k, v in d.items() if k not in (*tables, "probes") and v is not None}   # TOML has no null
    if not d["probes"]:
        top["probes"] = []
    parts = [tomli_w.dumps(top)] + [tomli_w.dumps({t: d[t]}) for t in tables]
    parts += ["[[probes]]\n" + tomli_w.dumps(p) for p in d["probes"]]
    head = "".join("# " + re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", " ", line) + "\n" for line in comments)
    return head + "\n".join(parts)


def protocol_from_options(
    base: Protocol,
    *,
    probes: str | list[str] | tuple[str, ...] | None = None,
    budget: int | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    max_new_tokens: int | None = None,
    answer_format: str | None = None,
    routes_mode: str | None = None,
    chat: bool | None = None,
    system: str | None = None,
    template: str | None = None,
    stop: Sequence[str] | None = None,
    fewshot: Sequence[tuple[str, str]] | None = None,
) -> Protocol:
    """Apply the audit/open commands' flags to `base` (None = keep). `probes` is "realized,sample,routes"
    ("realized" always runs, listing it is optional); a listed probe keeps its settings from `base`;
    `budget` sets K for every probe; `temperature`/`top_p` set the `sample` probe's decoding. `chat` without
    a `template` switches the default template with it (plain: DEFAULT_TEMPLATE, chat: the bare question)."""
    specs = list(base.probes)
    if probes is not None:
        names = [n.strip() for n in (probes.split(",") if isinstance(probes, str) else probes)]
        if not any(names):
            raise ReachError(f"--probes {probes if isinstance(probes, str) else ','.join(probes)!r} names no probe "
                             f"(--probes {registry.REALIZED.name} audits the default output alone)")
        names = [n for n in names if n and n != registry.REALIZED.name]
        unknown = [n for n in names if n not in PROBE_NAMES]
        if unknown:
            raise ReachError(f"unknown probe {unknown[0]!r} (known: realized, {', '.join(PROBE_NAMES)})")
        specs = [base.probe(n) or ProbeSpec(n) for n in dict.fromkeys(names)]
    if budget is not None:
        if not specs:
            raise ReachError(f"--budget {budget}: no probe to give it to (the audit runs {registry.REALIZED.name} "
                             f"only)")
        specs = [replace(p, budget=budget) for p in specs]
    sample = registry.SAMPLE.name
    for flag, value in (("--temperature", temperature), ("--top-p", top_p)):
        if value is not None and not any(p.name == sample for p in specs):
            raise ReachError(f"{flag} {value} sets the {sample} probe's decoding, but that probe is not in this audit")
    if temperature is not None:
        specs = [replace(p, temperature=temperature) if p.name == sample else p for p in specs]
    if top_p is not None:
        specs = [replace(p, top_p=top_p) if p.name == sample else p for p in specs]
    if chat and template is None and base.template == DEFAULT_TEMPLATE:
        template = CHAT_TEMPLATE
    if chat is False and template is None and base.chat and base.template == CHAT_TEMPLATE:
        template = DEFAULT_TEMPLATE
    return replace(base, probes=tuple(specs), seed=_given(seed, base.seed),
                   max_new_tokens=_given(max_new_tokens, base.max_new_tokens),
                   answer_format=_given(answer_format, base.answer_format),
                   routes_mode=_given(routes_mode, base.routes_mode), chat=_given(chat, base.chat),
                   system=_given(system, base.system), template=_given(template, base.template),
                   stop=_given(stop, base.stop), fewshot=_given(fewshot, base.fewshot))


def _given(value: _T | None, kept: _T) -> _T:
    """A flag's value, or the protocol's own where the flag was not given (None)."""
    return kept if value is None else value
