"""A host's receive lag: how long frames waited before the agent read them
(hosts/roce/receive_lag.py), measured on a real socket."""

from __future__ import annotations

import socket
import time

from hosts.roce.receive_lag import ReceiveLag, threshold_ns
from hosts.roce.udp_provider import UdpProvider

LO = "127.0.0.1"
MS = 1_000_000


def test_a_prompt_reader_is_never_behind() -> None:
    lag = ReceiveLag()
    lag.reset(0, 5 * MS)
    for i in range(1, 101):                 # a batch every ms, each 20 us old
        lag.record(20_000, i * MS)
    rep = lag.as_dict(100 * MS)
    assert rep["behind_ns"] == 0 and rep["batches"] == 100
    assert rep["max_ns"] == 20_000 and rep["mean_ns"] == 20_000
    assert rep["buckets"] == {str((20_000).bit_length()): [100, 2_000_000]}


def test_a_stall_counts_once_however_many_batches_drain_it() -> None:
    lag = ReceiveLag()
    lag.reset(0, 5 * MS)
    lag.record(20_000, 1 * MS)
    # Nothing read for 30 ms; then ten batches read back to back, 0.1 ms
    # apart, drain the backlog: the first frame had waited 30 ms, the next
    # batches' a little less each.
    for k in range(10):
        lag.record(30 * MS - k * 200_000, 31 * MS + k * 100_000)
    rep = lag.as_dict(40 * MS)
    # behind from 5 ms after the oldest frame arrived (1 ms) until the backlog
    # was drained (31.9 ms): 25.9 ms, not ten batches' 25 ms each
    assert rep["behind_ns"] == 25 * MS + 900_000
    assert rep["max_ns"] == 30 * MS and rep["max_at_ns"] == 31 * MS
    # a wall clock stepped back is no lag, not a negative one
    lag.record(-5, 41 * MS)
    assert lag.as_dict(41 * MS)["buckets"]["0"] == [1, 0]


def test_the_threshold_is_a_feedback_interval_of_the_modelled_network() -> None:
    assert threshold_ns(125) == 6_250_000       # 50 us x 125: 80 Mb/s for 10 Gb/s
    assert threshold_ns(250) == 12_500_000


def test_the_provider_stamps_the_oldest_frame_of_each_batch() -> None:
    prov = UdpProvider(LO, port=0)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        # The kernel turns receive stamps on for every socket a moment after
        # the first one asks (deferred work); until then a frame is stamped
        # when read. So send until a batch shows the wait.
        for _attempt in range(50):
            prov.receive_lag.reset(time.monotonic_ns(), 5 * MS)
            for _ in range(3):
                tx.sendto(b"x" * 64, (LO, prov.port))
            time.sleep(0.02)            # the frames wait 20 ms in the socket
            got = prov.recv(16)
            assert len(got) == 3
            if prov.receive_lag.max_ns >= 15 * MS:
                break
        rep = prov.receive_lag.as_dict(time.monotonic_ns())
        assert rep["batches"] == 1            # one stamp per batch read
        assert 15 * MS <= rep["max_ns"] < 2000 * MS
        assert rep["behind_ns"] >= 10 * MS    # 20 ms old against a 5 ms threshold
        assert prov.recv(16) == [] and prov.receive_lag.batches == 1
    finally:
        tx.close()
        prov.close()
