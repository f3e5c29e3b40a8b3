"""The protocol's deployment fields as flags, declared once for audit, open, serve and generate (--chat/--no-chat,
--system, --template, --answer-format, --stop, --fewshot), applied on top of a protocol file or a preset
(`--protocol gsm8k-cot`): what the store keeps is the protocol the flags describe (its fields and hash), a
preset by name is its file by path, and a wrong flag is one line."""

from __future__ import annotations

import json

import pytest
from conftest import run_main

from reachtui.protocol import DEFAULT_TEMPLATE, Protocol

FLAGS = ["--system", "Work it out.", "--template", "Q: {question}\nA:", "--answer-format", "number",
         "--stop", "\\n", "--stop", "Q:"]
COMMON = ["--task", "demo", "--probes", "realized", "--limit", "2", "--device", "cpu", "--threads", "1"]


@pytest.fixture
def fewshot(tmp_path):
    path = tmp_path / "shots.jsonl"
    path.write_text(json.dumps({"question": "What is 1 plus 1?", "answer": "1+1=2. #### 2", "id": "x"}) + "\n"
                    + json.dumps({"question": "What is 5 minus 3?", "answer": "5-3=2. #### 2"}) + "\n")
    return path


def expected() -> Protocol:
    from reachtui.protocol import protocol_from_options

    return protocol_from_options(Protocol(), probes="realized", system="Work it out.", template="Q: {question}\nA:",
                                 stop=("\n", "Q:"), fewshot=(("What is 1 plus 1?", "1+1=2. #### 2"),
                                                             ("What is 5 minus 3?", "5-3=2. #### 2")))


def stored(store_path, run_id: int = 1) -> tuple[Protocol, str]:
    from reachtui.store import Store

    with Store(store_path, readonly=True) as store:
        return store.run_protocol(run_id), store.get_run(run_id)["protocol_hash"]


def test_audit_flags_are_the_stored_protocol(tmp_path, fewshot):
    store = tmp_path / "s.sqlite"
    code, out, err = run_main(["audit", "demo", *COMMON, *FLAGS, "--fewshot", str(fewshot), "--store", str(store)])
    assert code == 0, err
    spec, stored_hash = stored(store)
    want = expected()
    assert spec == want and stored_hash == want.hash() != Protocol().hash()
    assert (spec.system, spec.template, spec.stop, len(spec.fewshot)) == ("Work it out.", "Q: {question}\nA:",
                                                                          ("\n", "Q:"), 2)
    # the prompt the attempts were made from is the one those fields render
    assert spec.render_prompt("Q?").startswith("Work it out.\n\nQ: What is 1 plus 1?\nA: 1+1=2. #### 2\n\n")


def test_open_takes_the_same_flags(tmp_path, fewshot, monkeypatch):
    """`reachtui open demo` with the flags: the audit its app runs stores the same protocol as audit's."""
    import reachtui.commands.open as open_cmd
    from reachtui.model.load import load_model
    from reachtui.model.run import Runner

    started = {}
    monkeypatch.setattr(open_cmd, "_run_app", lambda path, run_id, launch, **kw: started.update(job=launch.audit_job))
    store = tmp_path / "s.sqlite"
    code, _, err = run_main(["open", "demo", *COMMON, *FLAGS, "--fewshot", str(fewshot), "--store", str(store)])
    assert code == 0, err
    runner = Runner(load_model("demo", device="cpu"))
    run_id = started["job"](lambda: runner, lambda ev: None, None)
    assert stored(store, run_id)[0] == expected()


def test_serve_checks_the_flags_as_open_does(tmp_path, monkeypatch):
    import reachtui.tui.serve as serve_mod

    served = {}
    monkeypatch.setattr(serve_mod, "serve", lambda command, host, port: served.update(command=command))
    code, _, err = run_main(["serve", "demo", "--limit", "2", "--system", "Be brief.", "--stop", "Q:", "--store",
                             str(tmp_path / "s.sqlite")])
    assert code == 0, err
    assert served["command"].endswith("open demo --limit 2 --system 'Be brief.' --stop Q: --store "
                                      f"{tmp_path / 's.sqlite'}")
    code, out, err = run_main(["serve", "demo", "--answer-format", "roman"])
    assert (code, err) == (2, "error: protocol: unknown answer_format 'roman' (known: number, math, choice, exact)\n")


