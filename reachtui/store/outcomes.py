"""What the store answers about outcomes (mixed into `reachtui.store.Store`): the SQL of realized, reachable,
first hit, the failure set, the answer groups the chance control and the answer-blind picks read, and the
tables' stored pass. The definitions are `reachtui.outcomes`' (said there in words); this module is where
they are written as queries over the attempts table (schema in `reachtui/store/schema.py`), and the only
one that does. It reads: a finished run's pass is made by `reachtui.engine.finish.write_stored_pass` and
written by `Store.write_outcomes`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from reachtui.outcomes import FAILURE_PREFIX
from reachtui.probes import registry

if TYPE_CHECKING:
    import sqlite3


def sql_list(probes: Iterable[str]) -> str:
    """A quoted SQL list of probe names, e.g. ('sample', 'routes') (names are the registry's own)."""
    quoted = [f"'{p}'" for p in probes]
    return f"({', '.join(quoted) or 'NULL'})"


def reach_where(alias: str = "") -> str:
    """SQL: the attempts of reachability probes (the candidates of the answer-blind selectors)."""
    col = f"{alias}.probe" if alias else "probe"
    return f"{col} IN {sql_list(p.name for p in registry.PROTOCOL_PROBES)}"


def realized_where(alias: str = "") -> str:
    """SQL: a question's realized attempt."""
    a = f"{alias}." if alias else ""
    return f"{a}probe = '{registry.REALIZED.name}' AND {a}attempt = 0"


#: The run :run's questions: its question set, plus any question that has attempts (belt and braces). The
#: second part is a loose index scan (one seek per question) instead of a pass over the run's attempts.
RUN_QUESTIONS_CTE = """
  aq(q) AS (SELECT min(question_id) FROM attempts WHERE run_id = :run
            UNION ALL SELECT (SELECT min(question_id) FROM attempts WHERE run_id = :run AND question_id > aq.q)
            FROM aq WHERE aq.q IS NOT NULL),
  rq AS (SELECT question_id FROM run_questions WHERE run_id = :run
         UNION SELECT q FROM aq WHERE q IS NOT NULL)"""

#: Per question of run :run: its realized attempt's correctness (ok) and extracted answer.
REALIZED_CTE = f"""
  real AS (SELECT question_id, correct AS ok, answer FROM attempts WHERE run_id = :run AND {realized_where()})"""

#: Per (reach probe, question) of run :run: attempts n, correct c, hit (0/1), first_hit (1-based k).
PER_PROBE_CTE = f"""
  pq AS (SELECT probe, question_id, count(*) AS n, coalesce(sum(correct = 1), 0) AS c,
                max(coalesce(correct, 0)) AS hit, min(CASE WHEN correct = 1 THEN attempt END) + 1 AS first_hit
         FROM attempts WHERE run_id = :run AND {reach_where()}
         GROUP BY probe, question_id)"""

#: Per (question, extracted answer) of probe :probe of run :run, in that order (from the covering index
#: attempts_by_answer, without sorting the attempts): attempts, the first attempt index, correct attempts
#: (NULL: none graded), the highest mean log-prob. Summed over a (probe, question)'s groups they give what
#: PER_PROBE_CTE counts (n, c, hit = c > 0; the first hit is a group's first attempt when all its attempts
#: are correct, `FIRST_HIT_SQL` when they differ), and they are what the answer-blind picks, the answer
#: scatter and the chance control read (`reachtui.control`). Last, the attempts whose stored `correct` is
#: neither 0, 1 nor NULL (a store edited by hand: 'yes' would sum as 0): the pass refuses them.
ANSWER_GROUPS_SQL = """
  SELECT question_id, answer, count(*), min(attempt), sum(correct), max(mean_logprob), sum(correct NOT IN (0, 1))
  FROM attempts WHERE run_id = :run AND probe = :probe
  GROUP BY question_id, answer ORDER BY question_id, answer"""

#: The first hit (1-based k) of (:probe, :q) of run :run among the attempts with answer :answer.
FIRST_HIT_SQL = """
  SELECT min(attempt) + 1 FROM attempts
  WHERE run_id = :run AND probe = :probe AND question_id = :q AND answer = :answer AND correct = 1"""

#: The correctness of the vote pick of (:probe, :q) of run :run once its answer :answer has won (for an
#: answer whose attempts disagree on correctness: its highest-log-prob attempt, earliest on ties).
VOTE_PICK_SQL = """
  SELECT correct FROM attempts WHERE run_id = :run AND probe = :probe AND question_id = :q AND answer = :answer
  ORDER BY mean_logprob IS NULL, mean_logprob DESC, attempt LIMIT 1"""

#: The correctness of the logprob pick of (:probe, :q) of run :run: the highest mean log-prob, earliest.
LOGPROB_PICK_SQL = """
  SELECT correct FROM attempts WHERE run_id = :run AND probe = :probe AND question_id = :q
  ORDER BY mean_logprob IS NULL, mean_logprob DESC, attempt LIMIT 1"""

#: Question ids of run :run reachable under probe :probe and realized wrong, in task order.
FAILURE_CANDIDATES_SQL = f"""
  SELECT a.question_id FROM attempts a
  JOIN attempts r ON r.run_id = a.run_id AND r.question_id = a.question_id AND {realized_where('r')}
                  AND r.correct = 0
  JOIN questions q ON q.id = a.question_id
  WHERE a.run_id = :run AND a.probe = :probe
  GROUP BY a.question_id HAVING max(a.correct) = 1 ORDER BY q.idx"""

#: Question ids of run :run whose realized attempt is correct, in task order.
REALIZED_IDS_SQL = f"""
  SELECT a.question_id FROM attempts a JOIN questions q ON q.id = a.question_id
  WHERE a.run_id = :run AND {realized_where('a')} AND a.correct = 1 ORDER BY q.idx"""

#: The run's questions in task order: id, qid, idx, gold, and its realized attempt's answer and correctness.
QUESTION_ROWS_SQL = f"""
  WITH {RUN_QUESTIONS_CTE} SELECT q.id, q.qid, q.idx, q.gold, real.answer, real.correct
  FROM rq JOIN questions q ON q.id = rq.question_id
  LEFT JOIN attempts real ON real.run_id = :run AND {realized_where('real')} AND real.question_id = q.id
  ORDER BY q.idx"""

#: The columns of the stored pass, per (probe, question) (table `outcomes`).
OUTCOME_COLUMNS = "n, hits, no_answer, answers, control_hits, control_first, first_hit, vote, logprob"


class OutcomeQueries:
    """The outcome side of `Store` (needs `self.conn`): each method one query, rows as tuples."""

    conn: sqlite3.Connection

    # -- realized, reachable, failure sets --------------------------------------------------------------

    def failure_candidates(self, run_id: int, probe: str) -> list[int]:
        """Question ids reachable under `probe` whose realized attempt is wrong, in task order (what
        `freeze_failure_sets` freezes as failure:<probe>)."""
        return [r[0] for r in self.conn.execute(FAILURE_CANDIDATES_SQL, {"run": run_id, "probe": probe})]

    def realized_ids(self, run_id: int) -> list[int]:
        """Question ids whose realized attempt is correct (the realized set an MLP scan breaks), in task
        order."""
        return [r[0] for r in self.conn.execute(REALIZED_IDS_SQL, {"run": run_id})]

    def realized_counts(self, run_id: int) -> tuple[int, int, int]:
        """(the run's questions, those with a realized attempt, those realized correct)."""
        return self.conn.execute(
            f"WITH {RUN_QUESTIONS_CTE}, {REALIZED_CTE} SELECT (SELECT count(*) FROM rq), "
            "(SELECT count(*) FROM real), (SELECT coalesce(sum(ok = 1), 0) FROM real)", {"run": run_id}).fetchone()

    def frozen_sizes(self, run_id: int) -> dict[str, int]:
        """{probe: the size of its frozen failure set failure:<probe>}."""
        return dict(self.conn.execute("SELECT probe, max(size) FROM failure_sets WHERE run_id = :run "
                                      "AND name = :prefix || probe GROUP BY probe",
                                      {"run": run_id, "prefix": FAILURE_PREFIX}).fetchall())

    def first_attempts(self, run_id: int, probe: str) -> dict[int, int | None]:
        """{question id: whether its attempt 0 of `probe` is correct} (an MLP-scan layer, an exploration)."""
        return dict(self.conn.execute("SELECT question_id, correct FROM attempts WHERE run_id = ? AND probe = ? "
                                      "AND attempt = 0", (run_id, probe)).fetchall())

    def changed_by(self, run_id: int, probe: str) -> list[tuple[int, int | None, int | None]]:
        """(question id, correct under `probe`'s attempt, correct by default) of each question it ran."""
        return self.conn.execute(
            f"SELECT e.question_id, e.correct, r.correct FROM attempts e JOIN attempts r "
            f"ON r.run_id = e.run_id AND r.question_id = e.question_id AND {realized_where('r')} "
            f"WHERE e.run_id = ? AND e.probe = ?", (run_id, probe)).fetchall()

    # -- per question and probe -------------------------------------------------------------------------

    def question_rows(self, run_id: int) -> list[tuple]:
        """The run's questions in task order: (id, qid, idx, gold, realized answer, realized correct)."""
        return self.conn.execute(QUESTION_ROWS_SQL, {"run": run_id}).fetchall()

    def run_golds(self, run_id: int) -> list[tuple[int, str]]:
        """(question id, gold) of the run's questions, in task order (what the chance control deranges)."""
        return self.conn.execute(f"WITH {RUN_QUESTIONS_CTE} SELECT q.id, q.gold FROM rq JOIN questions q "
                                 f"ON q.id = rq.question_id ORDER BY q.idx, q.qid", {"run": run_id}).fetchall()

    def probe_hits(self, run_id: int) -> Iterator[tuple[str, int, int]]:
        """(reach probe, question id, hit 0/1) for each question with attempts of the probe."""
        return iter(self.conn.execute(f"WITH {PER_PROBE_CTE} SELECT probe, question_id, hit FROM pq",
                                      {"run": run_id}))

    def probe_groups(self, run_id: int) -> list[tuple[str, int, int, int | None, int]]:
        """(reach probe, attempts n, correct c, first hit, questions) per distinct per-question outcome."""
        return self.conn.execute(f"WITH {PER_PROBE_CTE} SELECT probe, n, c, first_hit, count(*) FROM pq "
                                 f"GROUP BY probe, n, c, first_hit", {"run": run_id}).fetchall()

    def answer_groups(self, run_id: int, probe: str) -> Iterator[tuple]:
        """`ANSWER_GROUPS_SQL`'s rows: (question id, answer, attempts, first attempt, correct, best log-prob,
        unreadable grades), ordered by question."""
        return iter(self.conn.execute(ANSWER_GROUPS_SQL, {"run": run_id, "probe": probe}))

    def first_hit_of(self, run_id: int, probe: str, question_id: int, answer: str) -> int | None:
        return self.conn.execute(FIRST_HIT_SQL, {"run": run_id, "probe": probe, "q": question_id,
                                                 "answer": answer}).fetchone()[0]

    def vote_pick(self, run_id: int, probe: str, question_id: int, answer: str) -> int | None:
        """The correctness of the vote's pick once `answer` has won."""
        return self.conn.execute(VOTE_PICK_SQL, {"run": run_id, "probe": probe, "q": question_id,
                                                 "answer": answer}).fetchone()[0]

    def logprob_pick(self, run_id: int, probe: str, question_id: int) -> int | None:
        """The correctness of the highest-log-prob attempt (earliest on ties)."""
        return self.conn.execute(LOGPROB_PICK_SQL, {"run": run_id, "probe": probe, "q": question_id}).fetchone()[0]

    def unreadable_grade(self, run_id: int, probe: str, question_id: int) -> Any:
        """An attempt's `correct` that is neither 0, 1 nor NULL (a store edited by hand)."""
        return self.conn.execute("SELECT correct FROM attempts WHERE run_id = ? AND probe = ? AND question_id = ? "
                                 "AND correct NOT IN (0, 1) LIMIT 1", (run_id, probe, question_id)).fetchone()[0]

    def probe_cells(self, run_id: int, probes: Sequence[str]) -> list[tuple[int, str, int | None, int | None, int]]:
        """(question id, probe, any correct, first hit's attempt index, attempts) per probe and question: the
        app's question table, one GROUP BY over the covering index `attempts_by_answer`."""
        return self.conn.execute(
            f"SELECT question_id, probe, max(correct), min(CASE WHEN correct = 1 THEN attempt END), count(*) "
            f"FROM attempts WHERE run_id = ? AND probe IN ({','.join('?' * len(probes))}) GROUP BY probe, question_id",
            (run_id, *probes)).fetchall()

    # -- the stored pass (tables `outcomes`, `outcome_runs`) --------------------------------------------

    def attempts_seen(self, run_id: int) -> tuple[int, int | None]:
        """(count, last id) of the run's attempts the pass reads: attempts are only ever added, so these say
        whether a stored pass still describes them."""
        names = registry.names(registry.PROBES)
        return tuple(self.conn.execute(f"SELECT count(*), max(id) FROM attempts WHERE run_id = ? AND probe IN "
                                       f"({','.join('?' * len(names))})", (run_id, *names)).fetchone())

    def stored_pass(self, run_id: int, fold: str) -> tuple[dict[str, list[tuple]], set[str]] | None:
        """The run's stored pass made under definitions `fold`, if it still describes the attempts:
        ({probe: [(question id, OUTCOME_COLUMNS...)] by question id}, probes with log-probs); else None."""
        if self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'outcome_runs'"
                             ).fetchone() is None:
            return None     # a store older than version 4
        row = self.conn.execute("SELECT fold, attempts, last_attempt, logprobs FROM outcome_runs WHERE run_id = ?",
                                (run_id,)).fetchone()
        if row is None or row[0] != fold or tuple(row[1:3]) != self.attempts_seen(run_id):
            return None
        per = {}
        for probe in registry.names(registry.PROBES):   # the pass's order: probes as registered, questions by id
            rows = self.conn.execute(f"SELECT question_id, {OUTCOME_COLUMNS} FROM outcomes WHERE run_id = ? AND "
                                     f"probe = ? ORDER BY question_id", (run_id, probe)).fetchall()
            if rows:
                per[probe] = rows
        return per, set(json.loads(row[3]))
