"""Question by question: the `questions` table (per question its gold, default answer, realized, and per
probe reachable, first hit, hits, distinct answers and the chance control) and the raw `attempts` table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reachtui.probes import registry
from reachtui.tables.source import QUESTION_ROWS, column_suffix, connection, controls, run_probes, runs_label
from reachtui.tables.table import Column, Table

ATTEMPT_COLUMNS = [
    Column("run", "int"), Column("question_id", label="question"), Column("probe"),
    Column("attempt", "int"), Column("route"), Column("silenced"), Column("temperature", "float"),
    Column("seed", "int"), Column("text"), Column("answer"), Column("rule"), Column("correct", "bool"),
    Column("mean_logprob", "float"), Column("new_tokens", "int"), Column("layers_executed", "int"),
    Column("compute", "int"),
]


def _question_columns(probes: Sequence[str]) -> list[Column]:
    columns = [
        Column("run", "int"), Column("question_id", label="question"), Column("gold"),
        Column("answer", label="default answer"), Column("realized", "bool"),
    ]
    for p in probes:
        s = column_suffix(p)
        columns += [Column(f"reachable_{s}", "bool", label=f"reachable {p}"),
                    Column(f"first_hit_{s}", "int", label=f"first hit {p}")]
    columns.append(Column("partner", label="control partner"))
    for p in probes:
        s = column_suffix(p)
        columns += [Column(f"hits_{s}", "int", label=f"hits {p}"),
                    Column(f"answers_{s}", "int", label=f"answers {p}"),
                    Column(f"control_{s}", "bool", label=f"control {p}")]
    return columns


def questions_table(source: Any, run_ids: Sequence[int]) -> Table:
    """One row per (run, question), in task order: gold, the realized (default) extracted answer,
    realized, and for each probe: reachable and the first hit (1-based k; empty: never). Then the
    chance control's partner (the question whose gold this one's attempts are also scored against) and,
    per probe, hits (correct attempts), answers (distinct extracted answers) and control (some attempt
    hits the partner's gold); empty where the probe has no attempt of the question."""
    con = connection(source)
    probes: list[str] = []
    for run_id in run_ids:
        probes += [p for p in run_probes(con, run_id) if p not in probes]
    probes.sort(key=registry.sort_key)
    rows: list[tuple] = []
    for run_id, _info, rc in controls(con, run_ids):
        cells = [rc.probe(p) for p in probes]
        questions = con.execute(QUESTION_ROWS, {"run": run_id}).fetchall()
        qid_of = {q: qid for q, qid, *_rest in questions}
        for q, qid, _idx, gold, answer, correct in questions:
            partner = rc.partner.get(q)
            mine = [c.get(q) for c in cells]
            out = [run_id, qid, gold, answer, None if correct is None else bool(correct)]
            for cell in mine:
                out += [None, None] if cell is None else [cell.hits > 0, cell.first_hit]
            out.append(qid_of.get(partner))
            for cell in mine:
                out += [None, None, None] if cell is None else \
                    [cell.hits, cell.distinct, cell.control_hits > 0 if partner is not None else None]
            rows.append(tuple(out))
    title = "Questions: realized, reachable and first hit per probe, chance control" + runs_label(run_ids)
    return Table("questions", title, _question_columns(probes), rows)


def attempts_table(source: Any, run_ids: Sequence[int]) -> Table:
    """The raw attempts, by question (task order: a task's question ids follow it, `Store.upsert_task`; so the
    rows come in the order of the store's unique index, unsorted), probe, attempt. Temperature and seed are not stored: they
    are recomputed from the run's protocol (`Protocol.decoding_of` and `Protocol.attempt_seeder`, what the
    engine decoded with) inside the query; blank for an imported run, which records neither."""
    con = connection(source)
    rows: list[tuple] = []
    for run_id in run_ids:
        temperature, params = _decoding(con, run_id)
        # an imported run records no decoding: no seed either (and no reachtui_seed function registered)
        seed = "NULL" if temperature == "NULL" else (
            f"CASE WHEN {temperature} > 0 THEN reachtui_seed(a.probe, a.route, a.silenced, q.idx, a.attempt) END")
        rows += con.execute(
            f"""SELECT a.run_id, q.qid, a.probe, a.attempt, a.route, a.silenced, {temperature},
                       {seed},
                       a.text, a.answer, a.rule, a.correct, a.mean_logprob, a.new_tokens,
                       a.layers_executed, a.compute
                FROM attempts a JOIN questions q ON q.id = a.question_id
                WHERE a.run_id = ? ORDER BY a.question_id, a.probe, a.attempt""",
            (*params, *params, run_id),
        ).fetchall()
    title = "Attempts" + runs_label(run_ids)
    return Table("attempts", title, list(ATTEMPT_COLUMNS), rows, plain=True)


def _decoding(con, run_id: int) -> tuple[str, tuple]:
    """An SQL expression (and its parameters) for an attempt's temperature in run `run_id`, with the SQL
    function reachtui_seed(probe, route, silenced, task index, attempt) registered on `con` for its seed."""
    from reachtui.protocol import protocol_of_run

    row = con.execute("SELECT protocol_json, source FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None or row[1] != "audit":
        return "NULL", ()      # no temperature, and no seed: reachtui_seed is not even called
    protocol = protocol_of_run({"id": run_id, "protocol_json": row[0]})
    con.create_function("reachtui_seed", 5, protocol.attempt_seeder(), deterministic=True)
    own = {spec.name: protocol.decoding_of(spec.name)[0] for spec in protocol.probes}
    cases = " ".join("WHEN ? THEN ?" for _ in own)
    default = protocol.decoding_of(registry.REALIZED.name)[0]   # realized, mlp:<L>, explore:<id>
    if not own:
        return "?", (default,)
    return f"CASE a.probe {cases} ELSE ? END", (*(v for kv in own.items() for v in kv), default)
