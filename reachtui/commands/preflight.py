"""What `audit`, `open` and `serve` (which checks as `open` does), `generate` and `trace` check of their
options before a model loads, the store is written or a UI starts: one line for a bad one, in the same order
for all of them. The options arrive typed (`reachtui.settings`, built by `reachtui.commands.options`).

`placement` refuses a device map that cannot be used; `protocol_of` makes the protocol of `ProtocolOptions`
(its file or preset with the flags on top); `settings_of` adds the task and the MLP scan's probe; `loadable`
refuses a model that cannot load (missing, weights only as pickles, weights missing, an adapter's base
missing, a max-new-tokens over its positions); `prompts_fit` refuses prompts over the model's positions (or,
with --skip-long, names those to leave out), with the tokenizer alone and only where a prompt may not fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from reachtui.commands.options import at_least_one
from reachtui.errors import ReachError
from reachtui.settings import Deployment, ModelAccess, Placement, ProtocolOptions

if TYPE_CHECKING:
    from reachtui.engine.fits import PromptFit
    from reachtui.protocol import Protocol
    from reachtui.tasks import Fields, Task


@dataclass(frozen=True)
class AuditSettings:
    protocol: Protocol
    task: Task
    mlp_scan: str | None  # the probe whose failure set the MLP scan repairs (None: no scan)


def placement(where: Placement) -> None:
    """--device-map / --offload-folder checked (accelerate's strategies, a JSON file, not with --device)."""
    if where.device_map is not None or where.offload_folder is not None:
        from reachtui.model.load import check_device_map

        check_device_map(where.device_map, where.device, where.offload_folder)


def stop_strings(deployment: Deployment) -> tuple[str, ...]:
    """--stop's strings as the protocol takes them, `\\n` made a newline (none given: empty); an empty one is
    refused."""
    if any(not s for s in deployment.stops):
        raise ReachError("--stop '': a stop string must not be empty (it would stop before the first token)")
    return tuple(s.replace("\\n", "\n") for s in deployment.stops)


def read_fewshot(path: str) -> tuple[tuple[str, str], ...]:
    """--fewshot FILE: one JSON object a line with a text `question` and `answer` (other fields ignored)."""
    from reachtui.inputs import FEWSHOT, check_input, short_name
    from reachtui.jsonl import objects

    shown = f"--fewshot {short_name(path)}"
    pairs = []
    for n, row in objects(check_input(path, FEWSHOT, shown), shown, kind=FEWSHOT):
        q, a = row.get("question"), row.get("answer")
        if not (isinstance(q, str) and isinstance(a, str)):
            raise ReachError(f"{shown}: line {n}: needs a text question and answer")
        pairs.append((q, a))
    if not pairs:
        raise ReachError(f"{shown}: no examples in it")
    return tuple(pairs)


def protocol_of(options: ProtocolOptions) -> Protocol:
    """The protocol of `options`: the file's or preset's (or the default one) with the flags applied, the
    deployment flags among them. The one place a command's flags meet the protocol."""
    from reachtui.presets import load_protocol
    from reachtui.protocol import Protocol, protocol_from_options

    deployment = options.deployment
    stop = stop_strings(deployment) or None
    fewshot = read_fewshot(deployment.fewshot_file) if deployment.fewshot_file is not None else None
    base = load_protocol(options.file) if options.file is not None else Protocol()
    protocol = protocol_from_options(base, probes=options.probes, budget=options.budget,
                                     temperature=options.temperature, seed=options.seed,
                                     max_new_tokens=options.max_new_tokens, chat=deployment.chat,
                                     system=deployment.system, template=deployment.template,
                                     answer_format=deployment.answer_format, stop=stop, fewshot=fewshot)
    # where attempts are generated is said by --server (reachtui.commands.serving), never by a protocol file
    return replace(protocol, engine=None) if protocol.engine is not None else protocol


def pick_mlp_scan(choice: str | None, probes: Sequence[str], *, explicit: bool) -> str | None:
    """The probe whose failure set the MLP scan runs on, or None for no scan. `choice`: None (no scan),
    "" (the default: sample if the protocol runs it, else its first probe) or a probe name, which must be
    one of `probes`. With no probe to scan, "" is refused when the scan was asked for (`explicit`), else
    (a default) means no scan."""
    from reachtui.probes import registry

    if choice is None:
        return None
    if choice == "":
        if not probes:
            if explicit:
                raise ReachError("--mlp-scan needs a probe whose failure set it scans (none in this protocol)")
            return None
        return registry.scan_default(probes)
    if choice not in probes:
        raise ReachError(f"--mlp-scan {choice}: that probe is not in this audit (probes: "
                         f"{', '.join(probes) or 'none'})")
    return choice


def settings_of(options: ProtocolOptions, *, task_spec: str, task_name: str | None, task_fields: Fields,
                mlp_scan: str | None, explicit_scan: bool, limit: int | None, batch_size: int | None,
                allow_download: bool) -> AuditSettings:
    """What audit and open make of their options: the counts checked, the protocol (`protocol_of`), the MLP
    scan's probe (`explicit_scan`: asked for, so a protocol without a probe to scan is refused), the task
    (with its field mapping) and its golds under the answer format."""
    from reachtui.tasks import check_gold, load_task

    at_least_one(batch_size=batch_size, limit=limit)
    protocol = protocol_of(options)
    scan = pick_mlp_scan(mlp_scan, [p.name for p in protocol.probes], explicit=explicit_scan)
    task = load_task(task_spec, task_name, task_fields, allow_download=allow_download)
    check_gold(task, protocol.answer_format, protocol.choices)
    return AuditSettings(protocol, task, scan)


def loadable(model: str, max_new_tokens: int, access: ModelAccess) -> None:
    """A missing model (an adapter's missing base, a revision not in the cache), weights only as pickles,
    weights its config asks for and lacks, an adapter without peft, a --max-new-tokens over its positions:
    one line now, before it is loaded (audit, open, serve, generate, trace)."""
    from reachtui.model.load import check_loadable, check_positions, config_position_limit

    check_loadable(model, allow_download=access.allow_download, allow_pickle=access.allow_pickle,
                   allow_missing_weights=access.allow_missing_weights)
    check_positions(config_position_limit(model, allow_download=access.allow_download), max_new_tokens)


def prompts_fit(model: str, protocol: Protocol, questions: Sequence[tuple[str, str]], access: ModelAccess, *,
                skip_long: bool = False, server=None) -> PromptFit:
    """Every question's prompt against MODEL's position limit, before the model loads (`reachtui.engine.fits`):
    one line naming the over-long ones and the fixes that can work, unless `skip_long` leaves them out (the
    `PromptFit` the audit then stores with its run). The tokenizer is loaded only when a prompt needs it (a
    chat template, a prompt not short enough to fit by its bytes). `questions`: (question id, text) of the
    task's questions the run takes (after --limit): `question_pairs`. `server`: the runner of a --server run,
    whose own limit (vLLM's max_model_len) counts where it says one, and whose tokenizer is MODEL's."""
    from reachtui.engine.fits import prompt_fit
    from reachtui.model.load import config_position_limit, load_tokenizer

    limit = getattr(server, "max_positions", None) or config_position_limit(model,
                                                                            allow_download=access.allow_download)
    fit = prompt_fit(protocol, list(questions), limit,
                     tokenizer=(lambda: server.tokenizer) if server is not None else
                     lambda: load_tokenizer(model, trust_remote_code=access.trust_remote_code,
                                            allow_download=access.allow_download))
    fit.check(skip_long)
    return fit


def load_placed(model: str, placement: Placement, access: ModelAccess):
    """MODEL loaded (`reachtui.model.load.load_model`) where `placement` says, as `access` allows: what audit,
    generate and trace run once their checks have passed."""
    from reachtui.model.load import load_model

    return load_model(model, device=placement.device, dtype=placement.dtype, device_map=placement.device_map,
                      offload_folder=placement.offload_folder, trust_remote_code=access.trust_remote_code,
                      allow_download=access.allow_download, allow_pickle=access.allow_pickle,
                      allow_missing_weights=access.allow_missing_weights)


def question_pairs(task: Task, limit: int | None) -> list[tuple[str, str]]:
    """(question id, text) of the task's questions an audit of it takes (the first `limit`)."""
    questions = task.questions[:limit] if limit is not None else task.questions
    return [(str(q.id), q.question) for q in questions]
