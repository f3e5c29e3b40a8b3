"""Click options that several commands share, each declared once, and the checks of single values.

Each group of options reaches the command as one typed value (`reachtui.settings`), built by name from the
option values: `placement_options` (where the model runs: `placement: Placement`), `model_access_options`
(what may be loaded, and which revision: `access: ModelAccess`), `deployment_options` (the protocol's
deployment fields as flags: `deployment: Deployment`), `protocol_options` (the protocol and its flags:
`protocol_options: ProtocolOptions`, with --limit and --skip-long beside it), `server_options` (--server: a
serving engine generates; `server_flags: ServerFlags`) and `task_option` (--task and its field mapping:
`task_fields: tasks.Fields`). They serve audit, open (and serve, which takes open's), generate and trace;
the `--mlp-scan` forms and the single options below serve audit and open. The checks here (`at_least_one`,
`set_threads`, `refuse_options`) take one value each; what turns the groups into a protocol, a task or a
server is `reachtui.commands.preflight` and `reachtui.commands.serving`. Help that names probes, presets or
answer formats is written when help is shown, so `reachtui --help` imports nothing beyond click.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from reachtui.commands import numbers
from reachtui.errors import ReachError
from reachtui.settings import Deployment, ModelAccess, Placement, ProtocolOptions, ServerFlags


def _stack(*options):
    """One decorator applying `options` in the order given (the order --help lists them in)."""

    def apply(command):
        for option in reversed(options):
            command = option(command)
        return command

    return apply


class _LateHelp(click.Option):
    """An option whose help text is made when help is shown (`late_help()`), not at import."""

    def __init__(self, *args, late_help: Callable[[], str], **kwargs):
        super().__init__(*args, **kwargs)
        self.late_help = late_help

    def get_help_record(self, ctx):
        if self.help is None:
            self.help = self.late_help()
        return super().get_help_record(ctx)


def _late(*decls, late_help: Callable[[], str], **kwargs):
    return click.option(*decls, cls=_LateHelp, late_help=late_help, **kwargs)


# -- where the model runs (audit, open, generate) ----------------------------------------------------

def _with_placement(command):
    """`command` taking `placement: Placement` for --device, --dtype, --device-map and --offload-folder."""

    @functools.wraps(command)
    def call(*, device: str, dtype: str, device_map: str | None, offload_folder: str | None, **rest: Any):
        return command(placement=Placement(device=device, dtype=dtype, device_map=device_map,
                                           offload_folder=offload_folder), **rest)

    return call


def _with_access(command):
    """`command` taking `access: ModelAccess` for --revision, --trust-remote-code and the --allow-* flags."""

    @functools.wraps(command)
    def call(*, revision: str | None, trust_remote_code: bool, allow_download: bool, allow_pickle: bool,
             allow_missing_weights: bool, **rest: Any):
        return command(access=ModelAccess(revision=revision, trust_remote_code=trust_remote_code,
                                          allow_download=allow_download, allow_pickle=allow_pickle,
                                          allow_missing_weights=allow_missing_weights), **rest)

    return call


def _name_given(instead: str):
    """The callback of an option naming a file or folder: an empty name would read as "not given" (a default
    taken silently), a name no file system holds as an OSError deep down; both are one line here, before any
    command looks at it. `instead`: what to do in place of the empty name."""

    def check(ctx, param, value: str | None) -> str | None:
        from reachtui.inputs import short_name, too_long

        flag = param.opts[0]
        if value is not None and not value.strip():
            raise ReachError(f"{flag} '{value}': the name is empty ({instead})")
        if value is not None and (long := too_long(value)) is not None:
            raise ReachError(f"{flag} {short_name(value)}: {long}")
        return value

    return check


#: --device, --dtype, --device-map, --offload-folder: `placement: Placement`.
placement_options = _stack(
    click.option("--device", default="auto", show_default=True, help="auto|cpu|cuda[:N]"),
    click.option("--dtype", default="auto", show_default=True, help="auto|float32|bfloat16|float16"),
    click.option("--device-map", "device_map", default=None, metavar="MAP",
                 help="Let accelerate place the model (auto|balanced|sequential, or a JSON file of module -> "
                      "device): split over GPUs, offload what does not fit. Needs reachtui[gpu]. Not with "
                      "--device."),
    click.option("--offload-folder", "offload_folder", type=click.Path(file_okay=False), default=None,
                 callback=_name_given("give a folder, or leave --offload-folder out"),
                 help="Where a device map offloads weights to disk."),
    _with_placement,
)

#: --revision, --trust-remote-code, --allow-download, --allow-pickle, --allow-missing-weights:
#: `access: ModelAccess`.
model_access_options = _stack(
    click.option("--revision", default=None, metavar="REV",
                 help="A branch, tag or commit of a Hugging Face id (from the local cache unless --allow-download); "
                      "the run calls the model ID@REV."),
    click.option("--trust-remote-code", is_flag=True, help="Allow the model's own code (off by default)."),
    click.option("--allow-download", is_flag=True, help="Fetch the model (and an hf: task) from the Hugging Face hub if not cached."),
    click.option("--allow-pickle", is_flag=True,
                 help="Load a model whose weights are only pickles (pytorch_model.bin), which can run code when "
                      "loaded. Off by default: safetensors only."),
    click.option("--allow-missing-weights", is_flag=True,
                 help="Load a model whose checkpoint lacks weights its config asks for (they are random), holds "
                      "weights it has no place for or of another shape; apply an adapter whose file lacks weights "
                      "its config describes or holds others. Off by default: refused; the load report is kept "
                      "with the run."),
    _with_access,
)


# -- the audit's protocol and run (audit, open) ------------------------------------------------------


def _probes_help() -> str:
    from reachtui.probes import registry
    from reachtui.protocol import Protocol

    return (f"Comma list of probes: {registry.REALIZED.name} (always runs), {', '.join(registry.names())}. "
            f"[default: the protocol's, {','.join(p.name for p in Protocol().probes)}]")


def _presets_help() -> str:
    from reachtui.presets import preset_names

    return (f"A TOML protocol file, or a preset: {', '.join(preset_names())} (`reachtui protocol --presets`); the "
            f"flags override its fields.")


#: --protocol FILE.toml|PRESET: the one declaration (audit, open, generate).
protocol_file_option = _late("--protocol", "protocol_file", default=None, metavar="FILE|PRESET",
                             late_help=_presets_help)


def _formats_help() -> str:
    from reachtui.grading import FORMATS

    return f"How the answer is read and graded: {'|'.join(FORMATS)} [default: the protocol's, number]."


def _with_deployment(command):
    """`command` taking `deployment: Deployment` for the deployment flags."""

    @functools.wraps(command)
    def call(*, chat: bool | None, system: str | None, template: str | None, answer_format: str | None,
             stops: tuple[str, ...], fewshot_file: str | None, **rest: Any):
        return command(deployment=Deployment(chat=chat, system=system, template=template, answer_format=answer_format,
                                             stops=stops, fewshot_file=fewshot_file), **rest)

    return call


#: The protocol's deployment fields as flags (audit, open, serve, generate, trace), applied by
#: `preflight.protocol_of` on top of the protocol file or preset: --chat/--no-chat, --system, --template,
#: --answer-format, --stop, --fewshot: `deployment: Deployment`.
deployment_options = _stack(
    click.option("--chat/--no-chat", "chat", default=None,
                 help="Render prompts with the tokenizer's chat template [default: the protocol's, no]."),
    click.option("--system", default=None, metavar="TEXT", help="A system prompt (chat), or the text that opens "
                                                                  "the prompt (plain)."),
    click.option("--template", default=None, metavar="TEXT",
                 help="The prompt, with {question} where the question goes, taken as given (backslashes stay: "
                      "LaTeX is safe; a newline is a newline, e.g. $'...' in bash) [default: the protocol's, "
                      "'Question: {question}\\nAnswer:']."),
    _late("--answer-format", "answer_format", default=None, metavar="FORMAT", late_help=_formats_help),
    click.option("--stop", "stops", multiple=True, metavar="STR",
                 help="Stop at this string (cut from the text); repeatable, replaces the protocol's. \\n is a "
                      "newline. [default: the protocol's, a newline]"),
    click.option("--fewshot", "fewshot_file", default=None, metavar="FILE.jsonl",
                 help="Worked examples before each question: JSON lines with question and answer (e.g. GSM8K "
                      "rows, whose answer is the worked solution)."),
    _with_deployment,
)


def _with_protocol(command):
    """`command` taking `protocol_options: ProtocolOptions` for --protocol, --probes, --budget, --temperature,
    --seed, --max-new-tokens and `deployment` (`_with_deployment` runs first)."""

    @functools.wraps(command)
    def call(*, protocol_file: str | None, probes: str | None, budget: int | None, temperature: float | None,
             seed: int | None, max_new_tokens: int | None, deployment: Deployment, **rest: Any):
        return command(protocol_options=ProtocolOptions(file=protocol_file, probes=probes, budget=budget,
                                                        temperature=temperature, seed=seed,
                                                        max_new_tokens=max_new_tokens, deployment=deployment),
                       **rest)

    return call

#: --probes, --budget/-k, --temperature, --seed, --max-new-tokens, --protocol, the deployment flags
#: (`protocol_options: ProtocolOptions`), --limit, --skip-long.
protocol_options = _stack(
    _late("--probes", default=None, late_help=_probes_help),
    click.option("--budget", "-k", type=numbers.INT, default=None, help="K: attempts per question for every probe."),
    click.option("--temperature", type=numbers.FLOAT, default=None, help="Temperature of the sample probe."),
    click.option("--seed", type=numbers.INT, default=None, help="The protocol's seed."),
    click.option("--max-new-tokens", type=numbers.INT, default=None, help="Generation length limit (protocol)."),
    protocol_file_option,
    deployment_options,
    click.option("--limit", type=numbers.INT, default=None, help="Audit only the first N questions."),
    click.option("--skip-long", "skip_long", is_flag=True,
                 help="Leave out the questions whose prompt plus --max-new-tokens does not fit the model's "
                      "positions (stored with the run; every table says how many) instead of refusing the audit."),
    _with_protocol,
)


def _with_task_fields(command):
    """`command` taking `task_fields: tasks.Fields` for --question-field, --answer-field, --id-field,
    --choices-field and --task-fields. The hidden --task-preset is --task-fields' old name (a "preset" is a
    protocol's now: `--protocol gsm8k-cot`)."""

    @functools.wraps(command)
    def call(*, question_field: str | None, answer_field: str | None, id_field: str | None,
             choices_field: str | None, field_map: str | None, task_preset: str | None, **rest: Any):
        from reachtui.tasks import Fields

        if task_preset is not None:
            if field_map is not None:
                raise ReachError("--task-preset is the old name of --task-fields: give one of them")
            click.echo("note: --task-preset is now called --task-fields", err=True)
            field_map = task_preset
        return command(task_fields=Fields(question=question_field, answer=answer_field, id=id_field,
                                          choices=choices_field, field_map=field_map), **rest)

    return call


