"""`reachtui trace MODEL QUESTION_ID`: where the answer changes, from the command line — the default output
beside the output under --route/--silence, the first token where they differ, the top next tokens under
each, the gold token, and the logit lens along the route (what the app's trace pane shows;
`reachtui.engine.trace`). With --store/--run it traces a stored run's question under the run's protocol.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from reachtui.commands import numbers
from reachtui.commands.options import (deployment_options, model_access_options, placement_options,
                                       protocol_file_option, set_threads, store_option, task_option, threads_option)
from reachtui.errors import ReachError
from reachtui.settings import Deployment, ModelAccess, Placement, ProtocolOptions

if TYPE_CHECKING:
    from reachtui.tasks import Fields

#: Terminal columns of one line of tokens and their bars.
WIDTH = 100


@click.command("trace", short_help="Where the answer changes: divergence, top-k and the logit lens.")
@click.argument("args", nargs=-1, metavar="[MODEL] QUESTION_ID")
@task_option(required=False, help="The questions: demo (the default), a file or a dataset, as audit takes it; "
                                  "with --store/--run, the run's.")
@click.option("--route", "route_spec", default=None, metavar="SPEC",
              help="The edited route, e.g. 0-3,3,5-7 (layer 4 skipped, 3 repeated). Default: all layers in order.")
@click.option("--silence", default=None, metavar="LAYERS", help="Silence the MLP of these layers, e.g. 4 or 3,5.")
@click.option("--position", type=numbers.INT, default=None, metavar="P",
              help="Read the top-k and the lens at output token P (0 is the first generated token) [default: the "
                   "first token where the outputs differ, else where the default output leaves the gold answer].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@store_option
@click.option("--run", "run_spec", default=None, metavar="ID",
              help="Trace a question of this stored run, under its protocol, with its model unless MODEL is given "
                   "[default with --store: the latest run].")
@protocol_file_option
@deployment_options
@placement_options
@threads_option("[default: $OMP_NUM_THREADS, else the free cores: the cores less the load average, at least 1]")
@model_access_options
def trace(args: tuple[str, ...], task_spec: str | None, task_name: str | None, task_fields: Fields,
          route_spec: str | None, silence: str | None, position: int | None, as_json: bool, store_path: str | None,
          run_spec: str | None, protocol_file: str | None, deployment: Deployment, placement: Placement,
          threads: int | None, access: ModelAccess) -> None:
    """Trace QUESTION_ID with MODEL: its default output beside its output under --route/--silence (both
    greedy under the protocol), the first token where they differ, the top-5 next tokens under each there
    with the rank and probability of the gold token (the gold answer's first token the default output
    lacks), each output's tokens by probability,
    and the logit lens: the residual stream after each route position, read through the model's final
    norm and unembedding (a repeated layer twice, a skipped one absent).

    \b
      reachtui trace demo demo-0026 --silence 4
      reachtui trace demo demo-0026 --route 0-3,3,5-7 --position 20 --json
      reachtui trace --store store/reachtui.sqlite --run 1 demo-0026 --silence 4
    """
    from reachtui.commands.preflight import load_placed, loadable, protocol_of, read_fewshot, stop_strings
    from reachtui.model.load import with_revision
    from reachtui.routes import check_syntax

    stored = run_spec is not None or store_path is not None
    if not args or len(args) > 2 or (len(args) == 1 and not stored):
        raise ReachError("give MODEL and QUESTION_ID (or QUESTION_ID alone with --store/--run: the run's model)")
    qid = args[-1]
    if position is not None and position < 0:
        raise ReachError(f"--position must be 0 or more, not {position}")
    if route_spec is not None:       # syntax before anything loads; ranges once the model is known
        check_syntax(route_spec, "route")
    if silence is not None and silence.strip().lower() not in ("", "none"):
        check_syntax(silence, "silenced layers")
    if stored:
        stop_strings(deployment)      # each flag's value first (as every command checks them), then the mix
        if deployment.fewshot_file is not None:
            read_fewshot(deployment.fewshot_file)
        given = [flag for flag, value in (("--task", task_spec), ("--protocol", protocol_file))
                 if value is not None] + deployment.given()
        if given:
            raise ReachError(f"{given[0]} cannot be combined with --store/--run: a stored run is traced under its "
                             f"own protocol and questions")
        model, protocol, question = _stored(store_path, run_spec, qid, args[0] if len(args) == 2 else None)
    else:
        model = args[0]
        protocol = protocol_of(ProtocolOptions(file=protocol_file, deployment=deployment))
        question = _question(task_spec or "demo", task_name, task_fields, qid, access.allow_download)
    model = with_revision(model, access.revision)
    set_threads(threads)
    loadable(model, protocol.max_new_tokens, access)

    from reachtui.engine.trace import trace_json, trace_question
    from reachtui.intervention import Intervention
    from reachtui.model.run import Runner

    loaded = load_placed(model, placement, access)
    runner = Runner(loaded)
    intervention = Intervention.parse(route_spec, silence, runner.num_layers)
    traced = trace_question(runner, protocol, question, intervention, position=position)
    if as_json:
        click.echo(json.dumps(dict(model=loaded.name, **trace_json(traced)), ensure_ascii=False))
        return
    from reachtui.tables.formats import shown

    text = "\n".join(render(traced, model=loaded.name))
    click.echo(shown(text) if sys.stdout.isatty() else text)


def _stored(store_path: str | None, run_spec: str | None, qid: str, model: str | None):
    """(model, protocol, question) of question `qid` of a stored run (the run's model unless `model`)."""
    from reachtui.commands.export import open_store
    from reachtui.model_names import stored_model

    with open_store(store_path) as store:
        run_id = store.resolve_run(run_spec)
        row = store.get_run(run_id)
        protocol = store.run_protocol(row)
        found = store.run_question(run_id, qid)
        if found is None:
            ids = [q["qid"] for q in store.run_questions(run_id)]
            raise ReachError(f"no question {qid!r} in run {run_id} ({_ids(ids)})")
    _, text, gold = found
    return model or stored_model(row["model"], row.get("model_path")), protocol, dict(qid=qid, question=text, gold=gold)


def _question(task_spec: str, task_name: str | None, task_fields: Fields, qid: str, allow_download: bool) -> dict:
    """Question `qid` of a task."""
    from reachtui.tasks import load_task

    task = load_task(task_spec, task_name, task_fields, allow_download=allow_download)
    for q in task.questions:
        if q.id == qid:
            return dict(qid=q.id, question=q.question, gold=q.answer)
    raise ReachError(f"no question {qid!r} in task {task.name} ({_ids([q.id for q in task.questions])})")


def _ids(ids: list[str]) -> str:
    if not ids:
        return "it has no questions"
    return f"{len(ids)} questions, ids {ids[0]} … {ids[-1]}" if len(ids) > 1 else f"its one question is {ids[0]}"


# ---- the trace as text ---------------------------------------------------------------------------------


def _q(text: str) -> str:
    """A token for people: quoted, control characters as marks."""
    from reachtui.engine.trace import visible

    return f"'{visible(text)}'"


def _p(p: float | None) -> str:
    if p is None:
        return "–"
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def token_lines(pieces, logprobs, indent: int, width: int = WIDTH) -> list[str]:
    """An output's tokens, and under them a bar per token whose glyph says its probability (`CONFIDENCE`),
    wrapped at `width` columns on token boundaries (later lines indented by `indent`)."""
    from reachtui.engine.trace import token_rows

    lines = []
    for i, row in enumerate(token_rows(pieces, logprobs, width)):
        lines.append((" " * indent if i else "") + "".join(text for text, _, _ in row))
        lines.append(" " * indent + "".join(bar for _, bar, _ in row))
    return lines


def gold_line(t) -> str:
    """Which gold token the trace follows, and where (`engine.trace.gold_token`)."""
    if t.gold_token is None:
        return "gold token: none (the gold adds no token to the default output)"
    if t.gold_index is None:
        which = "the stop after the gold"
    else:
        nth = "first" if t.gold_index == 0 else {1: "2nd", 2: "3rd"}.get(t.gold_index, f"{t.gold_index + 1}th")
        which = f"the gold's {nth} token"
    where = "" if t.gold_position is None else f", at token {t.gold_position}"
    lead = "where the default output's answer begins" if t.default.correct else "where the default output leaves it"
    return f"gold token {_q(t.gold_token.text)}: {which}, {lead}{where}"


def render(t, *, model: str) -> list[str]:
    """The trace as `reachtui trace` prints it (`t`: an `engine.trace.Trace`)."""
    from reachtui.engine.trace import legend

    lines = [f"{t.qid} · gold {t.gold} · {model} · greedy under the protocol"]
    for o in t.outputs:
        mark = "✓" if o.correct else "✗"
        head = f"{o.name:<8} {mark} {o.answer if o.answer is not None else '∅':<6} "
        body = token_lines(o.pieces, o.logprobs, len(head))
        lines.append(head + body[0])
        lines += body[1:]
        lines.append(f"{'':<9}route {o.route}" + (f" · silence MLP {o.silenced}" if o.silenced else ""))
    lines.append(legend())
    if t.edited is None:
        lines.append("no intervention: give --route or --silence to compare (the default output alone)")
    elif t.divergence is None:
        lines.append("the outputs are the same token for token")
    else:
        lines.append(f"divergence at token {t.divergence}: " + ", ".join(
            f"{o.name} {_q(o.pieces[t.divergence])}" if t.divergence < len(o.tokens) else f"{o.name} ended"
            for o in t.outputs))
    lines.append(gold_line(t))
    lines += ["", f"at token {t.position}"]
    width = 22
    lines.append("  " + f"{'':<12}" + "".join(f"{a.output:<{width}}" for a in t.at))
    lines.append("  " + f"{'chosen':<12}" + "".join(f"{_q(a.chosen.text) + ' ' + _p(a.chosen.prob):<{width}}"
                                                       for a in t.at))
    for i in range(t.k):
        cellsz = [f"{_q(a.top[i].text)} {_p(a.top[i].prob)}" if i < len(a.top) else "" for a in t.at]
        lines.append("  " + f"{'top ' + str(i + 1):<12}" + "".join(f"{c:<{width}}" for c in cellsz))
    if t.gold_token is not None:
        lines.append("  " + f"{'gold ' + _q(t.gold_token.text):<12}" + "".join(
            f"{f'rank {a.gold_rank} ({_p(a.gold_prob)})':<{width}}" for a in t.at))
    for a in t.at:
        o = t.default if a.output == "default" else t.edited
        lines += [""]
        if a.lens is None:
            lines.append(f"logit lens ({a.output}): {t.lens_problem}")
            continue
        lines.append(f"logit lens at token {t.position}, {a.output} (route {o.route}"
                     + (f", silence MLP {o.silenced}" if o.silenced else "") + "): rank (probability) after each "
                     "route position")
        heads = [f"{_q(w.text)} {w.label}" for w in t.watched]
        col = max([18] + [len(h) + 2 for h in heads])
        lines.append(f"  {'pos':>3}  {'layer':>5}  {'top':<8}" + "".join(f"{h:<{col}}" for h in heads))
        for r, top in zip(a.lens, a.lens_tops):
            cells_ = [f"{rank:>5} ({_p(p)})" + (" ←" if rank <= t.k else "") for rank, p in zip(r.ranks, r.probs)]
            lines.append(f"  {r.position:>3}  {r.layer:>5}  {_q(top):<8}" + "".join(f"{c:<{col}}" for c in cells_))
    lines.append("")
    lines.append(f"(← : in the top-{t.k} there)")
    return [line.rstrip() for line in lines]
