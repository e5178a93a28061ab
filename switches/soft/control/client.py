"""Client of the switch's control server (see :mod:`.server` for the protocol)."""

from __future__ import annotations

import socket
from typing import BinaryIO

from switches.soft.control.server import ERR_MARKER, OK_MARKER


class SwitchError(Exception):
    """The switch rejected a command; ``str()`` is the switch's own message."""

    def __init__(self, command: str, message: str) -> None:
        super().__init__(message)
        self.command = command
        self.message = message

    def __str__(self) -> str:
        return f"{self.command!r}: {self.message}"


class SwitchConnectionError(ConnectionError):
    """No switch answers on the control port, or it closed the connection."""


class SwitchClient:
    """Sends simple_switch_CLI command lines to one switch.

    One TCP connection is kept open and re-opened once if the switch closed it.
    """

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 30.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._rfile: BinaryIO | None = None

    def _connect(self) -> None:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except OSError as e:
            raise SwitchConnectionError(
                f"cannot reach the switch control server at {self.host}:{self.port}: {e}"
            ) from e
        self._sock = sock
        self._rfile = sock.makefile("rb")

    def execute(self, line: str) -> str:
        """Run one command; returns the reply text, raises :class:`SwitchError`."""
        line = line.strip()
        if "\n" in line:
            raise ValueError("one command per call")
        for attempt in (0, 1):
            if self._sock is None:
                self._connect()
            try:
                return self._roundtrip(line)
            except (ConnectionError, EOFError, BrokenPipeError) as e:
                self.close()
                if attempt:
                    raise SwitchConnectionError(
                        f"switch at {self.host}:{self.port} closed the connection: {e}"
                    ) from e
        raise AssertionError("unreachable")

    def _roundtrip(self, line: str) -> str:
        assert self._sock is not None and self._rfile is not None
        self._sock.sendall(line.encode() + b"\n")
        lines: list[str] = []
        while True:
            raw = self._rfile.readline()
            if not raw:
                raise EOFError("connection closed mid-reply")
            text = raw.decode("utf-8", "replace").rstrip("\n")
            if text == OK_MARKER:
                return "\n".join(lines)
            if text == ERR_MARKER:
                raise SwitchError(line, "\n".join(lines))
            lines.append(text[1:] if text.startswith("..") else text)

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
                self._rfile = None

    def __enter__(self) -> SwitchClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
