"""CommLib over real kernel UDP sockets on loopback addresses (127.0.0.x, a
test-only RoCE port), one thread per rank, with the TCP and file rendezvous."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

from hosts.commlib import Communicator, FileRendezvous, LocalRendezvous, TcpRendezvous
from hosts.roce.scale import Scale
from hosts.roce.udp_provider import UdpProvider
from hosts.roce.verbs import Context


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_threads(fn, n: int, timeout: float = 60.0) -> list:
    results: list = [None] * n
    errors: list = []

    def target(r: int) -> None:
        try:
            results[r] = fn(r)
        except BaseException as e:  # reported below
            errors.append((r, e))

    ts = [threading.Thread(target=target, args=(r,), daemon=True) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
    assert not any(t.is_alive() for t in ts), "a rank hung"
    assert not errors, errors
    return results


@pytest.mark.parametrize("channels", [1, 2])
def test_allreduce_over_udp_with_tcp_rendezvous(channels: int) -> None:
    n = 4
    port = free_udp_port()
    rdv0 = TcpRendezvous("127.0.0.1", 0, 0, n, timeout=20)
    rng = np.random.default_rng(channels)
    xs = [rng.integers(-(2**31), 2**31 - 1, 20_000, dtype=np.int32) for _ in range(n)]
    events: list[list[dict]] = [[] for _ in range(n)]

    def rank(r: int) -> np.ndarray:
        rdv = rdv0 if r == 0 else TcpRendezvous("127.0.0.1", rdv0.port, r, n, timeout=20)
        ctx = Context(UdpProvider(f"127.0.0.{r + 1}", port=port), scale=Scale(slowdown=100.0))
        try:
            comm = Communicator.init(
                ctx,
                r,
                n,
                job_id=9,
                rendezvous=rdv,
                channels=channels,
                max_bytes=1 << 17,
                event_sink=events[r].append,
                timeout_s=30,
            )
            out = comm.all_reduce(xs[r])
            out2 = comm.all_gather(xs[r][:100])
            return out, out2
        finally:
            ctx.close()

    try:
        res = run_threads(rank, n)
    finally:
        rdv0.close()
    expect = np.sum(np.stack(xs), axis=0, dtype=np.int32)
    for out, out2 in res:
        assert np.array_equal(out, expect)
        assert np.array_equal(out2, np.concatenate([x[:100] for x in xs]))
    # Step events carry CLOCK_MONOTONIC times and the step tags keep counting.
    ends = [e for e in events[0] if e["event"] == "step_end"]
    assert len(ends) == channels * (2 * (n - 1) + (n - 1))
    assert sorted({e["tag_step"] for e in ends}) == list(range(3 * (n - 1)))


def test_file_and_local_rendezvous(tmp_path) -> None:
    n = 3

    def file_rank(r: int):
        return FileRendezvous(tmp_path, r, n, timeout=10).allgather({"r": r, "x": [r] * r})

    for got in run_threads(file_rank, n):
        assert got == [{"r": k, "x": [k] * k} for k in range(n)]
    hub = LocalRendezvous(n)
    for got in run_threads(lambda r: hub.view(r).allgather(r * 10, tag="t"), n):
        assert got == [0, 10, 20]


def test_jsonl_sink_writes_one_event_per_line(tmp_path) -> None:
    import json

    from hosts.commlib import JsonlSink

    path = tmp_path / "events.jsonl"
    with JsonlSink(path, extra={"host": "h1"}) as sink:
        sink({"event": "step_start", "step": 0, "t_ns": 5})
        sink({"event": "step_end", "step": 0, "t_ns": 9})
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [e["event"] for e in lines] == ["step_start", "step_end"]
    assert all(e["host"] == "h1" for e in lines)
