"""Debian's headless chromium driven over the DevTools protocol (CDP) with a small websocket client.

Started as the machine notes say (--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
--disable-background-networking --disable-component-update --disable-sync, a new empty user-data-dir)
with ``--remote-debugging-port=0``; the port is read from the profile's ``DevToolsActivePort``. A page
records its console calls, uncaught exceptions and every URL it requests, so a test can assert that
nothing ran that should not have and nothing left the machine. ``make test`` installs chromium when it
is missing and the run is root (``apt-get install chromium``); elsewhere these tests skip.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
]


class Page:
    """One tab: evaluate JavaScript, wait for a condition, take a screenshot; events are kept."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.console: list[str] = []
        self.exceptions: list[str] = []
        self.requests: list[str] = []
        for method in ("Runtime.enable", "Network.enable", "Page.enable"):
            self.send(method)

    def _event(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled":
            args = [str(a.get("value", a.get("description", ""))) for a in params.get("args", [])]
            self.console.append(f"{params.get('type')}: {' '.join(args)}")
        elif method == "Runtime.exceptionThrown":
            self.exceptions.append(json.dumps(params.get("exceptionDetails", {}))[:2000])
        elif method == "Network.requestWillBeSent":
            self.requests.append(params.get("request", {}).get("url", ""))

    def send(self, method: str, timeout_s: float = 30, **params: Any) -> dict[str, Any]:
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        deadline = time.monotonic() + timeout_s
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.01, deadline - time.monotonic())))
            if msg.get("id") == n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})  # type: ignore[no-any-return]
            self._event(msg)

    def pump(self) -> None:
        """Take in the events that arrived (console, requests) without sending anything."""
        with contextlib.suppress(TimeoutError):
            while True:
                self._event(json.loads(self.ws.recv(timeout=0.01)))

    def eval(self, expression: str) -> Any:
        res = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression[:80]}: {res['exceptionDetails']}")
        return res.get("result", {}).get("value")

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", 20)

    def wait_for(self, expression: str, timeout_s: float, step_s: float = 0.2) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.eval(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"not true within {timeout_s} s: {expression}")
            time.sleep(step_s)

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))


@contextlib.contextmanager
def browser(tmp: Path, width: int = 1280, height: int = 900) -> Iterator[Page]:
    """A fresh chromium with a blank tab of ``width`` x ``height``."""
    assert CHROMIUM is not None, "chromium is not installed"
    profile = tmp / "chromium-profile"
    profile.mkdir()
    proc = subprocess.Popen(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            tabs = json.loads(resp.read())
        tab = next(t for t in tabs if t.get("type") == "page")
        from websockets.sync.client import connect

        with connect(tab["webSocketDebuggerUrl"], max_size=64 << 20, open_timeout=10) as ws:
            page = Page(ws)
            page.send(
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            yield page
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
