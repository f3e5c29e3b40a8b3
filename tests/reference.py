"""Reference implementations kept to check the production code: hand-written SQL of the definitions
(`reachtui.outcomes`) that the tables, the app and the engine compute their own way, and the route sampler's
first action enumeration."""

from __future__ import annotations

from typing import Any

from reachtui.probes.registry import ordered_names


def _rows(store, sql: str, params: Any = ()) -> list[dict]:
    cur = store.conn.execute(sql, params)
    keys = [d[0] for d in cur.description]
    return [dict(zip(keys, row)) for row in cur]


def question_status(store, run_id: int, probes: list[str] | tuple[str, ...] | None = None) -> list[dict]:
    """One row per (question, probe) with attempts: question_id, probe, n (attempts), n_correct,
    first_hit (1-based k of the first correct attempt, None if none), reachable (n_correct > 0) and
    realized (the question's realized attempt is correct; None while it has not run)."""
    sql = """
        SELECT question_id, probe, count(*) AS n, coalesce(sum(correct), 0) AS n_correct,
               min(CASE WHEN correct = 1 THEN attempt END) + 1 AS first_hit,
               max(max(CASE WHEN probe = 'realized' AND attempt = 0 THEN correct END))
                 OVER (PARTITION BY question_id) AS realized
        FROM attempts WHERE run_id = ? GROUP BY probe, question_id"""
    params: list[Any] = [run_id]
    if probes is not None:
        sql = f"SELECT * FROM ({sql}) WHERE probe IN ({', '.join('?' * len(probes))})"
        params += list(probes)
    cur = store.conn.execute(sql + " ORDER BY question_id, probe", params)
    return [{"question_id": q, "probe": p, "n": n, "n_correct": c, "first_hit": f,
             "reachable": c > 0, "realized": None if r is None else bool(r)}
            for q, p, n, c, f, r in cur]


def probe_summary(store, run_id: int) -> list[dict]:
    """Per probe with attempts: n_questions (with >= 1 attempt of it), reachable, realized (of those
    questions, realized correct), failure (reachable and realized known wrong), n_attempts, n_correct."""
    rows = _rows(store, """
        WITH s AS (
          SELECT question_id, probe, max(coalesce(correct, 0)) AS hit, count(*) AS n,
                 coalesce(sum(correct), 0) AS c
          FROM attempts WHERE run_id = :run GROUP BY probe, question_id),
        r AS (SELECT question_id, correct FROM attempts
              WHERE run_id = :run AND probe = 'realized' AND attempt = 0)
        SELECT s.probe, count(*) AS n_questions, sum(s.hit) AS reachable,
               coalesce(sum(r.correct = 1), 0) AS realized,
               coalesce(sum(s.hit = 1 AND r.correct = 0), 0) AS failure,
               sum(s.n) AS n_attempts, sum(s.c) AS n_correct
        FROM s LEFT JOIN r ON r.question_id = s.question_id
        GROUP BY s.probe""", {"run": run_id})
    order = ordered_names(r["probe"] for r in rows)
    return sorted(rows, key=lambda row: order.index(row["probe"]))


def legal_actions(route, num_layers: int, params: Any = None) -> list:
    """`reachtui.routes.legal_actions` as first written (O(positions x max_block^2)): the fast one must list
    the same actions in the same order (the sampler draws by position in this list)."""
    from reachtui.routes import Action, _p, length_bounds

    lo, hi = length_bounds(num_layers, params)
    max_block = _p(params, "max_block")
    max_repeat = _p(params, "max_repeat")
    keep_first, keep_last = _p(params, "keep_first"), _p(params, "keep_last")
    r = route.layers
    n = len(r)
    counts: dict[int, int] = {}
    for x in r:
        counts[x] = counts.get(x, 0) + 1
    out: list[Action] = []
    for size in range(1, min(max_block, n) + 1):
        for s in range(0, n - size + 1):
            block = r[s : s + size]
            if lo <= n - size:
                removed: dict[int, int] = {}
                for x in block:
                    removed[x] = removed.get(x, 0) + 1
                ok = True
                if keep_first and counts.get(0, 0) - removed.get(0, 0) <= 0:
                    ok = False
                last = num_layers - 1
                if keep_last and counts.get(last, 0) - removed.get(last, 0) <= 0:
                    ok = False
                if ok:
                    out.append(Action("skip", s, size))
            if n + size <= hi:
                added: dict[int, int] = {}
                for x in block:
                    added[x] = added.get(x, 0) + 1
                if all(counts[x] + c <= max_repeat for x, c in added.items()):
                    out.append(Action("repeat", s, size))
    return out