def task_option(*, default: str | None = None, note: str = "", required: bool | None = None,
                help: str | None = None):
    """--task (required unless a `default` is given or `required` says; `note` is appended to the help),
    --task-name and the task's field mapping (--question-field, --answer-field, --id-field, --choices-field,
    --task-fields), which reach the command as one `task_fields` argument (`tasks.Fields`)."""
    from reachtui.tasks.sources import KINDS

    return _stack(
        # no `default=None` beside required=True: click 8.5 takes an explicit None as given, not missing
        click.option("--task", "task_spec", metavar="TASK",
                     **({"required": True} if (default is None if required is None else required)
                        else {"default": default, "show_default": default is not None}),
                     help=(help or f"The questions: {KINDS} (GSM8K's `#### N` understood).") + note),
        click.option("--task-name", "task_name", default=None, metavar="NAME",
                     help="What to call the task in the store and the tables [default: the file's stem, "
                          "e.g. test for GSM8K's test.jsonl; the dataset's name]."),
        click.option("--question-field", default=None, metavar="FIELD",
                     help="The task's field holding the question [default: question; MATH: problem]."),
        click.option("--answer-field", default=None, metavar="FIELD",
                     help="The field holding the gold answer [default: answer; ARC: answerKey; MATH: solution, "
                          "its last \\boxed{}]."),
        click.option("--id-field", default=None, metavar="FIELD",
                     help="The field holding the question's id [default: id, else its position]."),
        click.option("--choices-field", default=None, metavar="FIELD",
                     help="The field holding a multiple-choice question's options [default: choices]."),
        click.option("--task-fields", "field_map", default=None, metavar="gsm8k|math|arc|mmlu",
                     help="A built-in field map: the fields of GSM8K, MATH, ARC or MMLU records [default: chosen "
                          "from the first record]. Every other field is the question's metadata (export --where "
                          "\"meta_subject = 'algebra'\")."),
        click.option("--task-preset", "task_preset", default=None, hidden=True),     # --task-fields' old name
        _with_task_fields)


