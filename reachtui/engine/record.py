"""Grading into attempt rows: the one place an output becomes a stored attempt (the audit, the app's apply
job and the importer all write rows made here)."""

from __future__ import annotations

from typing import Any

from reachtui.grading import grade


def graded(text: str, gold: str, fmt: str) -> dict[str, Any]:
    """The text with its extracted answer, the rule that found it and whether it is correct."""
    g = grade(text, gold, fmt)
    return dict(text=text, answer=g.answer, rule=g.rule, correct=g.correct)


def attempt_row(question: dict[str, Any], work, gen, fmt: str) -> dict[str, Any]:
    """The attempts-table row of one generation (`gen`, a `Generation`) of planned attempt `work` on
    `question` (a run question: question_id, gold). The work's temperature and seed are not stored: the
    protocol gives them (`Protocol.decoding_of`, `reachtui.seeds.attempt_seed`)."""
    route, silenced = work.intervention.texts()
    return dict(
        question_id=question["question_id"], probe=work.probe, attempt=work.attempt, route=route, silenced=silenced,
        **graded(gen.text, question["gold"], fmt),
        mean_logprob=gen.mean_logprob, new_tokens=gen.new_tokens, layers_executed=gen.layers_executed,
        compute=gen.compute)
