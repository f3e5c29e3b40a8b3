"""`reachtui generate MODEL PROMPT`: one generation under a route / silenced MLPs, and its answer.

PROMPT is a question, rendered and decoded as the app's live run does (`reachtui.engine.live`): the
protocol's prompt (the default protocol, or `--protocol FILE.toml`), its stop strings, max new tokens,
default decoding and seed, unless an option says otherwise. `--raw` sends PROMPT as given (tokenized with
the tokenizer's defaults, no stop strings unless --stop), so the call can be reproduced with plain
transformers. The model is loaded inside the command.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import replace
from typing import Any

import click

from reachtui.commands import numbers
from reachtui.commands.options import (deployment_options, model_access_options, placement_options,
                                       protocol_file_option, refuse_options, server_options, set_threads,
                                       threads_option)
from reachtui.errors import ReachError
from reachtui.settings import Deployment, ModelAccess, Placement, ProtocolOptions, ServerFlags


@click.command("generate")
@click.argument("model")
@click.argument("prompt")
@click.option("--route", "route_spec", default=None, metavar="SPEC",
              help="Layers to run, in order, e.g. 0-3,3,5-11 (layer 4 skipped, 3 repeated). Default: all.")
@click.option("--silence", default=None, metavar="LAYERS", help="Zero the MLP output of these layers, e.g. 3,5.")
@click.option("--temperature", type=numbers.FLOAT, default=None, help="0 = greedy [default: the protocol's, 0].")
@click.option("--top-p", "top_p", type=numbers.FLOAT, default=None, help="[default: the protocol's, 1.0]")
@click.option("--seed", type=numbers.AsciiIntRange(0, 2**63 - 1), default=None,
              help="Sampling seed, ignored when greedy [default: the protocol's, 0].")
@click.option("--max-new-tokens", "max_new_tokens", type=numbers.INT, default=None,
              help="[default: the protocol's, 48]")
@protocol_file_option
@deployment_options
@click.option("--raw", is_flag=True, help="Send PROMPT as given: no template, no stop strings unless --stop.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@placement_options
@server_options
@threads_option("[default: $OMP_NUM_THREADS, else the free cores: the cores less the load average, at least 1]")
@model_access_options
def generate(model: str, prompt: str, route_spec: str | None, silence: str | None, temperature: float | None,
             top_p: float | None, seed: int | None, max_new_tokens: int | None, protocol_file: str | None,
             deployment: Deployment, raw: bool, as_json: bool, placement: Placement, server_flags: ServerFlags,
             threads: int | None, access: ModelAccess) -> None:
    """Generate from PROMPT with MODEL (demo, a directory, a PEFT adapter directory, or a cached Hugging Face
    id) and print the text and the extracted answer. PROMPT is a question, put in the protocol's prompt (the
    protocol file or preset with the deployment flags on top, as audit and open take them) and decoded as the
    app's live run decodes it (enter in `reachtui open`); --raw sends it as given."""
    from reachtui.commands import serving
    from reachtui.commands.preflight import load_placed, loadable, prompts_fit, protocol_of, stop_strings
    from reachtui.generation import Decoding, check_decoding
    from reachtui.model.load import with_revision

    server = serving.server_of(server_flags, placement, threads=threads)
    set_threads(threads)      # before torch loads: more threads than free cores collapse (options.default_threads)
    model = with_revision(model, access.revision)
    if raw:
        refuse_options(("chat", "system", "template", "fewshot_file"),
                       "with --raw, which sends PROMPT as given (no prompt is built around it)")
    proto = protocol_of(ProtocolOptions(file=protocol_file, deployment=deployment))
    temperature = proto.temperature if temperature is None else temperature
    top_p = proto.top_p if top_p is None else top_p
    seed = proto.seed if seed is None else seed
    max_new_tokens = proto.max_new_tokens if max_new_tokens is None else max_new_tokens
    if max_new_tokens < 1:
        raise ReachError("--max-new-tokens must be at least 1")
    check_decoding(temperature, top_p, names=("--temperature", "--top-p"))   # as the user typed them
    from reachtui.intervention import Intervention
    from reachtui.routes import check_syntax

    # Syntax first (descending ranges, junk), before the model is loaded; ranges are checked after.
    if route_spec is not None:
        check_syntax(route_spec, "route")
    if silence is not None and silence.strip().lower() not in ("", "none"):
        check_syntax(silence, "silenced layers")
    runner: Any = None
    if server is None:
        loadable(model, max_new_tokens, access)
    else:                      # a route or silenced MLPs: refused by its runner's resolve, in one line
        runner = serving.connect(model, server, access)
        click.get_current_context().call_on_close(runner.close)
    # the prompt against the model's positions, before it loads (--raw: as given, no template)
    sent = replace(proto, template="{question}", system="", fewshot=(), chat=False) if raw else proto
    prompts_fit(model, replace(sent, max_new_tokens=max_new_tokens), [("PROMPT", prompt)], access, server=runner)
    if runner is not None:
        name = runner.info["name"]
    else:
        from reachtui.model.run import Runner

        loaded = load_placed(model, placement, access)
        runner, name = Runner(loaded), loaded.name
    intervention = Intervention.parse(route_spec, silence, runner.num_layers)
    if raw:                # PROMPT as given, and only the --stop strings given
        text_in, stop = prompt, stop_strings(deployment)
    else:
        text_in, stop = proto.render_prompt(prompt, runner.tokenizer), tuple(proto.stop)

    from reachtui.grading import extract_answer

    decoding = replace(Decoding.of(proto, temperature, top_p), max_new_tokens=max_new_tokens, stop=stop)
    ran = runner.resolve(intervention)      # the route written out (the identity when none was given)
    gen = runner.generate([text_in], ran, seeds=[seed], decoding=decoding)[0]
    answer, rule = extract_answer(gen.text, proto.answer_format)
    route_text, silenced = ran.texts()[0], sorted(ran.silenced)
    if as_json:
        click.echo(json.dumps({
            "model": name,
            "prompt": text_in,
            "text": gen.text,
            "answer": answer,
            "answer_rule": rule,
            "route": route_text,
            "silenced": sorted(silenced),
            "layers_executed": gen.layers_executed,
            "new_tokens": gen.new_tokens,
            "mean_logprob": gen.mean_logprob if math.isfinite(gen.mean_logprob) else None,
            "compute": gen.compute,
            "finish": gen.finish,
            "temperature": temperature,
            "top_p": top_p,
            "seed": seed,
        }, ensure_ascii=False))
        return
    from reachtui.tables.formats import shown

    # the text as generated (click would strip escape sequences from a pipe); on a terminal, control
    # characters shown as marks, never run
    click.echo(shown(gen.text) if sys.stdout.isatty() else gen.text, color=True)
    click.echo(f"answer: {answer if answer is not None else '(none)'}"
               + (f"  (rule {rule}: {RULE_TEXT.get(rule, rule)})" if rule else ""))
    route_line = f"route {route_text}" + (f", MLP silenced in {','.join(map(str, silenced))}" if silenced else "")
    tokens = gen.compute // max(gen.layers_executed, 1)
    click.echo(f"{route_line}; {gen.new_tokens} new tokens ({FINISH_TEXT.get(gen.finish, gen.finish)}); compute "
               f"{gen.compute} layer-tokens ({gen.layers_executed} layers x {tokens} tokens, prompt and new)", err=True)


#: What each extraction rule of `reachtui.grading` read (the bracket after the answer).
RULE_TEXT = {"hash": 'the first "#### N"', "the_answer_is": '"the answer is N"', "boxed": "the last \\boxed{}",
             "answer_colon": '"Answer: N"', "last_number": "the last number in the text",
             "choice": "a lone letter", "exact": "the whole text", "timeout": "math-verify ran out of time"}

#: Why the generation stopped (Generation.finish).
FINISH_TEXT = {"stop": "ended at a stop string", "eos": "ended at end-of-text", "length": "ended at max new tokens"}
