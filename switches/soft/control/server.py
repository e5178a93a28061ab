"""The switch's control server: a line protocol on a loopback TCP port.

Request: one command line (simple_switch_CLI syntax), UTF-8, ending in
``\\n``. Reply: the reply text, line by line, then one end marker line:
``.OK`` on success, ``.ERR`` after an error message. A reply line that
starts with ``.`` is sent with one more ``.`` in front (as SMTP does), so
no reply text can be taken for a marker.
"""

from __future__ import annotations

import logging
import socketserver
import threading
from collections.abc import Callable

OK_MARKER = ".OK"
ERR_MARKER = ".ERR"
MAX_LINE = 1 << 20


class CommandFailed(Exception):
    """Raised by an executor for an error reply (the message goes to the client)."""


Executor = Callable[[str], str]


def encode_reply(text: str, ok: bool) -> bytes:
    lines = text.splitlines() if text else []
    out = ["." + ln if ln.startswith(".") else ln for ln in lines]
    out.append(OK_MARKER if ok else ERR_MARKER)
    return ("\n".join(out) + "\n").encode()


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        while not self.server.closing:
            raw = self.rfile.readline(MAX_LINE)
            if not raw:
                return
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                reply, ok = self.server.executor(line), True
            except CommandFailed as e:
                reply, ok = str(e) or "error", False
            except Exception as e:  # a bug must not kill the server
                self.server.log.exception("control command %r failed", line)
                reply, ok = f"internal error: {type(e).__name__}: {e}", False
            try:
                self.wfile.write(encode_reply(reply, ok))
                self.wfile.flush()
            except OSError:
                return


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], executor: Executor, log: logging.Logger) -> None:
        self.executor = executor
        self.log = log
        self.closing = False
        super().__init__(addr, _Handler)


class ControlServer:
    """Serves ``executor`` on ``host:port`` from a background thread.

    ``port=0`` picks a free port (see :attr:`port` after construction).
    """

    def __init__(
        self,
        executor: Executor,
        port: int = 0,
        host: str = "127.0.0.1",
        log: logging.Logger | None = None,
    ) -> None:
        self._server = _Server((host, port), executor, log or logging.getLogger("control"))
        self.host = host
        self.port: int = self._server.server_address[1]
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
            name="control-server", daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        self._server.closing = True
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=2)
        self._server.server_close()
