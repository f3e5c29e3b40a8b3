"""The README's examples run as printed: every `$ ` line of its console blocks, in the README's order, in one
fresh folder (one store, ./store/, as the README's commands assume), as a reader following it from the top
would run them. Each command's output must be what the README shows under it: what a terminal 120 columns wide
shows (stdout and stderr as they come), and nothing where the README shows nothing. The rule for what may
differ (ELLIPSIS and TIMES below, said in the README too): a line `...` stands for any number of lines the
README leaves out; times and rates (`12.7s`, `0:00:03`, `35.2 attempts/s`) differ from run to run; trailing
spaces do not count. The commands run on one torch thread (OMP_NUM_THREADS=1), so the demo model's numbers are
the same bit for bit on every run. The files the import examples read come from `reachtui examples`
(assets/examples/), the first console command. `python` in a console block is this interpreter, and the
README's python blocks run after the console blocks, in the same folder.

`python tests/test_readme.py --update` runs the blocks the same way and writes what each command printed under
it wherever the README's lines no longer match (a command whose output matches keeps its lines and its `...`);
read the diff before committing it."""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


#: What a README block may show otherwise than a fresh run prints (see the module's docstring).
ELLIPSIS = "..."
TIMES = re.compile(r"\b\d+(?:\.\d+)?s\b|\b\d+:\d\d:\d\d\b|-:--:--|\b\d+(?:\.\d+)? attempts/s\b")
#: The terminal the blocks are printed on.
ENV = {"COLUMNS": "120", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def console_examples(text: str | None = None) -> list[tuple[str, list[str]]]:
    """(command, the lines the README shows under it) for each `$ ` line of every console block, in order."""
    out: list[tuple[str, list[str]]] = []
    text = README.read_text(encoding="utf-8") if text is None else text
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append((line[2:].split("  #")[0].strip(), []))
            else:
                out[-1][1].append(line)
    return out


def run(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    """`cmd` as a reader types it, in `cwd`: its output as a terminal shows it (stderr among stdout)."""
    args = shlex.split(cmd)
    if args[0] == "reachtui":
        args = [sys.executable, "-m", "reachtui", *args[1:]]
    elif args[0] == "python":
        args = [sys.executable, *args[1:]]
    env = {k: v for k, v in os.environ.items() if k != "REACHTUI_STORE"} | ENV
    return subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def shows(shown: list[str], printed: list[str]) -> bool:
    """Whether the README's `shown` lines are what was `printed`, under the rule: `...` lines stand for any
    lines, times and rates are any times and rates, trailing spaces do not count."""
    def norm(line: str) -> str:
        return TIMES.sub("<time>", line.rstrip())

    pattern = "".join("(?:.*\n)*?" if line.strip() == ELLIPSIS else re.escape(norm(line) + "\n") for line in shown)
    return re.fullmatch(pattern, "".join(norm(line) + "\n" for line in printed)) is not None


def run_examples(folder: Path, text: str | None = None):
    """Run every console command of the README (or of `text`) in `folder`, in order: (command, shown lines,
    the finished process, its printed lines) for each."""
    for cmd, shown in console_examples(text):
        done = run(cmd, folder)
        yield cmd, shown, done, done.stdout.splitlines()


@pytest.mark.slow
def test_every_console_block_shows_what_its_commands_print_in_a_fresh_folder(tmp_path):
    examples = console_examples()
    assert examples[0][0] == "reachtui examples"           # the files the examples read are made first
    wrong = []
    for cmd, shown, done, printed in run_examples(tmp_path):
        if not shows(shown, printed):
            wrong.append(f"$ {cmd}\n" + "\n".join(difflib.unified_diff(shown, printed, "README", "printed", lineterm="")))
        assert (done.returncode == 0) == (not any(line.startswith("error:") for line in shown)), cmd
    assert not wrong, "\n\n".join(wrong)
    assert len(examples) >= 16
    assert (tmp_path / "table1.tex").read_text().startswith("% ")
    for figure in ("passk.pdf", "compare.svg", "reach.png", "mlp-scan.pdf", "passk.parquet", "base.eval"):
        assert (tmp_path / figure).stat().st_size > 1000, figure
    assert not (tmp_path / "passk.jpg").exists() and not (tmp_path / "summary.xlsx").exists()
    runs = json.loads(subprocess.run([sys.executable, "-m", "reachtui", "runs", "--json"], cwd=tmp_path,
                                     capture_output=True, text=True).stdout)
    names = [r["model"] for r in runs]
    assert names[:6] == ["base", "tuned", "samples_demo", "inspect-demo", "demo", "base-again"]  # imports, an audit
    assert names[6].startswith("demo+demo-lora#") and names[7] == "demo"     # the LoRA adapter's audit, the preset's
    assert (tmp_path / "demo-lora" / "adapter_config.json").is_file()
    assert names[8:] == ["base-by-subject", "base-parquet", "base-datasets", "lm-eval-docs",
                         "inspect-samples"]   # tasks as they come
    for block in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S):
        done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, block + done.stderr


def test_the_rule_forgives_times_rates_and_left_out_lines_and_nothing_else():
    printed = ["run 3: complete in 12.7s (252 attempts generated now)", "sample  6/6 elapsed 0:00:03 left 0:00:00 "
               "35.2 attempts/s 4 ok", "a note", "another note", "run 3"]
    assert shows(["run 3: complete in 9.1s (252 attempts generated now)", "sample  6/6 elapsed 0:00:09 left "
                  "-:--:-- 3.0 attempts/s 4 ok", "...", "run 3"], printed)
    assert shows(["...", "another note   ", "run 3"], printed) and shows(["..."], printed) and shows(["..."], [])
    assert not shows([], printed) and not shows(printed[:-1], printed) and not shows(["..."] + printed[1:3], printed)
    assert not shows(["run 3: complete in 12.7s (253 attempts generated now)", "..."], printed)
    assert not shows(["...", "run 4"], printed) and not shows(["a note", "..."], printed)


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


def update(readme: Path = README) -> list[str]:
    """Rewrite the output under every console command whose README lines no longer show what it prints
    (in a fresh temporary folder); the commands rewritten."""
    import tempfile

    text = readme.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        results = iter(list(run_examples(Path(tmp), text)))
    changed = []

    def block(match: re.Match) -> str:
        lines = []
        for line in match.group(1).splitlines():
            if not line.startswith("$ "):
                continue
            cmd, shown, _done, printed = next(results)
            if not shows(shown, printed):
                changed.append(cmd)
                shown = [p.rstrip() for p in printed]
            lines += [line, *shown]
        return "```console\n" + "".join(x + "\n" for x in lines) + "```"

    readme.write_text(re.sub(r"```console\n(.*?)```", block, text, flags=re.S), encoding="utf-8")
    return changed


if __name__ == "__main__":       # python tests/test_readme.py --update
    if sys.argv[1:] != ["--update"]:
        raise SystemExit("usage: python tests/test_readme.py --update")
    rewritten = update()
    print("\n".join(f"rewrote the output of: {c}" for c in rewritten) or "every console block shows what it prints")
