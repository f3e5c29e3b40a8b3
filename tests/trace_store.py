"""A small audit of the demo model that the trace tests share (test_trace_cli.py, test_tui_trace.py): twelve demo
questions, demo-0026 first, the sample probe with K = 4, under a protocol of the caller's template."""

from __future__ import annotations

import json
from pathlib import Path

QIDS = ["demo-0026"] + [f"demo-{i:04d}" for i in range(1, 12)]


def twelve_question_audit(folder: Path, runner, template: str | None = None):
    """(store path, run id, protocol, qids of failure:sample) of the audit, made in `folder` with `runner`."""
    from reachtui.assets import DEMO_MODEL_DIR
    from reachtui.engine.audit import run_audit
    from reachtui.protocol import Protocol, protocol_from_options
    from reachtui.store import Store
    from reachtui.tasks import load_task

    demo = {q.id: q for q in load_task("demo").questions}
    task_file = folder / "twelve.jsonl"
    task_file.write_text("".join(json.dumps({"id": q, "question": demo[q].question, "answer": demo[q].answer}) + "\n"
                                 for q in QIDS))
    base = Protocol() if template is None else Protocol(template=template)
    protocol = protocol_from_options(base, probes="sample", budget=4)
    path = folder / "audit.sqlite"
    with Store(path) as store:
        result = run_audit(store, runner, model_name="demo", model_path=str(DEMO_MODEL_DIR),
                           model_class=runner.arch.model_class, task=load_task(str(task_file)), protocol=protocol,
                           batch_size=16)
        members = [store.question(k)["qid"] for k in store.failure_set_members(
            store.get_failure_set(result.run_id, "failure:sample")["id"])]
    assert result.status == "complete" and members
    return path, result.run_id, protocol, members
