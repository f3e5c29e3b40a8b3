"""What audit, open and generate do with `--server` (the options are declared in `options.server_options`):
check the options, fit the protocol to what a server can run, connect, and say what a run records of
where it ran. The runner itself is `reachtui.serving`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from reachtui.commands.options import at_least_one
from reachtui.errors import ReachError

#: --concurrency and --request-timeout when not given: enough requests to keep a GPU server's batch full
#: without queueing so many that they wait out their timeout.
DEFAULT_CONCURRENCY = 64
DEFAULT_TIMEOUT = 600.0
_SERVER_ONLY = ("server_model", "api_key_env", "concurrency", "request_timeout")
#: Options that place a model in this process (value when not given): the server places its own.
_PLACEMENT = (("device", "auto"), ("dtype", "auto"), ("device_map", None), ("offload_folder", None),
              ("ray_address", None), ("workers", None), ("threads", None))


def server_of(options: Mapping[str, Any]):
    """The `--server` options as `reachtui.serving.ServerOptions` (None without --server), checked: the
    other server options need --server; options that place the model here are refused with it."""
    url = options["server_url"]
    if url is None:
        for name in _SERVER_ONLY:
            if options.get(name) is not None:
                raise ReachError(f"--{name.replace('_', '-')} needs --server")
        return None
    for name, unset in _PLACEMENT:
        if name in options and options[name] != unset:
            flag = "--ray" if name == "ray_address" else f"--{name.replace('_', '-')}"
            raise ReachError(f"{flag} with --server: the server runs the model where it was started (e.g. vllm "
                             f"serve --tensor-parallel-size N); start it with the devices it should use")
    at_least_one(concurrency=options["concurrency"])
    timeout = options["request_timeout"]
    if timeout is not None and not 0 < timeout <= 86_400:
        raise ReachError(f"--request-timeout must be more than 0 and at most 86400 seconds, not {timeout}")
    from reachtui.serving import ServerOptions
    from reachtui.serving.client import base_url

    base_url(url)
    return ServerOptions(url, options["server_model"], options["api_key_env"],
                         options["concurrency"] or DEFAULT_CONCURRENCY, timeout or DEFAULT_TIMEOUT)


def served_protocol(protocol, options: Mapping[str, Any], mlp_scan: str | None, *, scan_asked: bool):
    """The protocol a server can run: realized and the probes that need no layers. Probes given by the
    protocol's defaults (no --probes, no --protocol) that need the layers are left out; asked for, they are
    refused, as is an MLP scan asked for (`scan_asked`; open's default scan is dropped)."""
    from reachtui.probes import registry
    from reachtui.serving import layers_refused

    routed = [p.name for p in protocol.probes if registry.get(p.name).routed]
    if routed and (options["probes"] is not None or options["protocol_file"] is not None):
        raise layers_refused(f"the {', '.join(routed)} probe{'s' if len(routed) > 1 else ''}")
    if mlp_scan is not None and scan_asked:
        raise layers_refused("--mlp-scan")
    return replace(protocol, probes=tuple(p for p in protocol.probes if not registry.get(p.name).routed))


def connect(model: str, server, options: Mapping[str, Any], console=None):
    """The `ServerRunner` for MODEL on `server` (a status line on `console` meanwhile)."""
    from contextlib import nullcontext

    from reachtui.serving import connect as connect_server
    from reachtui.serving.client import shown

    with console.status(f"connecting to {shown(server.url)} ...") if console is not None else nullcontext():
        return connect_server(model, server, trust_remote_code=options["trust_remote_code"],
                              allow_download=options["allow_download"])

