"""What `audit`, `open` and `serve` (which checks as `open` does) check of an audit's options before a model
loads, the store is written or a UI starts: one line for a bad one, in the same order for all of them.

`placement` refuses a device map that cannot be used; `audit_settings` turns the protocol options into the
protocol, the task and the MLP scan's probe; `loadable` refuses a model that cannot load (missing, weights
only as pickles, weights missing, an adapter's base missing, a max-new-tokens over its positions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reachtui.commands.options import at_least_one, deployment, pick_mlp_scan, protocol_of


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


def audit_settings(*, task_spec: str, task_name: str | None, protocol_file: str | None, probes: str | None,
                   budget: int | None, temperature: float | None, seed: int | None, max_new_tokens: int | None,
                   limit: int | None, batch_size: int | None, mlp_scan: str | None,
                   explicit_scan: bool, deployed: dict | None = None, task_fields=None,
                   allow_download: bool = False) -> AuditSettings:
    """The counts, the protocol (its file or preset with the flags applied, `deployed`: the deployment flags'
    fields, `options.deployment`), the MLP scan's probe (`explicit_scan`: asked for, so a protocol without a
    probe to scan is refused), the task (`task_fields`: its field mapping) and its golds under the answer
    format."""
    from reachtui.tasks import check_gold, load_task

    at_least_one(batch_size=batch_size, limit=limit)
    protocol = protocol_of(protocol_file, probes=probes, budget=budget, temperature=temperature, seed=seed,
                           max_new_tokens=max_new_tokens, deployed=deployed)
    scan = pick_mlp_scan(mlp_scan, [p.name for p in protocol.probes], explicit=explicit_scan)
    task = load_task(task_spec, task_name, task_fields, allow_download=allow_download)
    check_gold(task, protocol.answer_format, protocol.choices)
    return AuditSettings(protocol, task, scan)


def settings_of(options: Mapping[str, Any], *, explicit_scan: bool) -> AuditSettings:
    """`audit_settings` from a command's option values by name (audit's and open's options share them)."""
    o = options
    deployed = deployment(chat=o["chat"], system=o["system"], template=o["template"],
                          answer_format=o["answer_format"], stops=o["stops"], fewshot_file=o["fewshot_file"])
    return audit_settings(task_spec=o["task_spec"], task_name=o["task_name"], protocol_file=o["protocol_file"],
                          probes=o["probes"], budget=o["budget"], temperature=o["temperature"], seed=o["seed"],
                          max_new_tokens=o["max_new_tokens"], limit=o["limit"], batch_size=o["batch_size"],
                          mlp_scan=o["mlp_scan"], explicit_scan=explicit_scan, deployed=deployed,
                          task_fields=o["task_fields"], allow_download=o["allow_download"])


def loadable(model: str, max_new_tokens: int, *, allow_download: bool, allow_pickle: bool,
             allow_missing_weights: bool) -> None:
    """A missing model (an adapter's missing base, a revision not in the cache), weights only as pickles,
    weights its config asks for and lacks, an adapter without peft, a --max-new-tokens over its positions:
    one line now, before it is loaded (audit, open, serve, generate)."""
    from reachtui.model.load import check_loadable, check_positions, config_position_limit

    check_loadable(model, allow_download=allow_download, allow_pickle=allow_pickle,
                   allow_missing_weights=allow_missing_weights)
    check_positions(config_position_limit(model, allow_download=allow_download), max_new_tokens)
