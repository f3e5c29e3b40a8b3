"""Make assets/examples/ (the files `reachtui examples` copies out for the README's import examples), by hand:

    python tests/bench/make_examples.py [--out assets/examples]

Generations for the demo task's first four questions (gold 6, 60, 52, 18), written as the formats reachtui
imports them:

- base.jsonl, tuned.jsonl: reachtui's jsonl (one attempt per line: question_id, probe, attempt, output).
  base realizes demo-0001 and demo-0004; its 4 samples hit 3, 1, 2 and 1 times (first at k = 1, 4, 2, 1).
  tuned realizes and reaches all but demo-0003.
- samples_demo.jsonl: an lm-eval `--log_samples` file: one row per doc per filter (strict-match and
  flexible-extract), two responses a doc (the first right, the second wrong), each with its doc (question,
  answer, subject) and target, so it can be imported without --task.
- demo_subjects.csv: the four questions as a CSV task (id, question, answer) with a metadata column, subject.
- demo_inspect.eval: an Inspect AI log, made by inspect_ai itself with its offline mock model: each
  question 3 epochs, right in epochs 1 and 3, wrong in epoch 2.
- broken.jsonl: base's first five lines and a sixth naming a question the task does not have.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RIGHT = {"demo-0001": "6", "demo-0002": "60", "demo-0003": "52", "demo-0004": "18"}
WORKING = {"demo-0001": " 21-8=13. 13*2=26. 26-20=6. #### 6"}


def output(qid: str, answer: str) -> str:
    return WORKING[qid] if answer == RIGHT[qid] and qid in WORKING else f" the answer is {answer}. #### {answer}"


def jsonl(realized: dict[str, str], samples: dict[str, list[str]]) -> str:
    lines = []
    for qid in RIGHT:
        lines.append({"question_id": qid, "probe": "realized", "attempt": 0, "output": output(qid, realized[qid])})
        lines += [{"question_id": qid, "probe": "sample", "attempt": j, "output": output(qid, a)}
                  for j, a in enumerate(samples[qid])]
    return "".join(json.dumps(x) + "\n" for x in lines)


#: The subject column of demo_subjects.csv: whether the question needs a multiplication.
SUBJECT = {"demo-0001": "multiplication", "demo-0002": "multiplication", "demo-0003": "multiplication",
           "demo-0004": "addition"}


def lm_eval_rows() -> str:
    """One row per doc per filter, each with its `doc` (the task's record, as lm-eval writes it) and target."""
    from reachtui.tasks import load_task

    task = {q.id: q for q in load_task("demo").questions}
    rows = []
    for doc_id, qid in enumerate(RIGHT):
        for flt in ("strict-match", "flexible-extract"):
            rows.append({"doc_id": doc_id, "doc": {"question": task[qid].question, "answer": RIGHT[qid],
                                                   "subject": SUBJECT[qid]},
                         "filter": flt, "target": RIGHT[qid],
                         "resps": [[output(qid, RIGHT[qid]), output(qid, "1")]], "filtered_resps": [RIGHT[qid]]})
    return "".join(json.dumps(r) + "\n" for r in rows)


def subjects_csv() -> str:
    """The demo task's first four questions as a CSV task with a metadata column, subject."""
    import csv
    import io

    from reachtui.tasks import load_task

    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["id", "question", "answer", "subject"])
    for q in load_task("demo").questions[:4]:
        out.writerow([q.id, q.question, q.answer, SUBJECT[q.id]])
    return buf.getvalue()


def inspect_log(out: Path) -> None:
    """demo_inspect.eval: inspect_ai's own eval of the four questions by its mock model (no network)."""
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    from reachtui.tasks import load_task

    task = {q.id: q for q in load_task("demo").questions}
    epochs = 3
    outs = []
    for epoch in range(1, epochs + 1):       # inspect runs every sample of an epoch before the next epoch
        for qid, gold in RIGHT.items():
            reply = ModelOutput.from_content("mockllm/model", output(qid, gold if epoch != 2 else "1"))
            reply.usage = ModelUsage(input_tokens=5, output_tokens=5, total_tokens=10)
            outs.append(reply)
    dataset = [Sample(id=qid, input=task[qid].question, target=gold) for qid, gold in RIGHT.items()]
    with tempfile.TemporaryDirectory() as tmp:
        logs = inspect_eval(Task(dataset=dataset, solver=generate(), scorer=match(), epochs=epochs),
                            model=get_model("mockllm/model", custom_outputs=outs), log_dir=tmp, display="none",
                            max_samples=1)
        assert logs[0].status == "success"
        shutil.copyfile(logs[0].location, out / "demo_inspect.eval")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "assets" / "examples")
    ap.add_argument("--keep-inspect", action="store_true", help="leave demo_inspect.eval as it is")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    base = jsonl({"demo-0001": "6", "demo-0002": "62", "demo-0003": "54", "demo-0004": "18"},
                 {"demo-0001": ["6", "6", "6", "7"], "demo-0002": ["62", "62", "62", "60"],
                  "demo-0003": ["54", "52", "52", "53"], "demo-0004": ["18", "20", "20", "20"]})
    tuned = jsonl({"demo-0001": "6", "demo-0002": "60", "demo-0003": "54", "demo-0004": "18"},
                  {q: [RIGHT[q]] * 4 if q != "demo-0003" else ["54"] * 4 for q in RIGHT})
    (args.out / "base.jsonl").write_text(base)
    (args.out / "tuned.jsonl").write_text(tuned)
    (args.out / "samples_demo.jsonl").write_text(lm_eval_rows())
    (args.out / "demo_subjects.csv").write_text(subjects_csv())
    broken = base.splitlines()[:5] + [json.dumps({"question_id": "demo-9999", "probe": "sample", "attempt": 0,
                                                  "output": " #### 1"})]
    (args.out / "broken.jsonl").write_text("\n".join(broken) + "\n")
    if not args.keep_inspect:
        inspect_log(args.out)
    for f in sorted(args.out.iterdir()):
        print(f"{f.relative_to(ROOT) if f.is_relative_to(ROOT) else f}  {f.stat().st_size} bytes")


if __name__ == "__main__":
    main()
