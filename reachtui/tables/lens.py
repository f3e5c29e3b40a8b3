"""The logit lens over a frozen failure set (`reachtui export lens RUN --probe P`): per member, where along the
route its gold token ranks best and the last route position where it is in the top k, at the token where
the default output leaves the gold answer (`reachtui.engine.trace.gold_token`). The rows are computed with
the model (`reachtui.engine.trace.lens_rows`, loaded by the command); this module only lays them out, so it
reads no store and loads no model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reachtui.tables.table import Column, Table

LENS_COLUMNS = [
    Column("run", "int"), Column("set", label="failure set"), Column("qid"), Column("gold"),
    Column("answer", label="default answer"), Column("position", "int", label="token"),
    Column("gold_token", label="gold token"), Column("chosen", label="token chosen"),
    Column("best_rank", "int", label="best rank"), Column("best_position", "int", label="best at"),
    Column("best_layer", "int", label="best at layer"),
    Column("last_topk_position", "int", label="last in top-k at"),
    Column("last_topk_layer", "int", label="last in top-k at layer"),
    Column("final_rank", "int", label="final rank"), Column("final_prob", "float", label="final p"),
    Column("pushed_out", "bool", label="pushed out"), Column("positions", "int", label="route positions"),
    Column("note"),
]

#: What the columns mean (said under the table).
LENS_NOTE = ("token = the index (from 0) of the default output's token where it leaves the gold answer, and gold "
             "token the gold's token there (its first; a later one where both answers begin alike; the stop after it "
             "where the answer goes on past the whole gold); the lens "
             "reads the residual stream after each route position there through the model's final norm and "
             "unembedding. best at / last in top-k at = route positions (from 0; the layer beside); pushed out = "
             "the gold token is in the top-k at some route position but not at the last one")


def lens_table(rows: Sequence[dict[str, Any]], *, run_id: int, set_name: str, k: int,
               intervention: str | None = None) -> Table:
    """`rows` (`reachtui.engine.trace.lens_rows`) of failure set `set_name` of run `run_id` as a Table, with a
    note that counts the members whose gold was pushed out of the top `k`, and where."""
    table_rows = [(run_id, set_name, r["qid"], r["gold"], r["answer"], r["position"], r["gold_token"], r["chosen"],
                   r["best_rank"], r["best_position"], r["best_layer"], r["last_topk_position"],
                   r["last_topk_layer"], r["final_rank"], r["final_prob"], r["pushed_out"], r["positions"],
                   r["note"]) for r in rows]
    title = f"logit lens on {set_name} of run {run_id}: the gold token along the route (top-{k})"
    if intervention:
        title += f", under {intervention}"
    notes = [LENS_NOTE.replace("top-k", f"top-{k}")]
    pushed = [r for r in rows if r["pushed_out"]]
    if rows:
        late = [r for r in pushed if 3 * (r["last_topk_position"] + 1) >= 2 * r["positions"]]
        notes.append(f"{len(pushed)} of {len(rows)} members: the gold token is in the top-{k} at some route "
                     f"position and pushed out by the end; for {len(late)} of them the block that pushes it out is "
                     f"in the last third of the route")
    return Table("lens", title, list(LENS_COLUMNS), table_rows, notes=notes)


def lens_order(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The qids of `rows` as the app sorts a failure set by the lens: first the members whose gold was pushed
    out of the top-k, the latest push first; then those whose gold stays in the top-k to the end; then those
    whose gold never enters it (each group by the gold's best rank)."""
    def key(r: dict[str, Any]) -> tuple:
        last = r["last_topk_position"]
        group = 0 if r["pushed_out"] else 1 if last is not None else 2
        return group, -(last if last is not None else -1), r["best_rank"] if r["best_rank"] is not None else 1 << 62
    return [r["qid"] for r in sorted(rows, key=key)]
