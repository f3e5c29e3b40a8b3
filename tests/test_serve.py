"""`reachtui serve`: the app in a browser. The server answers on 127.0.0.1 only (by default), its websocket
carries the app's screen, and a real headless Chromium (Debian's `chromium`; the test skips without it)
loads the page, receives the app's output over the websocket and takes a screenshot."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tui_store import build_store

aiohttp = pytest.importorskip("aiohttp")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SEEN = "syn-00000"    # the first question of the synthetic run: on the app's first screen


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening_addresses(port: int) -> set[str]:
    """The IPv4 addresses some socket of this machine listens on at `port` (from /proc/net/tcp)."""
    out = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, p = local.split(":")
        if int(p, 16) == port and state == "0A":          # LISTEN
            out.add(socket.inet_ntoa(bytes.fromhex(addr)[::-1]))
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve") / "audit.sqlite"
    build_store(path, n=30, k=4, seed=3)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "reachtui", "serve", "--store", str(path), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.2)
    yield url, port
    proc.terminate()
    proc.wait(10)


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.text()


async def _screen_over_websocket(url: str, want: str, timeout: float = 60) -> str:
    """What the app sends over textual-serve's websocket, until `want` appears in it."""
    got = ""
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url.replace("http", "ws") + "/ws?width=120&height=40") as ws:
            end = time.monotonic() + timeout
            while want not in got and time.monotonic() < end:
                msg = await ws.receive(timeout=end - time.monotonic())
                if msg.type == aiohttp.WSMsgType.BINARY:
                    got += msg.data.decode("utf-8", "replace")
                elif msg.type == aiohttp.WSMsgType.TEXT:
                    got += msg.data
                else:
                    break
    return got


def test_the_server_answers_on_loopback_and_its_websocket_carries_the_app(server):
    url, port = server
    status, page = asyncio.run(_get(url))
    assert status == 200 and "reachtui" in page
    assert listening_addresses(port) == {"127.0.0.1"}
    assert SEEN in asyncio.run(_screen_over_websocket(url, SEEN))


def test_a_non_loopback_host_is_warned_about(tmp_path):
    out = subprocess.run([sys.executable, "-m", "reachtui", "serve", "--host", "0.0.0.0", "--store",
                          str(tmp_path / "none.sqlite")], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip().startswith("error: no audit store")  # checked first


async def _chromium_session(url: str, shot: Path, want: str) -> dict:
    """Drive headless Chromium over the DevTools protocol: open `url`, count the websocket frames the page
    receives until one holds `want`, then take a screenshot."""
    port = free_port()
    profile = shot.parent / "profile"
    proc = subprocess.Popen([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             "--disable-background-networking", "--disable-component-update", "--disable-sync",
                             "--disable-quic", f"--user-data-dir={profile}", f"--remote-debugging-port={port}",
                             "--window-size=1280,900", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        async with aiohttp.ClientSession() as session:
            targets = None
            for _ in range(100):
                try:
                    async with session.get(f"http://127.0.0.1:{port}/json/list") as resp:
                        targets = [t for t in await resp.json() if t["type"] == "page"]
                    if targets:
                        break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
            assert targets, "chromium did not start"
            async with session.ws_connect(targets[0]["webSocketDebuggerUrl"], max_msg_size=0) as cdp:
                ids = iter(range(1, 10_000))

                async def call(method: str, **params) -> dict:
                    n = next(ids)
                    await cdp.send_json({"id": n, "method": method, "params": params})
                    while True:
                        msg = json.loads((await cdp.receive(timeout=60)).data)
                        if msg.get("id") == n:
                            return msg.get("result", {})
                        events.append(msg)

                events: list[dict] = []
                await call("Network.enable")
                await call("Page.enable")
                await call("Page.navigate", url=url)
                frames, found, end = 0, False, time.monotonic() + 60
                while not found and time.monotonic() < end:
                    while events:
                        ev = events.pop(0)
                        if ev.get("method") == "Network.webSocketFrameReceived":
                            frames += 1
                            r = ev["params"]["response"]
                            data = base64.b64decode(r["payloadData"]) if r["opcode"] == 2 else r["payloadData"].encode()
                            found = found or want in data.decode("utf-8", "replace")
                    if not found:
                        try:
                            events.append(json.loads((await cdp.receive(timeout=2)).data))
                        except asyncio.TimeoutError:
                            pass
                await asyncio.sleep(1.0)      # let the terminal draw what it received
                png = await call("Page.captureScreenshot", format="png")
                shot.write_bytes(base64.b64decode(png["data"]))
                return {"frames": frames, "found": found}
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (Debian: apt-get install chromium)")
def test_a_headless_browser_sees_the_app(server, tmp_path):
    url, _ = server
    shot = tmp_path / "reachtui-in-chromium.png"
    seen = asyncio.run(_chromium_session(url, shot, SEEN))
    assert seen["found"] and seen["frames"] > 1, seen
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000      # a drawn page, not a blank one
