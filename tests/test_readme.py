"""The README's examples run as printed: every `$ ` line of its console blocks, in the README's order, in
one fresh folder (one store, ./store/, as the README's commands assume), as a reader following it from the
top would run them. Each command's output must be the lines the README shows under it (stdout; stderr for
a command that fails); a command shown without output must succeed. The files the import examples read
come from `reachtui examples` (assets/examples/), the first console command. `python` in a console block is
this interpreter, and the README's python blocks run after the console blocks, in the same folder."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def console_examples() -> list[tuple[str, list[str]]]:
    """(command, the lines the README shows under it) for each `$ ` line of every console block, in order."""
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S):
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
    elif args[0] == "python":
        args = [sys.executable, *args[1:]]
    env = {k: v for k, v in os.environ.items() if k != "REACHTUI_STORE"}
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env)


def test_every_console_block_runs_as_printed_in_order_in_a_fresh_folder(tmp_path):
    examples = console_examples()
    assert examples[0][0] == "reachtui examples"           # the files the examples read are made first
    checked = 0
    for cmd, shown in examples:
        done = run(cmd, tmp_path)
        printed = (done.stdout if done.returncode == 0 else done.stderr).splitlines()
        if shown or done.returncode != 0:
            assert printed == shown, f"{cmd}\n" + "\n".join(printed)
            checked += 1
        assert (done.returncode == 0) == (not any(line.startswith("error:") for line in shown)), cmd
    assert len(examples) >= 16 and checked >= 10
    assert (tmp_path / "table1.tex").read_text().startswith("% ")
    for figure in ("passk.pdf", "compare.svg", "reach.png", "mlp-scan.pdf", "passk.parquet", "base.eval"):
        assert (tmp_path / figure).stat().st_size > 1000, figure
    assert not (tmp_path / "passk.jpg").exists() and not (tmp_path / "summary.xlsx").exists()
    runs = json.loads(run("reachtui runs --json", tmp_path).stdout)
    names = [r["model"] for r in runs]
    assert names[:6] == ["base", "tuned", "samples_demo", "inspect-demo", "demo", "base-again"]  # imports, an audit
    assert names[6].startswith("demo+demo-lora#") and names[7] == "demo"     # the LoRA adapter's audit, the preset's
    assert (tmp_path / "demo-lora" / "adapter_config.json").is_file()
    assert names[8:] == ["base-by-subject", "base-parquet", "base-datasets", "lm-eval-docs",
                         "inspect-samples"]   # tasks as they come
    for block in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S):
        done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, block + done.stderr


def test_the_protocol_example_is_what_reachtui_protocol_prints():
    """The Headless section's TOML is the default protocol with --budget 16, as `reachtui protocol` writes it
    (its first lines: the run, the hash and the match keys), and `--protocol` reads it back to that hash."""
    import tomllib

    from reachtui.protocol import Protocol, protocol_from_options, protocol_to_toml

    body = README.read_text(encoding="utf-8").split("## Headless", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    first, keys, toml = body.split("\n", 2)
    spec = protocol_from_options(Protocol(), budget=16)
    assert first == f"# run 1: demo on demo, protocol {spec.hash()}"
    assert keys == "# match keys: " + ", ".join(f"{p} {k}" for p, k in spec.match_keys().items())
    assert toml == protocol_to_toml(spec)
    assert Protocol.from_dict(tomllib.loads(toml)).hash() == spec.hash()
