"""What the app reads from the store: read-only SQL over the schema in `reachtui/store.py`.

Pure Python (no textual, no torch), so tests and the first-paint bench can use it directly. The app
never decides correctness here: `correct` comes from the attempts the audit graded with
`reachtui.grading`, failure sets are the frozen `failure_sets` rows, the MLP scan is `mlp_scan`.

A question's status under a reach probe P (one table cell):
    realized   its default ("realized") attempt is correct
    reached    not realized, but some attempt of P is correct (a member of P's failure set)
    unreached  neither
    pending    the audit has not written that attempt yet
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: probes that are not reachability probes (no table column, no failure set)
_NOT_REACH = ("realized", "mcts-blind")


def is_reach_probe(probe: str) -> bool:
    return probe not in _NOT_REACH and not probe.startswith(("mlp:", "explore:"))


@dataclass(slots=True)
class QRow:
    key: int  # questions.id in the store
    qid: str  # the task's question id
    text: str  # first line of the question
    realized: bool | None  # None: no default attempt yet
    reach: tuple[bool | None, ...]  # per reach probe: some attempt correct (None: no attempt yet)
    first_hit: tuple[int | None, ...]  # per reach probe: 0-based index of the first correct attempt


def cell_status(row: QRow, p: int) -> str:
    if row.realized:
        return "realized"
    reach = row.reach[p]
    if reach is None:
        return "pending"
    if reach:
        return "reached"
    return "pending" if row.realized is None else "unreached"


@dataclass
class RunInfo:
    id: int
    model: str
    model_path: str | None
    num_layers: int | None
    task: str
    task_path: str | None
    protocol: dict[str, Any]
    protocol_hash: str
    status: str
    n_questions: int
    probes: tuple[str, ...]  # reach probes, in protocol order

    @property
    def answer_format(self) -> str:
        return str(self.protocol.get("answer_format", "number"))

    @property
    def label(self) -> str:
        return f"run {self.id} · {self.model} · {self.task} · {self.protocol_hash[:8]} · {self.status}"


def first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text and text.strip() else ""
    return line[:limit]


class AuditData:
    """Read-only access to one store file through `reachtui.store.Store` (its read queries), plus the
    few joins the app needs on top. One instance per thread (sqlite connections are per thread)."""

    def __init__(self, path: str | Path) -> None:
        from reachtui.store import Store

        self.path = Path(path)
        self.store = Store(self.path, readonly=True)
        self.conn = self.store.conn

    def close(self) -> None:
        self.store.close()

    def _dicts(self, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
        cur = self.conn.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    # ---- runs -------------------------------------------------------------------------------------

    def runs(self) -> list[dict[str, Any]]:
        return self.store.list_runs()

    def latest_run_id(self) -> int | None:
        run = self.store.latest_run()
        return None if run is None else run["id"]

    def run(self, run_id: int) -> RunInfo:
        row = self.store.get_run(run_id)
        protocol = json.loads(row["protocol_json"]) if row.get("protocol_json") else {}
        return RunInfo(id=row["id"], model=row["model"], model_path=row.get("model_path"),
                       num_layers=row.get("num_layers"), task=row["task"], task_path=row.get("task_path"),
                       protocol=protocol, protocol_hash=row["protocol_hash"], status=row["status"],
                       n_questions=row["n_questions"], probes=self.reach_probes(run_id, protocol))

    def reach_probes(self, run_id: int, protocol: dict[str, Any]) -> tuple[str, ...]:
        """The run's reach probes: the protocol's, in order, then any others found in its attempts."""
        names: list[str] = []
        for p in protocol.get("probes", ()) or ():
            name = p.get("name") if isinstance(p, dict) else (p[0] if isinstance(p, (list, tuple)) else p)
            if isinstance(name, str) and is_reach_probe(name) and name not in names:
                names.append(name)
        for name in self.store.probe_names(run_id):
            if is_reach_probe(name) and name not in names:
                names.append(name)
        return tuple(names)

    def run_status(self, run_id: int) -> str:
        row = self.conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
        return row[0] if row else "unknown"

    # ---- the question table -----------------------------------------------------------------------

    def rows(self, run: RunInfo) -> list[QRow]:
        """One row per question of the run, in task order: realized + per-probe reach/first hit.

        Same definitions as the store's `question_status` (realized = the realized attempt is correct;
        reachable = some attempt correct; first hit = lowest correct index), but without its window
        function: one GROUP BY over the covering index `attempts_by_probe`, about twice as fast on a
        10,000 x 32 run, which is most of the first paint."""
        probes = run.probes
        pindex = {p: i for i, p in enumerate(probes)}
        n = len(probes)
        agg: dict[int, tuple[list, list]] = {}
        realized: dict[int, bool] = {}
        marks = ",".join("?" * (n + 1))
        for key, probe, any_ok, first in self.conn.execute(
            f"SELECT question_id, probe, max(correct), min(CASE WHEN correct = 1 THEN attempt END) "
            f"FROM attempts WHERE run_id = ? AND probe IN ({marks}) GROUP BY probe, question_id",
            (run.id, "realized", *probes)):
            if probe == "realized":
                if any_ok is not None:
                    realized[key] = bool(any_ok)
                continue
            entry = agg.get(key)
            if entry is None:
                entry = agg[key] = ([None] * n, [None] * n)
            i = pindex[probe]
            entry[0][i] = bool(any_ok)
            entry[1][i] = first
        empty = ((None,) * n, (None,) * n)
        out = []
        for key, qid, question in self.conn.execute(
            "SELECT q.id, q.qid, q.question FROM run_questions rq JOIN questions q ON q.id = rq.question_id "
            "WHERE rq.run_id = ? ORDER BY q.idx", (run.id,)):
            entry = agg.get(key)
            reach, first = (tuple(entry[0]), tuple(entry[1])) if entry else empty
            out.append(QRow(key, qid, first_line(question), realized.get(key), reach, first))
        return out

    # ---- sets -------------------------------------------------------------------------------------

    def failure_sets(self, run_id: int) -> dict[str, dict[str, Any]]:
        """probe -> the run's frozen failure set row (id, name, size, ...)."""
        out: dict[str, dict[str, Any]] = {}
        for d in self.store.failure_sets(run_id):
            probe = d["probe"] or d["name"].removeprefix("failure:")
            out.setdefault(probe, d)
        return out

    def set_members(self, set_id: int) -> set[int]:
        return set(self.store.failure_set_members(set_id))

    # ---- one question -----------------------------------------------------------------------------

    def question(self, key: int) -> dict[str, Any]:
        rows = self._dicts("SELECT id, qid, idx, question, gold, solution FROM questions WHERE id = ?", (key,))
        return rows[0] if rows else {}

    def default_attempt(self, run_id: int, key: int) -> dict[str, Any] | None:
        rows = self._dicts(
            "SELECT text, answer, rule, correct, new_tokens, route, silenced FROM attempts "
            "WHERE run_id = ? AND question_id = ? AND probe = 'realized' AND attempt = 0", (run_id, key))
        return rows[0] if rows else None

    def hits(self, run_id: int, key: int, probes: tuple[str, ...], limit: int = 64) -> list[dict[str, Any]]:
        """The attempts of reach probes that reached the gold answer, probe by probe, in attempt order."""
        if not probes:
            return []
        marks = ",".join("?" * len(probes))
        return self._dicts(
            f"SELECT probe, attempt, route, silenced, temperature, answer, text, new_tokens FROM attempts "
            f"WHERE run_id = ? AND question_id = ? AND correct = 1 AND probe IN ({marks}) "
            f"ORDER BY probe, attempt LIMIT ?", (run_id, key, *probes, limit))

    # ---- search -----------------------------------------------------------------------------------

    def search(self, run_id: int, text: str) -> set[int]:
        """Questions of the run whose text, or one of whose outputs, match `text` (the store's FTS5)."""
        return set(self.store.search(run_id, text))

    # ---- charts -----------------------------------------------------------------------------------

    def mlp_scan(self, run_id: int) -> list[dict[str, Any]]:
        return self.store.mlp_scan(run_id)

    def first_hits(self, run_id: int, probe: str) -> tuple[list[int | None], int]:
        """Per question of the run: first correct attempt index under `probe` (None: never); and K."""
        hits = {st["question_id"]: st["first_hit"] for st in self.store.question_status(run_id, [probe])}
        keys = [r[0] for r in self.conn.execute("SELECT question_id FROM run_questions WHERE run_id = ?",
                                                (run_id,))]
        k = self.conn.execute("SELECT max(attempt) + 1 FROM attempts WHERE run_id = ? AND probe = ?",
                              (run_id, probe)).fetchone()[0] or 0
        return [hits.get(q) for q in keys], k

    def counts(self, run_id: int, probe: str) -> list[tuple[int, int]]:
        """(n attempts, c correct) per question that has attempts of `probe` (for pass@k)."""
        return [(st["n"], st["n_correct"]) for st in self.store.question_status(run_id, [probe])]

    # ---- explorations -----------------------------------------------------------------------------

    def explorations(self, run_id: int) -> list[dict[str, Any]]:
        return self.store.explorations(run_id)

    def exploration_changes(self, run_id: int, exploration_id: int) -> tuple[set[int], set[int]]:
        """(repaired, broken): questions the exploration's intervention turned right (from a wrong
        default) and wrong (from a right default), from its stored `explore:<id>` attempts."""
        repaired: set[int] = set()
        broken: set[int] = set()
        for key, now, default in self.conn.execute(
            "SELECT e.question_id, e.correct, r.correct FROM attempts e JOIN attempts r "
            "ON r.run_id = e.run_id AND r.question_id = e.question_id AND r.probe = 'realized' AND r.attempt = 0 "
            "WHERE e.run_id = ? AND e.probe = ?", (run_id, f"explore:{exploration_id}")):
            if now == 1 and default == 0:
                repaired.add(key)
            elif now == 0 and default == 1:
                broken.add(key)
        return repaired, broken


