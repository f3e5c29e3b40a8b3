"""The probes, one record each: the only place their names are written. Pure Python.

Everything that lists, orders, labels or colours probes (the protocol, the engine's phases, the tables,
the app's columns and charts, the importer) derives it from here. Adding a probe is one record and its
phase function in `reachtui.engine.phases` (named by the record's `phase`). This module imports nothing,
so everything can use it.

Besides the probes a protocol runs there are two families of derived probe names, `mlp:<layer>` (the MLP
scan: default decoding with that layer's MLP silenced) and `explore:<id>` (an intervention applied from
the app): interventions on the model as deployed, not reachability probes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Probe:
    name: str
    order: int                  # display and run order
    label: str                  # for people (progress bars, headers)
    reach: bool                 # a reachability probe: a summary row, a table column, a failure set
    answer_aware: bool          # its choice of attempts uses the gold answer
    ordered: bool               # attempts in a fixed order: its budget curve is reachable@k, else pass@k
    routed: bool                # runs layer routes (which may be longer than the model: more KV cache)
    temperature: float | None   # default temperature (None: the protocol's own decoding)
    colour: str                 # in the charts
    why: str
    phase: str                  # its phase function in reachtui.engine.phases: (ctx, probe, spec) -> None
    reads: tuple[str, ...] = ()  # the protocol's sections its attempts depend on besides its own spec


REALIZED = Probe(
    "realized", 0, "realized", reach=False, answer_aware=False, ordered=False, routed=False, temperature=None,
    colour="green", phase="realized",
    why="the default deployment procedure: one attempt (index 0) under the protocol's default decoding")
SAMPLE = Probe(
    "sample", 1, "sample", reach=True, answer_aware=False, ordered=False, routed=False, temperature=1.0,
    colour="cyan", phase="sample",
    why="K samples at a temperature, normal layer order; attempts are exchangeable, so pass@k")
ROUTES = Probe(
    "routes", 2, "routes", reach=True, answer_aware=False, ordered=True, routed=True, temperature=0.0,
    colour="orange", phase="routes", reads=("routes_mode", "route_sampler"),
    why="K random layer routes, greedy under each; attempt j is route j")
MCTS = Probe(
    "mcts", 3, "mcts", reach=True, answer_aware=True, ordered=True, routed=True, temperature=0.0,
    colour="magenta", phase="mcts", reads=("route_sampler", "mcts"),
    why="a tree search over routes rewarded by correctness (as in CoLa): answer-aware")
MCTS_BLIND = Probe(
    "mcts-blind", 4, "mcts-blind", reach=True, answer_aware=False, ordered=True, routed=True, temperature=0.0,
    colour="blue", phase="mcts", reads=("route_sampler", "mcts"),
    why="the same search rewarded by mean token log-prob. A reach probe: reachable means some attempt of "
        "the K is right, whatever chose the attempts (as for routes); only its search is answer-blind")

PROBES: tuple[Probe, ...] = (REALIZED, SAMPLE, ROUTES, MCTS, MCTS_BLIND)
#: The probes a protocol may list, in order ("realized" always runs).
PROTOCOL_PROBES: tuple[Probe, ...] = tuple(p for p in PROBES if p.reach)
BY_NAME = {p.name: p for p in PROBES}


@dataclass(frozen=True)
class Family:
    """Derived probes named `<prefix>:<arg>`: interventions on the deployed model, never reachability."""

    prefix: str
    order: int
    label: str
    why: str

    def name(self, arg: int) -> str:
        return f"{self.prefix}:{int(arg)}"

    def owns(self, probe: str) -> bool:
        return probe.startswith(self.prefix + ":")

    def arg(self, probe: str) -> int:
        return int(probe.partition(":")[2])

    @property
    def like(self) -> str:
        """SQL LIKE pattern of the family's probe names."""
        return self.prefix + ":%"


MLP = Family("mlp", 1, "MLP scan", "default decoding with one layer's MLP silenced, on the failure and realized sets")
EXPLORE = Family("explore", 2, "exploration", "an intervention applied from the app to a failure set and the "
                                              "realized set")
FAMILIES = (MLP, EXPLORE)


def scan_default(names: Iterable[str]) -> str | None:
    """The probe whose failure set an MLP scan repairs when none is named: sample if run, else the first."""
    names = list(names)
    return SAMPLE.name if SAMPLE.name in names else (names[0] if names else None)


def get(name: str) -> Probe:
    """The probe called `name`; KeyError for anything else."""
    return BY_NAME[name]


def family(probe: str) -> Family | None:
    return next((f for f in FAMILIES if f.owns(probe)), None)


def is_reach(probe: str) -> bool:
    """A reachability probe (not realized, not a derived mlp:/explore: probe)."""
    p = BY_NAME.get(probe)
    return p is not None and p.reach


def is_ordered(probe: str) -> bool:
    """Attempts come in a fixed order (route j, the search's j-th generation): reachable@k, not pass@k."""
    p = BY_NAME.get(probe)
    return p is not None and p.ordered


def sort_key(probe: str) -> tuple:
    """The registry's probes in order, then mlp:<L> by L, explore:<id> by id, then anything else."""
    if probe in BY_NAME:
        return (0, BY_NAME[probe].order, 0, "")
    fam = family(probe)
    arg = probe.partition(":")[2]
    return (fam.order if fam else 3, 0, int(arg) if arg.isdigit() else -1, probe)


def ordered_names(names: Iterable[str]) -> list[str]:
    return sorted(names, key=sort_key)


def names(probes: Iterable[Probe] = PROTOCOL_PROBES) -> list[str]:
    return [p.name for p in probes]
