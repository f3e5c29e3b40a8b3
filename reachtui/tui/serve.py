"""The app in a browser: textual-serve runs `reachtui open ...` for every browser tab and carries its
terminal over a websocket."""

from __future__ import annotations

import ipaddress
import socket


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) is this machine's loopback only."""
    try:
        return all(ipaddress.ip_address(info[4][0]).is_loopback
                   for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP))
    except (OSError, ValueError):
        return False


def serve(command: str, *, host: str, port: int) -> None:
    """Serve `command` (a shell command that starts the app) at http://host:port until interrupted."""
    from textual_serve.server import Server

    Server(command, host=host, port=port, title="reachtui").serve()
