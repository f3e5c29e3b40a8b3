"""The check of every prompt against the model's positions (`reachtui.commands.preflight.prompts_fit`), timed
on the GSM8K test set with the demo model, against what it precedes: loading the model (run by hand, never
collected).

    python tests/bench/bench_prompt_fit.py [--gsm8k /work/shared/data/gsm8k/test.jsonl] [--repeats 3]

Each setting runs in a fresh process (the tokenizer's import is part of the cost), the median of `--repeats`:
`import transformers` alone, `load_model("demo")` (the baseline: what an audit does right after the check),
the check on the 1,319 questions under the default protocol, under `--protocol gsm8k-cot --max-new-tokens
64`, and with 20,000 few-shot examples (refused by its characters, nothing tokenized), and the check followed
by the model's load in one process (the two share their imports: the difference to the load alone is what
the check adds to an audit). Prints seconds and the ratio to the model's load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHECK = r"""
import sys, time
t0 = time.monotonic()
from reachtui.commands.preflight import prompts_fit, protocol_of
from reachtui.errors import ReachError
from reachtui.settings import Deployment, ModelAccess, ProtocolOptions
from reachtui.tasks import load_task
task = load_task(sys.argv[1])
fewshot = sys.argv[4] if sys.argv[4] != "-" else None
protocol = protocol_of(ProtocolOptions(file=sys.argv[2] if sys.argv[2] != "-" else None,
                                       max_new_tokens=int(sys.argv[3]), deployment=Deployment(fewshot_file=fewshot)))
try:
    fit = prompts_fit("demo", protocol, [(str(q.id), q.question) for q in task.questions], ModelAccess(),
                      skip_long=True)
    said = f"{len(fit.skipped)} over"
except ReachError as exc:
    said = "refused: " + str(exc)[:60]
if len(sys.argv) > 5:            # then load the model, as the audit does: what the check adds to it
    from reachtui.model.load import load_model
    load_model("demo", device="cpu")
print(time.monotonic() - t0, said)
"""

SETTINGS = {
    "import transformers": ["-c", "import time; t0 = time.monotonic(); import transformers; print(time.monotonic() - t0, '')"],
    "load_model(demo)": ["-c", "import time; t0 = time.monotonic(); from reachtui.model.load import load_model; "
                               "load_model('demo', device='cpu'); print(time.monotonic() - t0, '')"],
}


def timed(argv: list[str]) -> tuple[float, str]:
    out = subprocess.run([sys.executable, *argv], capture_output=True, text=True, check=True).stdout.split(" ", 1)
    return float(out[0]), out[1].strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gsm8k", default="/work/shared/data/gsm8k/test.jsonl")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        shots = os.path.join(tmp, "fewshot.jsonl")
        rows = [json.loads(line) for line in open(args.gsm8k)]
        with open(shots, "w") as fh:
            for i in range(20_000):
                fh.write(json.dumps({"question": rows[i % len(rows)]["question"],
                                     "answer": rows[i % len(rows)]["answer"]}) + "\n")
        settings = dict(SETTINGS)
        settings["check: default protocol"] = ["-c", CHECK, args.gsm8k, "-", "48", "-"]
        settings["check: gsm8k-cot, 64 new tokens"] = ["-c", CHECK, args.gsm8k, "gsm8k-cot", "64", "-"]
        settings["check: 20,000 few-shot examples"] = ["-c", CHECK, args.gsm8k, "-", "48", shots]
        settings["check (gsm8k-cot), then load_model"] = ["-c", CHECK, args.gsm8k, "gsm8k-cot", "64", "-", "load"]
        results = {}
        for name, argv in settings.items():
            runs = [timed(argv) for _ in range(args.repeats)]
            results[name] = (statistics.median(t for t, _ in runs), runs[0][1])
    base = results["load_model(demo)"][0]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; median of {args.repeats}, fresh processes")
    for name, (seconds, said) in results.items():
        print(f"{name:<34} {seconds:6.2f} s  {seconds / base:5.2f}x the model's load  {said}")


if __name__ == "__main__":
    t0 = time.monotonic()
    main()
    print(f"({time.monotonic() - t0:.0f} s in all)")
