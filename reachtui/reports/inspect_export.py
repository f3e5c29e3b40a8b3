"""A stored run as an Inspect AI log (`reachtui export inspect RUN -o run.eval`), written by inspect_ai's own
writer (the optional extra `reachtui[inspect]`), so that Inspect's reader, `inspect view` and the tools built
on Inspect logs open it; and the few fields by which `reachtui import` reads such a log back exactly (read by
`reachtui.importers.inspect_log`).

The mapping:

- one Inspect sample per question (`id` = the task's question id, `input` = the question, `target` = the
  gold answer), one epoch per attempt of one probe (`--probe`, sample by default): epoch e is attempt e - 1,
  in the probe's order (a route probe's first hit stays its first hit);
- each epoch's `output` is the attempt's text; its scores are reachtui's grades, `C` or `I`: one named
  after the probe (that attempt) and one named realized (the question's default output), each with the
  extracted answer and the grading rule;
- the realized output and the attempts' mean log-probs travel in each sample's metadata (`reachtui`), the
  run (model, task, protocol and its hash, probe) in the log's; the results hold the summary table's
  numbers (realized; reachable, chance control and excess of the probe), not a second computation.

Inspect epochs are one axis, so a log holds one probe; the MLP scan and the other probes stay in the store
(say so in a note). Reads the store through its public reads (`Store.run_questions`, `Store.attempts`) and
the tables; no torch, no textual.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reachtui import __version__
from reachtui.errors import ReachError
from reachtui.importers.inspect_log import KEY   # the metadata key the reader looks for
from reachtui.probes import registry

#: The -o suffixes of Inspect's two log formats.
LOG_FORMATS = {".eval": "eval", ".json": "json"}


@dataclass
class Written:
    path: str
    probe: str
    samples: int
    notes: list[str] = field(default_factory=list)


def _inspect():
    try:
        import inspect_ai.log as log
        import inspect_ai.model as model
        import inspect_ai.scorer as scorer
    except ImportError:
        raise ReachError("writing Inspect logs needs inspect_ai: pip install 'reachtui[inspect]'") from None
    return log, model, scorer


def check_log_path(path: str) -> str:
    """The Inspect log format of -o PATH (.eval or .json); anything else is refused."""
    suffix = Path(path).suffix.lower()
    if suffix not in LOG_FORMATS:
        raise ReachError(f"-o {path}: an Inspect log is a .eval or a .json file, not {suffix or 'a file without suffix'!r}")
    return LOG_FORMATS[suffix]


def default_probe(probes: list[str]) -> str:
    """The probe whose attempts become epochs: sample when the run has it, else its first reach probe, else
    (a run of default outputs only) realized."""
    if registry.SAMPLE.name in probes:
        return registry.SAMPLE.name
    return probes[0] if probes else registry.REALIZED.name


def _score(scorer, row: dict[str, Any], name: str) -> Any:
    value = scorer.CORRECT if row.get("correct") else scorer.INCORRECT
    keep = ("attempt", "route", "silenced", "temperature", "seed", "rule", "mean_logprob")
    return scorer.Score(value=value, answer=row.get("answer"),
                        explanation=f"{name}: graded by reachtui ({row.get('rule') or 'no rule'})",
                        metadata={k: row.get(k) for k in keep if row.get(k) is not None})


def _summary_numbers(store, run_id: int, probe: str) -> dict[str, Any]:
    """The summary table's row for `probe` (realized, reachable, control, excess), as `export summary` writes
    them (no bootstrap: none of these four has a bootstrap interval)."""
    from reachtui import tables as T

    rows = T.summary_table(store, [run_id], bootstrap=0).dicts()
    return next((r for r in rows if r["probe"] == probe), rows[0] if rows else {})


def _metric(log_mod, name: str, value: Any):
    from reachtui.stats import is_missing

    return None if value is None or is_missing(value) else log_mod.EvalMetric(name=name, value=float(value))


def _stored_json(text: str | None) -> Any:
    """The run's protocol as stored (its canonical JSON, parsed), for the log's metadata."""
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def build_log(store, run_id: int, probe: str | None = None):
    """The run as an `inspect_ai.log.EvalLog` (samples = questions x epochs of `probe`) and the notes."""
    from reachtui.tables import run_info, run_probes

    log_mod, model_mod, scorer = _inspect()
    info = run_info(store, run_id)
    probes = run_probes(store, run_id)
    probe = probe or default_probe(probes)
    if probe != registry.REALIZED.name and probe not in probes:
        raise ReachError(f"run {run_id} has no attempts of probe {probe!r} (it has: "
                         f"{', '.join(probes) or 'realized only'})")
    notes = []
    left = [p for p in probes if p != probe]
    if left:
        notes.append(f"an Inspect log holds one probe's attempts as epochs: {', '.join(left)} left in the store "
                     f"(export inspect --probe {left[0]} for another log)")
    if store.mlp_scan(run_id):
        notes.append("the MLP scan is not an Inspect sample: it stays in the store (export mlp-scan)")
    model_name = f"reachtui/{info['model']}"
    questions = store.run_questions(run_id)
    realized = {a["question_id"]: a for a in store.attempts(run_id, probe=registry.REALIZED.name) if a["attempt"] == 0}
    attempts: dict[int, list[dict]] = {}
    if probe != registry.REALIZED.name:
        for a in store.attempts(run_id, probe=probe):
            attempts.setdefault(a["question_id"], []).append(a)
    samples = []
    for q in questions:
        default = realized.get(q["question_id"])
        tries = attempts.get(q["question_id"], []) if probe != registry.REALIZED.name else ([default] if default else [])
        for a in tries:
            text = a.get("text") or ""
            scores = {probe: _score(scorer, a, probe)}
            mine: dict[str, Any] = {"probe": probe, "attempt": a["attempt"], "mean_logprob": a.get("mean_logprob")}
            if default is not None:
                scores[registry.REALIZED.name] = _score(scorer, default, registry.REALIZED.name)
                mine["realized"] = {"output": default.get("text") or "", "answer": default.get("answer"),
                                    "correct": bool(default.get("correct")),
                                    "mean_logprob": default.get("mean_logprob")}
            samples.append(log_mod.EvalSample(
                id=q["qid"], epoch=a["attempt"] + 1, input=q["question"], target=q["gold"] or "",
                messages=[model_mod.ChatMessageUser(content=q["question"]),
                          model_mod.ChatMessageAssistant(content=text, model=model_name)],
                output=model_mod.ModelOutput.from_content(model_name, text),
                scores=scores, metadata={KEY: mine}))
    if not samples:
        raise ReachError(f"run {run_id} has no attempts of probe {probe!r} yet: nothing to write")
    epochs = max(s.epoch for s in samples)
    short = sorted({s.id for s in samples if s.epoch == 1} - {s.id for s in samples if s.epoch == epochs})
    if short:
        notes.append(f"{len(short)} question(s) have fewer than {epochs} attempts of {probe} (the run is "
                     f"{info['status']}): their samples have fewer epochs")
    row = _summary_numbers(store, run_id, probe)
    results = [log_mod.EvalScore(name=registry.REALIZED.name, scorer=KEY, reducer="mean",
                                 scored_samples=len(questions),
                                 metrics={m.name: m for m in [_metric(log_mod, "accuracy", row.get("realized"))] if m})]
    if probe != registry.REALIZED.name:
        metrics = [_metric(log_mod, k, row.get(k)) for k in ("reachable", "control", "excess")]
        results.append(log_mod.EvalScore(name=probe, scorer=KEY, reducer="max", scored_samples=len(questions),
                                         metrics={m.name: m for m in metrics if m}))
    spec = info["protocol"]     # typed (None where this reachtui cannot read it)
    probe_spec = spec.probe(probe) if spec is not None and probe != registry.REALIZED.name else None
    generate = model_mod.GenerateConfig(
        max_tokens=spec.max_new_tokens if spec else None,
        temperature=(probe_spec.temperature if probe_spec else spec.temperature) if spec else None,
        top_p=(probe_spec.top_p if probe_spec else spec.top_p) if spec else None,
        stop_seqs=list(spec.stop) if spec else None, seed=spec.seed if spec else None)
    created = info.get("created_at") or ""
    eval_spec = log_mod.EvalSpec(
        created=created, task=info["task"], task_version=0,
        dataset=log_mod.EvalDataset(name=info["task"], samples=len(questions),
                                    sample_ids=[q["qid"] for q in questions]),
        model=model_name, model_generate_config=generate,
        config=log_mod.EvalConfig(epochs=epochs, epochs_reducer=["max"]),
        packages={KEY: __version__},
        metadata={KEY: {"version": __version__, "run": run_id, "model": info["model"], "task": info["task"],
                        "task_sha256": info["task_sha256"], "status": info["status"], "source": info["source"],
                        "protocol_hash": info["protocol_hash"], "protocol": _stored_json(info["protocol_json"]),
                        "probe": probe}})
    log = log_mod.EvalLog(
        status="success" if info["status"] == "complete" else "cancelled", eval=eval_spec,
        results=log_mod.EvalResults(total_samples=len(questions), completed_samples=len(questions),
                                    scores=results),
        stats=log_mod.EvalStats(started_at=created, completed_at=info.get("finished_at") or ""),
        samples=samples)
    return log, Written(path="", probe=probe, samples=len(samples), notes=notes)


def write_inspect_log(store, run_id: int, output: str, *, probe: str | None = None, store_path=None) -> Written:
    """Write run `run_id` to -o `output` (.eval or .json) through inspect_ai's writer: into a private folder
    first, then to `output` as every -o file is written (`reachtui.output`: atomic, never the store)."""
    from reachtui.output import write_output_bytes

    fmt = check_log_path(output)
    log_mod, _model, _scorer = _inspect()
    log, written = build_log(store, run_id, probe)
    with tempfile.TemporaryDirectory(prefix="reachtui-inspect-") as tmp:
        path = Path(tmp) / f"run{run_id}.{fmt}"
        log_mod.write_eval_log(log, str(path), format=fmt)
        write_output_bytes(output, path.read_bytes(), store_path)
    written.path = output
    return written
