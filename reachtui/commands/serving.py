"""What audit, open and generate do with `--server` (the options are declared in `options.server_options`):
check the options, fit the protocol to what a server can run, connect, and say what a run records of
where it ran. The runner itself is `reachtui.serving`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from reachtui.commands.options import at_least_one
from reachtui.errors import ReachError
from reachtui.settings import ModelAccess, Placement, ProtocolOptions, ServerFlags

if TYPE_CHECKING:
    from reachtui.protocol import Protocol
    from reachtui.serving import ServerOptions, ServerRunner

#: --concurrency and --request-timeout when not given: enough requests to keep a GPU server's batch full
#: without queueing so many that they wait out their timeout.
DEFAULT_CONCURRENCY = 64
DEFAULT_TIMEOUT = 600.0


def server_of(flags: ServerFlags, placement: Placement = Placement(), *, ray_address: str | None = None,
              workers: int | None = None, threads: int | None = None) -> ServerOptions | None:
    """The `--server` options as `reachtui.serving.ServerOptions` (None without --server), checked: the
    other server options need --server; options that place the model here (`placement`, --ray, --workers,
    --threads) are refused with it."""
    if flags.url is None:
        if needless := flags.given():
            raise ReachError(f"{needless[0]} needs --server")
        return None
    placed = placement.given() + [flag for flag, value in (("--ray", ray_address), ("--workers", workers),
                                                           ("--threads", threads)) if value is not None]
    if placed:
        raise ReachError(f"{placed[0]} with --server: the server runs the model where it was started (e.g. vllm "
                         f"serve --tensor-parallel-size N); start it with the devices it should use")
    at_least_one(concurrency=flags.concurrency)
    timeout = flags.request_timeout
    if timeout is not None and not 0 < timeout <= 86_400:
        raise ReachError(f"--request-timeout must be more than 0 and at most 86400 seconds, not {timeout}")
    from reachtui.serving import ServerOptions
    from reachtui.serving.client import base_url

    base_url(flags.url)
    return ServerOptions(flags.url, flags.model, flags.api_key_env, flags.concurrency or DEFAULT_CONCURRENCY,
                         timeout or DEFAULT_TIMEOUT)


def served_protocol(protocol: Protocol, asked: ProtocolOptions, mlp_scan: str | None, *,
                    scan_asked: bool) -> Protocol:
    """The protocol a server can run: realized and the probes that need no layers. Probes given by the
    protocol's defaults (no --probes, no --protocol) that need the layers are left out; asked for, they are
    refused, as is an MLP scan asked for (`scan_asked`; open's default scan is dropped)."""
    from reachtui.probes import registry
    from reachtui.serving import layers_refused

    routed = [p.name for p in protocol.probes if registry.get(p.name).routed]
    if routed and (asked.probes is not None or asked.file is not None):
        raise layers_refused(f"the {', '.join(routed)} probe{'s' if len(routed) > 1 else ''}")
    if mlp_scan is not None and scan_asked:
        raise layers_refused("--mlp-scan")
    return replace(protocol, probes=tuple(p for p in protocol.probes if not registry.get(p.name).routed))


def connect(model: str, server: ServerOptions, access: ModelAccess, console=None) -> ServerRunner:
    """The `ServerRunner` for MODEL on `server` (a status line on `console` meanwhile)."""
    from contextlib import nullcontext

    from reachtui.serving import connect as connect_server
    from reachtui.serving.client import shown

    with console.status(f"connecting to {shown(server.url)} ...") if console is not None else nullcontext():
        return connect_server(model, server, trust_remote_code=access.trust_remote_code,
                              allow_download=access.allow_download)