def test_generate_renders_with_the_flags(fewshot):
    code, out, err = run_main(["generate", "demo", "What is 2 plus 5?", "--json", *FLAGS, "--fewshot", str(fewshot)])
    assert code == 0, err
    assert json.loads(out)["prompt"] == expected().render_prompt("What is 2 plus 5?")


def test_chat_switches_the_template_with_it():
    from reachtui.commands.preflight import protocol_of
    from reachtui.settings import Deployment, ProtocolOptions

    chat = protocol_of(ProtocolOptions(deployment=Deployment(chat=True)))
    assert (chat.chat, chat.template) == (True, "{question}")
    back = protocol_of(ProtocolOptions(deployment=Deployment(chat=False)))
    assert (back.chat, back.template) == (False, DEFAULT_TEMPLATE) and back == Protocol()
    code, _, err = run_main(["generate", "demo", "1 + 1?", "--chat"])
    assert (code, err) == (2, "error: protocol: chat = true but the tokenizer has no chat template; use a plain "
                              "template\n")


def test_presets_load_by_name_and_by_path(tmp_path):
    from reachtui.presets import load_protocol, preset_names, preset_path
    from reachtui.protocol import load_protocol_file

    assert preset_names() == ["gsm8k-cot", "math-boxed", "mc-letters"]
    gsm = load_protocol("gsm8k-cot")
    assert gsm == load_protocol_file(preset_path("gsm8k-cot")) == load_protocol(str(preset_path("gsm8k-cot")))
    assert (gsm.answer_format, gsm.max_new_tokens, gsm.stop) == ("number", 512, ("\nQuestion:",))
    assert "####" in gsm.system
    math = load_protocol("math-boxed")
    assert (math.answer_format, math.max_new_tokens) == ("math", 1024) and "\\boxed{}" in math.system
    mc = load_protocol("mc-letters")
    assert (mc.answer_format, mc.max_new_tokens, mc.stop) == ("choice", 16, ("\n",))
    # the audit stores the preset with the flags on top, by name as by path
    store = tmp_path / "s.sqlite"
    for spec in ("gsm8k-cot", str(preset_path("gsm8k-cot"))):
        code, out, err = run_main(["audit", "demo", *COMMON, "--protocol", spec, "--max-new-tokens", "32", "--new",
                                   "--store", str(store)])
        assert code == 0, err
    from dataclasses import replace

    want = replace(gsm, probes=(), max_new_tokens=32)
    assert stored(store, 1) == stored(store, 2) == (want, want.hash())


def test_the_presets_are_listed_and_printed():
    from reachtui.presets import load_protocol

    code, out, _ = run_main(["protocol", "--presets"])
    assert code == 0
    assert [line.split()[:2] for line in out.splitlines()] == [
        [name, load_protocol(name).hash()] for name in ("gsm8k-cot", "math-boxed", "mc-letters")]
    code, out, _ = run_main(["protocol", "--preset", "math-boxed"])
    import tomllib

    assert code == 0 and Protocol.from_dict(tomllib.loads(out)) == load_protocol("math-boxed")


@pytest.mark.parametrize("args, said", [
    (["audit", "demo", "--task", "demo", "--protocol", "gsm8k"],
     "--protocol gsm8k: no such file, and no such preset (presets: gsm8k-cot, math-boxed, mc-letters)"),
    (["generate", "demo", "1 + 1?", "--protocol", "nope.toml"], "nope.toml: no such protocol file"),
    (["protocol", "--preset", "gsm8k"], "--preset gsm8k: no such preset (presets: gsm8k-cot, math-boxed, mc-letters)"),
    (["audit", "demo", "--task", "demo", "--fewshot", "missing.jsonl"], "--fewshot missing.jsonl: no such file"),
    (["generate", "demo", "1 + 1?", "--template", "no placeholder"],
     "protocol: template must contain {question} (unless chat = true)"),
    (["audit", "demo", "--task", "demo", "--protocol", "gsm8k-cot"],
     "--max-new-tokens 512 does not fit the model's position limit of 512 tokens (prompt + generated tokens); "
     "give at most 511, less the prompt's length"),
])
def test_bad_flags_are_one_line(args, said, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main([*args, "--store", str(tmp_path / "s.sqlite")] if args[0] == "audit" else args)
    assert (code, out, err) == (2, "", f"error: {said}\n")


def test_a_fewshot_file_without_answers_is_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "1 + 1?"}\n')
    code, _, err = run_main(["generate", "demo", "2 + 2?", "--fewshot", str(bad)])
    assert (code, err) == (2, f"error: --fewshot {bad}: line 1: needs a text question and answer\n")
