"""A headless Chromium driven over the DevTools protocol through a pipe.

Used to check that a report page renders offline and to take its screenshot:
Chromium (Debian's ``chromium``) starts with ``--remote-debugging-pipe``, so
no port is opened and nothing but the standard library is needed. Messages
are JSON, each ended by a NUL byte, on file descriptors 3 (to Chromium) and
4 (from it).

    with HeadlessBrowser() as b:
        b.open(Path("results/report-.../index.html"))
        b.evaluate("document.images.length")
        png = b.screenshot(width=1100, height=900)
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["BrowserError", "HeadlessBrowser", "find_chromium"]

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")


class BrowserError(RuntimeError):
    """Chromium is missing, failed, or a DevTools command failed."""


def find_chromium() -> str | None:
    """The Chromium executable ($CHROMIUM overrides), None if there is none."""
    env = os.environ.get("CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else None
    for name in _CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class HeadlessBrowser:
    """One headless Chromium with one page; every request the page makes is
    recorded in ``requests`` (URLs), so a test can check it stayed offline."""

    def __init__(self, executable: str | None = None, *, width: int = 1200,
                 height: int = 900, timeout_s: float = 60.0) -> None:
        exe = executable or find_chromium()
        if exe is None:
            raise BrowserError("no Chromium found (apt-get install chromium, or set $CHROMIUM)")
        self.timeout_s = timeout_s
        self.requests: list[str] = []
        self.console_errors: list[str] = []
        self._next_id = 0
        self._buf = b""
        self._events: list[dict[str, Any]] = []
        self._profile = tempfile.TemporaryDirectory(prefix="p4tb-chromium-")
        to_r, to_w = os.pipe()      # we write commands, Chromium reads fd 3
        from_r, from_w = os.pipe()  # Chromium writes fd 4, we read
        try:
            self._proc = subprocess.Popen(
                [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
                 "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}",
                 f"--window-size={width},{height}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                pass_fds=(3, 4), preexec_fn=lambda: _dup_pipes(to_r, from_w))
        except OSError as e:
            for fd in (to_r, to_w, from_r, from_w):
                os.close(fd)
            self._profile.cleanup()
            raise BrowserError(f"cannot start {exe}: {e}") from e
        os.close(to_r)
        os.close(from_w)
        self._w, self._r = to_w, from_r
        self._session = ""
        try:
            target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            self._session = self.send("Target.attachToTarget",
                                      {"targetId": target, "flatten": True})["sessionId"]
            self.send("Page.enable")
            self.send("Network.enable")
            self.send("Runtime.enable")
            self.send("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        except BaseException:
            self.close()
            raise

    # -- protocol

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one command and wait for its result (events seen meanwhile are kept)."""
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self._session and not method.startswith(("Target.", "Browser.")):
            msg["sessionId"] = self._session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        while True:
            m = self._read()
            if m.get("id") == self._next_id:
                if "error" in m:
                    raise BrowserError(f"{method}: {m['error'].get('message', m['error'])}")
                return dict(m.get("result") or {})
            self._note(m)

    def _note(self, m: dict[str, Any]) -> None:
        method = m.get("method", "")
        params = m.get("params") or {}
        if method == "Network.requestWillBeSent":
            self.requests.append(params.get("request", {}).get("url", ""))
        elif method == "Runtime.exceptionThrown":
            self.console_errors.append(str(params.get("exceptionDetails", {}).get("text")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.console_errors.append(" ".join(str(a.get("value")) for a in params.get("args", [])))
        self._events.append(m)

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"Chromium did not answer within {self.timeout_s:.0f} s")
            ready, _, _ = select.select([self._r], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                err = self._proc.stderr.read().decode(errors="replace")[-800:] \
                    if self._proc.stderr else ""
                raise BrowserError(f"Chromium exited (status {self._proc.poll()}): {err}")
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return dict(json.loads(raw))

    def wait_event(self, method: str) -> dict[str, Any]:
        """The first event ``method`` (already seen or coming)."""
        for i, m in enumerate(self._events):
            if m.get("method") == method:
                del self._events[i]
                return dict(m.get("params") or {})
        while True:
            m = self._read()
            if m.get("method") == method:
                self._note(m)
                self._events.remove(m)
                return dict(m.get("params") or {})
            self._note(m)

    # -- page

    def open(self, page: Path) -> None:
        """Load a local file and wait for its load event (images included)."""
        self._events.clear()
        res = self.send("Page.navigate", {"url": Path(page).resolve().as_uri()})
        if res.get("errorText"):
            raise BrowserError(f"{page}: {res['errorText']}")
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (returned by value)."""
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True})
        if "exceptionDetails" in res:
            raise BrowserError(f"evaluate: {res['exceptionDetails'].get('text')}: "
                               f"{res.get('result', {}).get('description', '')}")
        return res.get("result", {}).get("value")

    def screenshot(self, *, width: int | None = None, height: int | None = None) -> bytes:
        """A PNG of the page's top ``width`` x ``height`` CSS pixels (default: the viewport)."""
        params: dict[str, Any] = {"format": "png"}
        if width and height:
            params["clip"] = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", params)["data"])

    # -- lifetime

    def close(self) -> None:
        if getattr(self, "_proc", None) is None:
            return
        try:
            if self._proc.poll() is None:
                try:
                    os.write(self._w, json.dumps({"id": 0, "method": "Browser.close"}).encode()
                             + b"\0")
                except OSError:
                    pass
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
        finally:
            for fd in (self._w, self._r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            if self._proc.stderr:
                self._proc.stderr.close()
            self._proc = None  # type: ignore[assignment]
            self._profile.cleanup()

    def __enter__(self) -> HeadlessBrowser:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _dup_pipes(read_fd: int, write_fd: int) -> None:
    """In the child: the command pipe on fd 3, the reply pipe on fd 4 (moved
    above 9 first, so neither overwrites the other)."""
    r = fcntl.fcntl(read_fd, fcntl.F_DUPFD, 10)
    w = fcntl.fcntl(write_fd, fcntl.F_DUPFD, 10)
    os.dup2(r, 3)
    os.dup2(w, 4)