#: --store, the one declaration every command shares (the store itself says what is wrong with a path).
store_option = click.option("--store", "store_path", metavar="PATH", default=None,
                            callback=_name_given("give the audit store's file, or leave --store out for "
                                                 "$REACHTUI_STORE or ./store/reachtui.sqlite"),
                            help="Audit store [default: $REACHTUI_STORE or ./store/reachtui.sqlite].")

batch_size_option = click.option(
    "--batch-size", type=numbers.INT, default=None,
    help="Prompts per generation job. [default: the run's own when resuming, else 64 on a CPU and what the "
         "GPU's free memory holds]")


def new_option(help: str):
    """--new (or --new-run): the commands differ in which matching runs it passes over."""
    return click.option("--new", "--new-run", "new_run", is_flag=True, help=help)


def threads_option(more: str):
    """--threads, with the command's own default (and anything else) said in `more`."""
    return click.option("--threads", type=numbers.INT, default=None,
                        help="CPU threads for the model (sets OMP_NUM_THREADS before torch loads). " + more)


def _default_scan() -> str:
    from reachtui.probes import registry

    return f"{registry.SAMPLE.name} if run, else the first probe"


#: audit's --mlp-scan [PROBE]: no scan unless given; bare, the default probe.
mlp_scan_flag = _late(
    "--mlp-scan", "mlp_scan", is_flag=False, flag_value="", default=None, metavar="[PROBE]",
    late_help=lambda: ("After the probes, silence each MLP block in turn on failure:PROBE and on the realized "
                       f"set. [PROBE default: {_default_scan()}]"))


