"""The README's console examples run as printed: the "Tables out" section's commands are run in a fresh
folder (the store in ./store/, as the README's commands assume), on the files the examples name, and each
command's output must be the lines the README shows under it (stdout; stderr for a command that fails)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
RIGHT = {"demo-0001": "6", "demo-0002": "60", "demo-0003": "52", "demo-0004": "18"}
WORKING = {"demo-0001": " 21-8=13. 13*2=26. 26-20=6. #### 6"}


def _output(qid: str, answer: str) -> str:
    return WORKING[qid] if answer == RIGHT[qid] and qid in WORKING else f" the answer is {answer}. #### {answer}"


def _jsonl(realized: dict[str, str], samples: dict[str, list[str]]) -> str:
    lines = []
    for qid in RIGHT:
        lines.append({"question_id": qid, "probe": "realized", "attempt": 0, "output": _output(qid, realized[qid])})
        lines += [{"question_id": qid, "probe": "sample", "attempt": j, "output": _output(qid, a)}
                  for j, a in enumerate(samples[qid])]
    return "".join(json.dumps(x) + "\n" for x in lines)


def write_inputs(folder: Path) -> None:
    """base: realized on demo-0001 and -0004; sample hits 3, 1, 2, 1 times (first at k = 1, 4, 2, 1).
    tuned: realized and reachable on all but demo-0003. samples_demo: an lm-eval log of two responses a doc,
    under two filters. broken: an unknown question id on line 6."""
    base = _jsonl({"demo-0001": "6", "demo-0002": "62", "demo-0003": "54", "demo-0004": "18"},
                  {"demo-0001": ["6", "6", "6", "7"], "demo-0002": ["62", "62", "62", "60"],
                   "demo-0003": ["54", "52", "52", "53"], "demo-0004": ["18", "20", "20", "20"]})
    tuned = _jsonl({"demo-0001": "6", "demo-0002": "60", "demo-0003": "54", "demo-0004": "18"},
                   {q: [RIGHT[q]] * 4 if q != "demo-0003" else ["54"] * 4 for q in RIGHT})
    (folder / "base.jsonl").write_text(base)
    (folder / "tuned.jsonl").write_text(tuned)
    rows = []
    for doc_id, qid in enumerate(RIGHT):
        for flt in ("strict-match", "flexible-extract"):
            resps = [_output(qid, RIGHT[qid]), _output(qid, "1")]
            rows.append({"doc_id": doc_id, "filter": flt, "target": RIGHT[qid], "resps": [resps],
                         "filtered_resps": [RIGHT[qid]]})
    (folder / "samples_demo.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    broken = base.splitlines()[:5] + [json.dumps({"question_id": "demo-9999", "probe": "sample", "attempt": 0,
                                                  "output": " #### 1"})]
    (folder / "broken.jsonl").write_text("\n".join(broken) + "\n")


def console_examples(section: str) -> list[tuple[str, list[str]]]:
    """(command, the lines the README shows under it) for each `$ ` line of the section's console blocks."""
    text = README.read_text(encoding="utf-8")
    body = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", body, flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append((line[2:].split("  #")[0].strip(), []))
            else:
                out[-1][1].append(line)
    return out


def run(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    args = shlex.split(cmd)
    if args[0] == "reachtui":
        args = [sys.executable, "-m", "reachtui", *args[1:]]
    env = {k: v for k, v in os.environ.items() if k != "REACHTUI_STORE"}
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("readme")
    write_inputs(folder)
    examples = dict(console_examples("Tables out: export, compare, import"))
    setup = [next(c for c in examples if c.startswith("reachtui import base.jsonl")),
             "reachtui import tuned.jsonl --task demo --model tuned",
             next(c for c in examples if c.startswith("reachtui import samples_demo.jsonl"))]
    for i, cmd in enumerate(setup, start=1):
        done = run(cmd, folder)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().endswith(f"run {i}")
    return folder


def test_the_tables_examples_print_what_the_readme_shows(folder):
    checked = 0
    for cmd, shown in console_examples("Tables out: export, compare, import"):
        if cmd.startswith(("reachtui import base.jsonl", "reachtui import samples_demo.jsonl")):
            continue    # made the store (the fixture)
        done = run(cmd, folder)
        printed = (done.stdout if done.returncode == 0 else done.stderr).splitlines()
        if shown or done.returncode != 0:
            assert printed == shown, f"{cmd}\n" + "\n".join(printed)
            checked += 1
        assert (done.returncode == 0) == (not any(line.startswith("error:") for line in shown)), cmd
    assert checked >= 7
    assert (folder / "table1.tex").read_text().startswith("% ")


def test_the_protocol_example_is_what_reachtui_protocol_prints():
    """The Headless section's TOML is the default protocol with --budget 16, as `reachtui protocol` writes it,
    and `--protocol` reads it back to the hash its first line names."""
    import tomllib

    from reachtui.protocol import Protocol, protocol_from_options, protocol_to_toml

    body = README.read_text(encoding="utf-8").split("## Headless", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    first, toml = body.split("\n", 1)
    spec = protocol_from_options(Protocol(), budget=16)
    assert first == f"# run 1: demo on demo, protocol {spec.hash()}"
    assert toml == protocol_to_toml(spec)
    assert Protocol.from_dict(tomllib.loads(toml)).hash() == spec.hash()
