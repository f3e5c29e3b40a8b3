"""What a finished run leaves for the tables: its one pass over the attempts (`reachtui.control.run_control`:
hits, first hits, answer scatter, chance control, answer-blind picks per probe and question), stored in the
same transaction that marks the run complete, so that tables of millions of attempts read one row per
(probe, question) instead of making the pass again."""

from __future__ import annotations

from reachtui.control import fold_key, outcome_rows, run_control


def write_stored_pass(store, run_id: int) -> None:
    """Make the run's pass afresh and store it with what it saw (inside the caller's transaction, if any:
    no attempt can arrive between the pass and the count)."""
    with store.transaction():
        rc = run_control(store, run_id, store.readable_protocol(run_id), stored=False)
        store.write_outcomes(run_id, outcome_rows(rc), fold=fold_key(), seen=store.attempts_seen(run_id),
                             logprobs=rc.logprobs)