def _app_scan(ctx, param, value: str) -> str | None:
    return None if value in ("none", "") else "" if value == "auto" else value


#: open's --mlp-scan PROBE|auto|none (default auto), read as pick_mlp_scan's None / "" / PROBE.
mlp_scan_choice = _late(
    "--mlp-scan", "mlp_scan", default="auto", show_default=True, metavar="PROBE|auto|none", callback=_app_scan,
    late_help=lambda: f"MLP scan after the probes, on failure:PROBE (auto: {_default_scan()}).")


# -- a serving engine (audit, open, generate; checked in reachtui.commands.serving) ------------------------

def _with_server(command):
    """`command` taking `server_flags: ServerFlags` for --server and its options."""

    @functools.wraps(command)
    def call(*, server_url: str | None, server_model: str | None, api_key_env: str | None, concurrency: int | None,
             request_timeout: float | None, **rest: Any):
        return command(server_flags=ServerFlags(url=server_url, model=server_model, api_key_env=api_key_env,
                                                concurrency=concurrency, request_timeout=request_timeout), **rest)

    return call


#: --server URL, --server-model NAME, --api-key-env VAR, --concurrency N, --request-timeout SECONDS:
#: `server_flags: ServerFlags`.
server_options = _stack(
    click.option("--server", "server_url", default=None, metavar="URL",
                 help="Generate through an OpenAI-compatible server (vLLM, SGLang, ...) at URL, e.g. "
                      "http://127.0.0.1:8000/v1: realized and sample only. MODEL still gives the tokenizer and "
                      "config (prompts go as token ids); the server holds the weights."),
    click.option("--server-model", "server_model", default=None, metavar="NAME",
                 help="The served model to ask for [default: the one the server's /v1/models lists]."),
    click.option("--api-key-env", "api_key_env", default=None, metavar="VAR",
                 help="The environment variable holding the server's API key (the key itself is never an "
                      "option, and never stored or printed)."),
    click.option("--concurrency", type=numbers.INT, default=None,
                 help="Requests in flight at once with --server [default: 64]."),
    click.option("--request-timeout", "request_timeout", type=numbers.FLOAT, default=None, metavar="SECONDS",
                 help="How long one request to the server may take before it is tried again [default: 600]."),
    _with_server,
)


