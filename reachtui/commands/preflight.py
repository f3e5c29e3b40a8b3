"""What `audit`, `open` and `serve` (which checks as `open` does) check of an audit's options before a model
loads, the store is written or a UI starts: one line for a bad one, in the same order for all of them.

`placement` refuses a device map that cannot be used; `settings_of` turns the protocol options into the
protocol, the task and the MLP scan's probe; `loadable` refuses a model that cannot load (missing, weights
only as pickles, weights missing, an adapter's base missing, a max-new-tokens over its positions);
`prompts_fit` refuses prompts over the model's positions (or, with --skip-long, names those to leave out),
with the tokenizer alone and only where a prompt may not fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reachtui.commands.options import at_least_one, deployment_of, pick_mlp_scan, protocol_of


@dataclass(frozen=True)
class AuditSettings:
    protocol: Any        # reachtui.protocol.Protocol
    task: Any            # reachtui.tasks.Task
    mlp_scan: str | None  # the probe whose failure set the MLP scan repairs (None: no scan)


def placement(device: str, device_map: str | None, offload_folder: str | None) -> None:
    """--device-map / --offload-folder checked (accelerate's strategies, a JSON file, not with --device)."""
    if device_map is not None or offload_folder is not None:
        from reachtui.model.load import check_device_map

        check_device_map(device_map, device, offload_folder)


def settings_of(options: Mapping[str, Any], *, explicit_scan: bool) -> AuditSettings:
    """From a command's option values by name (audit's and open's options share them): the counts, the
    protocol (its file or preset with the flags and the deployment flags applied), the MLP scan's probe
    (`explicit_scan`: asked for, so a protocol without a probe to scan is refused), the task (with its field
    mapping) and its golds under the answer format."""
    from reachtui.tasks import check_gold, load_task

    o = options
    at_least_one(batch_size=o["batch_size"], limit=o["limit"])
    protocol = protocol_of(o["protocol_file"], probes=o["probes"], budget=o["budget"], temperature=o["temperature"],
                           seed=o["seed"], max_new_tokens=o["max_new_tokens"], deployed=deployment_of(o))
    scan = pick_mlp_scan(o["mlp_scan"], [p.name for p in protocol.probes], explicit=explicit_scan)
    task = load_task(o["task_spec"], o["task_name"], o["task_fields"], allow_download=o["allow_download"])
    check_gold(task, protocol.answer_format, protocol.choices)
    return AuditSettings(protocol, task, scan)


def loadable(model: str, max_new_tokens: int, *, allow_download: bool, allow_pickle: bool,
             allow_missing_weights: bool) -> None:
    """A missing model (an adapter's missing base, a revision not in the cache), weights only as pickles,
    weights its config asks for and lacks, an adapter without peft, a --max-new-tokens over its positions:
    one line now, before it is loaded (audit, open, serve, generate)."""
    from reachtui.model.load import check_loadable, check_positions, config_position_limit

    check_loadable(model, allow_download=allow_download, allow_pickle=allow_pickle,
                   allow_missing_weights=allow_missing_weights)
    check_positions(config_position_limit(model, allow_download=allow_download), max_new_tokens)


def prompts_fit(model: str, protocol, questions: Sequence[tuple[str, str]], *, skip_long: bool = False,
                trust_remote_code: bool = False, allow_download: bool = False, server=None):
    """Every question's prompt against MODEL's position limit, before the model loads (`reachtui.engine.fits`):
    one line naming the over-long ones and the fixes that can work, unless `skip_long` leaves them out (the
    `PromptFit` the audit then stores with its run). The tokenizer is loaded only when a prompt needs it (a
    chat template, a prompt not short enough to fit by its bytes). `questions`: (question id, text) of the
    task's questions the run takes (after --limit): `question_pairs`. `server`: the runner of a --server run,
    whose own limit (vLLM's max_model_len) counts where it says one, and whose tokenizer is MODEL's."""
    from reachtui.engine.fits import prompt_fit
    from reachtui.model.load import config_position_limit, load_tokenizer

    limit = getattr(server, "max_positions", None) or config_position_limit(model, allow_download=allow_download)
    fit = prompt_fit(protocol, list(questions), limit,
                     tokenizer=(lambda: server.tokenizer) if server is not None else
                     lambda: load_tokenizer(model, trust_remote_code=trust_remote_code, allow_download=allow_download))
    fit.check(skip_long)
    return fit


def question_pairs(task, limit: int | None) -> list[tuple[str, str]]:
    """(question id, text) of the task's questions an audit of it takes (the first `limit`)."""
    questions = task.questions[:limit] if limit is not None else task.questions
    return [(str(q.id), q.question) for q in questions]
