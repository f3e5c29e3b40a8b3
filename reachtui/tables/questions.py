"""Question by question: the `questions` table (per question its gold, default answer, realized, and per
probe reachable, first hit, hits, distinct answers and the chance control) and the raw `attempts` table.
"""

from __future__ import annotations

from collections.abc import Sequence

from reachtui.tasks.metadata import table_columns
from reachtui.probes import registry
from reachtui.tables.source import column_suffix, controls, left_out_notes, run_probes, runs_label
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


def questions_table(store, run_ids: Sequence[int]) -> Table:
    """One row per (run, question), in task order: gold, the realized (default) extracted answer,
    realized, and for each probe: reachable and the first hit (1-based k; empty: never). Then the
    chance control's partner (the question whose gold this one's attempts are also scored against) and,
    per probe, hits (correct attempts), answers (distinct extracted answers) and control (some attempt
    hits the partner's gold); empty where the probe has no attempt of the question."""
    probes: list[str] = []
    for run_id in run_ids:
        probes += [p for p in run_probes(store, run_id) if p not in probes]
    probes.sort(key=registry.sort_key)
    rows: list[tuple] = []
    metas = {run_id: store.question_meta(run_id) for run_id in run_ids}
    keys = meta_keys(m for run in metas.values() for m in run.values())
    row_metas: list[dict] = []
    for run_id, _info, rc in controls(store, run_ids):
        cells = [rc.probe(p) for p in probes]
        questions = store.question_rows(run_id)
        qid_of = {q: qid for q, qid, *_rest in questions}
        meta = metas[run_id]
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
            row_metas.append(meta.get(q, {}))
    # the metadata columns by reachtui.tasks.metadata's rules, whatever the store holds (an older version's task,
    # the keys of several runs): distinct names, one kind per column, bounded values and count
    meta_cols, meta_cells, notes = table_columns(keys, row_metas)
    rows = [row + cells for row, cells in zip(rows, meta_cells)]
    title = "Questions: realized, reachable and first hit per probe, chance control" + runs_label(run_ids)
    columns = _question_columns(probes) + [Column(name, kind) for name, kind in meta_cols]
    return Table("questions", title, columns, rows, notes=notes + left_out_notes(store, run_ids))


def meta_keys(metas) -> list[str]:
    """The metadata keys of the questions' `metas` (dicts), in the order first seen."""
    keys: dict[str, None] = {}
    for m in metas:
        keys.update(dict.fromkeys(m))
    return list(keys)


def attempts_table(store, run_ids: Sequence[int]) -> Table:
    """The raw attempts, by question (task order), probe, attempt, with the temperature and seed each decoded
    with, recomputed from the run's protocol (`Store.attempt_export`; blank for an imported run)."""
    rows: list[tuple] = []
    for run_id in run_ids:
        rows += store.attempt_export(run_id)
    title = "Attempts" + runs_label(run_ids)
    return Table("attempts", title, list(ATTEMPT_COLUMNS), rows, notes=left_out_notes(store, run_ids), plain=True)
