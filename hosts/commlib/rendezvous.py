"""Out-of-band exchange of connection data (QPN, PSN, buffer address, rkey)
before any QP is connected: every rank contributes one JSON-able object and
gets everyone's, in rank order.

- `TcpRendezvous`: rank 0 listens on (host, port); the others connect, send
  their object, and receive the full list. Messages are length-prefixed JSON.
- `FileRendezvous`: a directory the agent gives every rank (shared in Mininet,
  where hosts share the file system); rank i writes `<tag>.<i>.json` atomically
  and polls for the others.
- `LocalRendezvous`: for ranks living in one process (threads).

Every rank contributes an object of the same shape (e.g. a Communicator's
`RankInfo`), so `allgather` gives a list of that type.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Protocol, TypeVar

__all__ = ["Rendezvous", "TcpRendezvous", "FileRendezvous", "LocalRendezvous", "RendezvousError"]


_T = TypeVar("_T")


class RendezvousError(RuntimeError):
    pass


class Rendezvous(Protocol):
    def allgather(self, obj: _T, tag: str = "init") -> list[_T]:
        """Everyone's `obj`, indexed by rank (blocking)."""
        ...


def _send_msg(sock: socket.socket, obj: object) -> None:
    """``obj``: anything ``json.dumps`` takes."""
    data = json.dumps(obj).encode()
    sock.sendall(struct.pack("!I", len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        part = sock.recv(n - len(buf))
        if not part:
            raise RendezvousError("rendezvous peer closed the connection")
        buf += part
    return bytes(buf)


def _recv_msg(sock: socket.socket) -> bytes:
    """One message's JSON text."""
    (n,) = struct.unpack("!I", _recv_exact(sock, 4))
    return _recv_exact(sock, n)


class TcpRendezvous:
    """Rank 0 is the server. Each `allgather` is one round over fresh connections."""

    def __init__(self, host: str, port: int, rank: int, size: int, timeout: float = 30.0) -> None:
        if not 0 <= rank < size:
            raise ValueError("rank out of range")
        self.host, self.port, self.rank, self.size, self.timeout = host, port, rank, size, timeout
        self._listener: socket.socket | None = None
        if rank == 0:
            ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind((host, port))
            ls.listen(size)
            self._listener = ls
            self.port = ls.getsockname()[1]  # port 0 -> the one the kernel chose

    def allgather(self, obj: _T, tag: str = "init") -> list[_T]:
        deadline = time.monotonic() + self.timeout
        if self.rank == 0:
            return self._serve(obj, tag, deadline)
        return self._join(obj, tag, deadline)

    def _serve(self, obj: _T, tag: str, deadline: float) -> list[_T]:
        assert self._listener is not None
        got: dict[int, _T] = {0: obj}
        conns: list[socket.socket] = []
        try:
            while len(got) < self.size:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RendezvousError(f"rendezvous {tag!r}: only {sorted(got)} arrived")
                self._listener.settimeout(left)
                try:
                    c, _ = self._listener.accept()
                except TimeoutError as e:
                    raise RendezvousError(f"rendezvous {tag!r}: only {sorted(got)} arrived") from e
                c.settimeout(max(0.1, deadline - time.monotonic()))
                msg = json.loads(_recv_msg(c))
                if msg.get("tag") != tag:
                    c.close()
                    raise RendezvousError(f"rendezvous tag mismatch: {msg.get('tag')!r} != {tag!r}")
                got[int(msg["rank"])] = msg["obj"]
                conns.append(c)
            everyone = [got[r] for r in range(self.size)]
            for c in conns:
                _send_msg(c, everyone)
            return everyone
        finally:
            for c in conns:
                c.close()

    def _join(self, obj: _T, tag: str, deadline: float) -> list[_T]:
        while True:
            try:
                s = socket.create_connection((self.host, self.port), timeout=1.0)
                break
            except OSError as e:
                if time.monotonic() > deadline:
                    raise RendezvousError(f"cannot reach rendezvous {self.host}:{self.port}") from e
                time.sleep(0.05)
        try:
            s.settimeout(max(0.1, deadline - time.monotonic()))
            _send_msg(s, {"tag": tag, "rank": self.rank, "obj": obj})
            return list(json.loads(_recv_msg(s)))
        finally:
            s.close()

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None


class FileRendezvous:
    def __init__(
        self,
        directory: str | os.PathLike[str],
        rank: int,
        size: int,
        timeout: float = 30.0,
        poll_s: float = 0.02,
    ) -> None:
        if not 0 <= rank < size:
            raise ValueError("rank out of range")
        self.dir = Path(directory)
        self.rank, self.size, self.timeout, self.poll_s = rank, size, timeout, poll_s
        self.dir.mkdir(parents=True, exist_ok=True)

    def allgather(self, obj: _T, tag: str = "init") -> list[_T]:
        mine = self.dir / f"{tag}.{self.rank}.json"
        tmp = self.dir / f".{tag}.{self.rank}.json.tmp"
        tmp.write_text(json.dumps(obj))
        os.replace(tmp, mine)  # atomic: readers never see a partial file
        deadline = time.monotonic() + self.timeout
        got: dict[int, _T] = {}
        missing = set(range(self.size))
        while missing:
            for r in sorted(missing):
                p = self.dir / f"{tag}.{r}.json"
                if p.exists():
                    got[r] = json.loads(p.read_text())
                    missing.discard(r)
            if missing:
                if time.monotonic() > deadline:
                    raise RendezvousError(f"rendezvous {tag!r}: ranks {sorted(missing)} missing")
                time.sleep(self.poll_s)
        return [got[r] for r in range(self.size)]


class LocalRendezvous:
    """Shared by `size` threads of one process; each rank gets a `view(rank)`."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._cv = threading.Condition()
        # tag -> rank -> its object as JSON text: each rank decodes its own
        # copy (the same data model as the other kinds)
        self._rounds: dict[str, dict[int, str]] = {}

    def view(self, rank: int) -> _LocalView:
        return _LocalView(self, rank)

    def _allgather(self, rank: int, obj: _T, tag: str, timeout: float) -> list[_T]:
        with self._cv:
            rnd = self._rounds.setdefault(tag, {})
            rnd[rank] = json.dumps(obj)
            self._cv.notify_all()
            if not self._cv.wait_for(lambda: len(rnd) == self.size, timeout):
                raise RendezvousError(f"rendezvous {tag!r}: only {sorted(rnd)} arrived")
            texts = [rnd[r] for r in range(self.size)]
        return [json.loads(t) for t in texts]


class _LocalView:
    def __init__(self, hub: LocalRendezvous, rank: int) -> None:
        self.hub, self.rank = hub, rank

    def allgather(self, obj: _T, tag: str = "init", timeout: float = 30.0) -> list[_T]:
        return self.hub._allgather(self.rank, obj, tag, timeout)