# ---- the filtered view (pure functions over QRows) ------------------------------------------------


@dataclass(frozen=True)
class Filter:
    kind: str = "all"  # all | failure | realized | unreachable | changed
    probe: str | None = None  # for kind == "failure"; for "changed": the exploration's label
    search: str | None = None  # FTS text, combined with the kind

    def label(self) -> str:
        names = {"all": "all questions", "realized": "realized", "unreachable": "unreachable"}
        if self.kind == "failure":
            text = f"failure set ({self.probe})"
        elif self.kind == "changed":
            text = f"changed by {self.probe}"
        else:
            text = names[self.kind]
        if self.search:
            text += f" · search “{self.search}”"
        return text


def apply_filter(rows: list[QRow], probes: tuple[str, ...], flt: Filter, *,
                 members: set[int] | None = None, found: set[int] | None = None) -> list[QRow]:
    """The rows a filter shows. `members`: the frozen failure set's question keys when the store has one
    (else the live definition reachable ∧ ¬realized is used); `found`: the search hits."""
    if flt.kind == "all":
        out = rows
    elif flt.kind == "realized":
        out = [r for r in rows if r.realized]
    elif flt.kind == "unreachable":
        out = [r for r in rows if r.realized is False and all(x is False for x in r.reach)]
    elif flt.kind == "changed":
        out = [r for r in rows if r.key in (members or set())]
    elif flt.kind == "failure":
        if members is not None:
            out = [r for r in rows if r.key in members]
        else:
            p = probes.index(flt.probe)
            out = [r for r in rows if r.realized is False and r.reach[p]]
    else:
        raise ValueError(f"unknown filter {flt.kind!r}")
    if found is not None:
        out = [r for r in out if r.key in found]
    return out