# -- checks -----------------------------------------------------------------------------------------


#: The most CPU threads one process is given (--threads): beyond it, thread creation is the work.
MAX_THREADS = 1024


def given_options(*names: str) -> list[str]:
    """The options among `names` (parameter names) that the command line (or the environment) set, as the user
    writes them (--where, RUN), in the command's order; none outside a click command."""
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return []
    found = []
    for param in ctx.command.params:
        if param.name in names and ctx.get_parameter_source(param.name) in (
                ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT, ParameterSource.PROMPT):
            long = [o for o in param.opts if o.startswith("--")]
            found.append((long or param.opts or [param.human_readable_name])[0]
                         if isinstance(param, click.Option) else param.human_readable_name.strip("[]."))
    return found


def refuse_options(names: Sequence[str], why: str) -> None:
    """One line when an option that the command would not use is given (`why`: what makes it unused, e.g.
    "to export inspect (...)"): an option accepted and ignored would look as if it had acted."""
    found = given_options(*names)
    if found:
        raise ReachError(f"{', '.join(found)} {'does' if len(found) == 1 else 'do'} not apply {why}")


def at_least_one(**counts: int | None) -> None:
    """One line for a count option under 1 (`batch_size=0` is reported as --batch-size)."""
    for name, value in counts.items():
        if value is not None and value < 1:
            raise ReachError(f"--{name.replace('_', '-')} must be at least 1, not {value}")
        if value is not None and value >= 2**62:       # stored with the run: an SQLite integer
            raise ReachError(f"--{name.replace('_', '-')} {value} is too large")


def default_threads(*, interactive: bool, cores: int | None = None, load: float | None = None) -> int:
    """The torch thread count when neither --threads nor $OMP_NUM_THREADS says: the cores this process may
    use (its CPU affinity) less those already busy (the 1-minute load average, rounded), at least 1; for the
    app at most half the cores, as its UI thread needs one. Why: torch's OpenMP threads spin and wait on
    each other, so asking for more threads than there are free cores collapses (measured on a busy 2-core
    machine: a live run 2.4 s on 2 threads against 0.18 s on 1; tests/bench/bench_threads.py)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    free = cores - int(load + 0.5)
    ceiling = cores // 2 if interactive else cores
    return max(1, min(free, ceiling))


def set_threads(threads: int | None, *, interactive: bool = False) -> None:
    """--threads: the CPU threads torch uses, through OMP_NUM_THREADS/MKL_NUM_THREADS (read when torch
    loads, here or in a worker), and directly when torch is already loaded in this process. With no
    --threads and no $OMP_NUM_THREADS, `default_threads` chooses."""
    if threads is None:
        if "OMP_NUM_THREADS" in os.environ:
            return
        threads = default_threads(interactive=interactive)
    at_least_one(threads=threads)
    if threads > MAX_THREADS:
        raise ReachError(f"--threads {threads}: at most {MAX_THREADS}")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    if "torch" in sys.modules:        # already loaded in this process (a caller's): tell it directly
        sys.modules["torch"].set_num_threads(threads)