@dataclass
class Counters:
    n: int  # questions in the run
    done: int  # questions with a default attempt
    realized: int
    reached: dict[str, int]  # probe -> questions with a correct attempt
    failure: dict[str, int]  # probe -> reachable and not realized (frozen set size when stored)
    attempted: dict[str, int] | None = None  # probe -> questions with at least one attempt of it

    def pct(self, k: int) -> float:
        return 100.0 * k / self.n if self.n else 0.0


def counters(rows: list[QRow], probes: tuple[str, ...], frozen: dict[str, int] | None = None) -> Counters:
    reached = {p: 0 for p in probes}
    failure = {p: 0 for p in probes}
    attempted = {p: 0 for p in probes}
    done = realized = 0
    for r in rows:
        if r.realized is not None:
            done += 1
            realized += bool(r.realized)
        for i, p in enumerate(probes):
            if r.reach[i] is not None:
                attempted[p] += 1
            if r.reach[i]:
                reached[p] += 1
                if r.realized is False:
                    failure[p] += 1
    for p, size in (frozen or {}).items():
        if p in failure:
            failure[p] = size
    return Counters(len(rows), done, realized, reached, failure, attempted)


# ---- preloading (the first paint) -----------------------------------------------------------------


def preload(path: str | Path, run_id: int | None = None):
    """Start reading a run (info, rows, frozen sets) in a plain thread and return a Future of
    `(run, rows, frozen)` (None for a store without runs). `reachtui open --store` starts this before
    it imports textual: SQLite releases the GIL while it scans, so the query overlaps the imports and
    the app's start-up, and the first frame already has the rows."""
    import threading
    from concurrent.futures import Future

    fut: Future = Future()

    def work() -> None:
        try:
            data = AuditData(path)
            try:
                rid = run_id if run_id is not None else data.latest_run_id()
                if rid is None:
                    fut.set_result(None)
                    return
                run = data.run(rid)
                fut.set_result((run, data.rows(run), data.failure_sets(rid)))
            finally:
                data.close()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
            fut.set_exception(exc)

    threading.Thread(target=work, name="reachtui-preload", daemon=True).start()
    return fut
