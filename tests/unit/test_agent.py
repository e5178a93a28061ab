"""The host agent: job specs, the data both ends derive, and real agent processes
talking RoCEv2 over loopback addresses (no root needed)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hosts.agent.expectations import (
    CollectiveExpectation,
    collective_bound,
    collective_expected,
    collective_input,
)
from hosts.agent.flow import FINAL_IMM
from hosts.agent.patterns import FLOW_PATTERN_PERIOD, flow_pattern, matches_pattern
from hosts.agent.process import PROFILE_ENV
from hosts.agent_spec import (
    MAX_FLOW_BYTES,
    CollectiveSpec,
    FlowSpec,
    JobSpec,
    SpecError,
    TransportSpec,
    message_wire_bytes,
)
from hosts.commlib import split
from hosts.roce import Access, Context, FixedRate, Scale, SimWire, WROpcode, connect_pair
from hosts.roce.verbs import SendWR

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------
# specs


def _flow(role: str = "sender", **kw: Any) -> FlowSpec:
    d: dict[str, Any] = {"flow": "f", "role": role, "peer_ip": "10.0.0.2", "msg_bytes": 4096,
                         "count": 3}
    d.update(kw)
    return FlowSpec(**d)


def test_dcqcn_cuts_and_increases_go_to_the_timeline(tmp_path: Path) -> None:
    from hosts.agent.events import EventLog
    from hosts.agent.rates import cnp_interval_ns, make_rate_controller

    scale = Scale(slowdown=1000.0, nic_rate_bps=40e9)
    spec = JobSpec(host="h1", ip="10.0.1.1", flows=(_flow(),),
                   transport=TransportSpec(scale={"slowdown": 1000.0, "nic_rate_bps": 40e9},
                                           dcqcn={"preset": "connectx"}))
    log = EventLog(tmp_path / "ev.jsonl", "h1")
    cc = make_rate_controller(spec, scale, log, "f")
    t0 = time.monotonic_ns() + 10**9     # after the controller was made
    cc.on_cnp(t0)
    cc.on_timer(t0 + 300_000_000)         # rpg_time_reset 300 us x 1000
    log.close()
    evs = [e for e in _read(tmp_path / "ev.jsonl") if e["event"] == "dcqcn"]
    assert [(e["kind"], e["flow"], e["t_ns"]) for e in evs] == [
        ("cut", "f", t0), ("increase", "f", t0 + 300_000_000)]
    assert evs[0]["rc_bps"] == pytest.approx(40e6 * (1 - 1023 / 2048))
    assert evs[1]["stage"] == "fast_recovery" and evs[1]["source"] == "timer"
    # The notification point's interval comes from the same preset.
    assert cnp_interval_ns(spec, scale) == 4_000_000
    zhu = dataclasses.replace(spec, transport=dataclasses.replace(
        spec.transport, dcqcn={"preset": "zhu2015"}))
    assert cnp_interval_ns(zhu, scale) == 50_000_000


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_job_spec_round_trips_through_json() -> None:
    spec = JobSpec(host="h1", ip="10.0.1.1",
                   transport=TransportSpec(scale={"slowdown": 500.0}, dcqcn={"preset": "nic"}),
                   flows=(_flow(), _flow("receiver", flow="g", rate_bps=1e6)),
                   collective=CollectiveSpec(rank=1, size=4, dtype="int32"),
                   barrier=(1, 3))
    back = JobSpec.from_json(spec.to_json())
    assert back == spec
    assert json.loads(spec.to_json())["flows"][1]["rate_bps"] == 1e6


@pytest.mark.parametrize("bad, words", [
    ({"flows": ()}, "no flows and no collective"),
    ({"flows": (_flow(), _flow())}, "appears twice"),
    ({"barrier": (3, 3)}, "barrier rank"),
    ({"transport": {"path_mtu": 1000}}, "path_mtu"),
    ({"transport": {"scale": {"slowdown": -1}}}, "transport.scale"),
    ({"transport": {"scale": {"nonsense": 1}}}, "transport.scale"),
    ({"transport": {"dcqcn": {"preset": "fast"}}}, "preset"),
    ({"transport": {"dcqcn": {"preset": "connectx", "overrides": {"rai_bps": 1}}}},
     "unknown parameter"),
    ({"transport": {"dcqcn": {"presets": "connectx"}}}, "unknown key"),
    ({"transport": {"rx_holdoff_us": 50.0}}, "rx_holdoff_us"),
    ({"transport": {"rx_holdoff_us": -1.0}}, "rx_holdoff_us"),
])
def test_invalid_job_specs_name_the_field(bad: dict[str, Any], words: str) -> None:
    d = JobSpec(host="h1", ip="10.0.1.1", flows=(_flow(),)).to_dict()
    for k, v in bad.items():
        if k == "transport":
            d["transport"] = {**d["transport"], **v}
        elif k == "flows":
            d["flows"] = [json.loads(json.dumps(f.__dict__)) for f in v]
        else:
            d[k] = v
    with pytest.raises(SpecError, match=words):
        JobSpec.from_dict(d)


def test_flow_and_collective_specs_are_validated() -> None:
    with pytest.raises(SpecError, match="role"):
        _flow("both")
    with pytest.raises(SpecError, match="msg_bytes"):
        _flow(msg_bytes=0)
    with pytest.raises(SpecError, match="job_id"):
        _flow(job_id=300)
    with pytest.raises(SpecError, match="rank"):
        CollectiveSpec(rank=4, size=4)
    with pytest.raises(SpecError, match="dtype"):
        CollectiveSpec(rank=0, size=2, dtype="float32")  # not bit-exact
    with pytest.raises(SpecError, match="bad job spec"):
        JobSpec.from_dict({"host": "h1", "ip": "x", "flows": [{"flow": "f", "oops": 1}]})
    with pytest.raises(SpecError, match="not JSON"):
        JobSpec.from_json("{")


def test_phantom_payloads_through_epic_are_int32_allreduce_and_barrier_only() -> None:
    ep = {"switch_ip": "10.255.0.1", "qpn": 0x100, "gid": 0}
    for ops in ((), ("all_reduce", "barrier")):
        CollectiveSpec(rank=0, size=2, scheme="epic", dtype="int32", epic=ep, ops=ops,
                       payload="phantom")
    for kw in ({"ops": ("reduce", "broadcast")}, {"op": "all_gather"},
               {"dtype": "float32"}):
        with pytest.raises(SpecError, match="phantom' through EPIC runs int32 AllReduce"):
            CollectiveSpec(**{"rank": 0, "size": 2, "scheme": "epic", "dtype": "int32",
                              "epic": ep, "payload": "phantom", **kw})
    # the host ring runs every collective phantom
    CollectiveSpec(rank=0, size=2, ops=("reduce", "all_gather"), payload="phantom")


def test_phantom_flows_are_refused_on_rxe_hosts_in_one_line() -> None:
    with pytest.raises(SpecError, match=r"^flow f: payload 'ghost' unknown \(real, phantom\)$"):
        _flow(payload="ghost")
    flows = (_flow(flow="real"), _flow(flow="ghost", payload="phantom"))
    JobSpec(host="h1", ip="10.0.0.1", flows=flows)                  # udp hosts run it
    with pytest.raises(SpecError) as e:
        JobSpec(host="h1", ip="10.0.0.1", flows=flows, provider="rxe")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("job for h1: flow ghost: phantom payloads need "
                                              "udp-provider hosts")
    JobSpec(host="h1", ip="10.0.0.1", flows=flows[:1], provider="rxe")


def test_a_phantom_flow_end_holds_untouched_memory() -> None:
    from hosts.agent.patterns import flow_buffer, register_flow_buffer
    from hosts.roce.verbs import PD

    big = 1 << 30               # 1 GiB at each end, none of it allocated
    snd = _flow(msg_bytes=1 << 20, count=big >> 20, payload="phantom")
    rcv = dataclasses.replace(snd, role="receiver")
    ctx = Context(SimWire().provider("10.0.0.1"), Scale())
    for spec in (snd, rcv):
        buf = flow_buffer(spec)
        assert not isinstance(buf, bytearray) and len(buf) == big
        assert bytes(memoryview(buf)[big - 4096:]) == bytes(4096)
        mr = register_flow_buffer(PD(ctx), spec, buf)
        assert mr.length == big and mr.discard_writes == (spec.role == "receiver")
    real = _flow()
    assert flow_buffer(real) == flow_pattern(real)
    assert flow_buffer(dataclasses.replace(real, role="receiver")) == bytearray(3 * 4096)
    assert not register_flow_buffer(PD(ctx), real, flow_buffer(real)).discard_writes


def test_a_flow_carries_up_to_2_gib_less_one_byte() -> None:
    # The bound is checked, not allocated: specs are plain data.
    assert _flow(msg_bytes=65536, count=32767).total_bytes == MAX_FLOW_BYTES - 65535
    assert _flow(msg_bytes=MAX_FLOW_BYTES, count=1).total_bytes == MAX_FLOW_BYTES
    assert _flow(msg_bytes=1, count=MAX_FLOW_BYTES).count == MAX_FLOW_BYTES
    with pytest.raises(SpecError, match=r"flow f: 65536 x 32768 bytes, more than a flow "
                                        r"may carry \(2147483647 bytes"):
        _flow(msg_bytes=65536, count=32768)
    with pytest.raises(SpecError, match="31-bit"):
        _flow("receiver", msg_bytes=1 << 31, count=1)
    # Why: the last message's index (count - 1, at one byte per message) stays
    # below the flag bit that marks a flow's last message in its immediate data.
    assert (MAX_FLOW_BYTES - 1) & FINAL_IMM == 0


def test_received_bytes_are_checked_against_the_pattern() -> None:
    spec = _flow(msg_bytes=4096, count=3)
    b = flow_pattern(spec)
    assert matches_pattern(b, spec, len(b))
    b[-1] ^= 1
    assert not matches_pattern(b, spec, len(b))
    assert matches_pattern(b, spec, len(b) - 1)    # beyond n: not compared
    b[-1] ^= 1
    b[2500] ^= 0x80
    assert not matches_pattern(b, spec, len(b))
    assert not matches_pattern(b[:100], spec, 101)  # shorter than n
    assert not matches_pattern(flow_pattern(_flow(seed=6)), spec, len(b))


def test_a_long_flow_repeats_its_pattern_with_a_prime_period() -> None:
    """A flow longer than a period: SHAKE-128 of the seed, repeated; a packet
    moved by whole packets or by part of one does not match."""
    import hashlib

    spec = _flow(msg_bytes=65536, count=300)       # 19.7 MB, 1.17 periods
    b = flow_pattern(spec)
    p = FLOW_PATTERN_PERIOD
    assert len(b) == spec.total_bytes
    assert bytes(b[:p]) == hashlib.shake_128(b"flow-pattern/%d" % spec.seed).digest(p)
    assert b[p:] == b[:len(b) - p]
    assert matches_pattern(b, spec, len(b))
    for shift in (1024, 4096, 65536, 1):              # where the second period starts
        c = bytearray(b)
        c[p:p + 1024] = b[p + shift:p + shift + 1024]
        assert not matches_pattern(c, spec, len(c)), shift


def test_both_ends_derive_the_same_data() -> None:
    a, b = _flow(seed=5), _flow("receiver", seed=5)
    assert flow_pattern(a) == flow_pattern(b) and len(flow_pattern(a)) == 3 * 4096
    assert flow_pattern(a) != flow_pattern(_flow(seed=6))
    spec = CollectiveSpec(rank=0, size=3, count=100, seed=2)
    xs = [collective_input(spec, r, 0) for r in range(3)]
    assert not np.array_equal(xs[0], xs[1])
    np.testing.assert_array_equal(collective_expected(spec, 0), xs[0] + xs[1] + xs[2])
    rs = CollectiveSpec(rank=2, size=3, count=100, seed=2, op="reduce_scatter")
    off, ln = split(100, 3)[2]  # CommLib's chunking: rank 2 owns the last chunk
    assert off + ln == 100
    np.testing.assert_array_equal(collective_expected(rs, 0), (xs[0] + xs[1] + xs[2])[off:])
    ag = CollectiveSpec(rank=0, size=3, count=100, seed=2, op="all_gather")
    np.testing.assert_array_equal(collective_expected(ag, 0), np.concatenate(xs))


def test_a_collectives_expected_result_is_made_ahead_and_judges_what_arrives() -> None:
    """A rank makes each collective's input and expected result before the
    start (not at the collective's boundary, where it took the CPU at
    real-time priority beside the traffic) and judges the result against it:
    bit-exact or not, with the right hash."""
    spec = CollectiveSpec(rank=1, size=3, count=300, seed=4, iterations=2)
    exp = CollectiveExpectation.make(spec, 1)
    assert exp.x is not None and exp.want is not None and exp.bound is None
    np.testing.assert_array_equal(exp.x, collective_input(spec, 1, 1))
    np.testing.assert_array_equal(exp.want, collective_expected(spec, 1))
    assert exp.sha256 == hashlib.sha256(exp.want.tobytes()).hexdigest()
    assert exp.judge(exp.want.copy()) == (True, exp.sha256)
    wrong = exp.want.copy()
    wrong[7] += 1
    assert exp.judge(wrong) == (False, hashlib.sha256(wrong.tobytes()).hexdigest())
    assert exp.judge(exp.want.astype(np.int32))[0] is False     # the dtype counts too
    assert exp.judge(None) == (False, None)
    # a Barrier and a non-root Reduce rank receive nothing: nothing to judge
    barrier = CollectiveSpec(rank=0, size=3, ops=("barrier",), counts=(1,))
    assert CollectiveExpectation.make(barrier, 0).judge(None) == (True, None)
    reduce = CollectiveSpec(rank=2, size=3, count=300, op="reduce", root=0)
    made = CollectiveExpectation.make(reduce, 0)
    assert made.x is not None and made.want is None and made.judge(None) == (True, None)
    np.testing.assert_array_equal(made.x, collective_input(reduce, 2, 0))
    # a Broadcast's root hands over a copy of its input, not the expected result
    root = CollectiveExpectation.make(CollectiveSpec(rank=1, size=3, count=50, op="broadcast",
                                                     root=1), 0)
    assert root.x is not None and root.want is not None and root.x is not root.want
    np.testing.assert_array_equal(root.x, root.want)
    # EPIC's float sums: within the fixed-point bound, hashed as they came
    ep = {"switch_ip": "10.255.0.1", "qpn": 0x100, "gid": 0}
    fl = CollectiveSpec(rank=0, size=2, count=200, seed=1, dtype="float32", scheme="epic",
                        epic=ep)
    fexp = CollectiveExpectation.make(fl, 0)
    assert fexp.want is not None and fexp.bound is not None
    near = fexp.want.astype(np.float32)
    assert fexp.judge(near) == (True, hashlib.sha256(near.tobytes()).hexdigest())
    assert fexp.judge(near + np.float32(1e3))[0] is False


def test_float32_collectives_go_through_epic_within_the_fixed_point_bound() -> None:
    with pytest.raises(SpecError, match="EPIC only"):
        CollectiveSpec(rank=0, size=2, dtype="float32")
    ep = {"switch_ip": "10.255.0.1", "qpn": 0x100, "gid": 0}
    spec = CollectiveSpec(rank=1, size=4, count=500, seed=3, dtype="float32", scheme="epic",
                          epic=ep)
    xs = [collective_input(spec, r, 0) for r in range(4)]
    assert all(x.dtype == np.float32 for x in xs)
    exact = collective_expected(spec, 0)
    assert exact is not None and exact.dtype == np.float64
    bound = collective_bound(spec, 0, exact)
    assert bound is not None
    # what the switch computes: every rank rounds x * f, the int32 sums are divided by f
    from hosts.commlib.epic import fixed_point_factor

    f = fixed_point_factor(sum(float(np.max(np.abs(x))) for x in xs))
    fixed = np.sum([np.round(x.astype(np.float64) * f) for x in xs], axis=0)
    got = (fixed / f).astype(np.float32)
    assert np.all(np.abs(got - exact) <= bound)
    assert not np.all(np.abs(got + 10 * bound - exact) <= bound)    # the bound is tight-ish
    # copies are exact: no bound
    bc = dataclasses.replace(spec, op="broadcast")
    assert collective_bound(bc, 0, collective_expected(bc, 0)) is None


@pytest.mark.parametrize("size, mtu", [(65536, 1024), (1000, 1024), (5, 256), (3000, 1024)])
def test_message_wire_bytes_matches_what_the_transport_sends(size: int, mtu: int) -> None:
    w = SimWire()
    a = Context(w.provider("10.0.0.1"), Scale(), rate_controller_factory=lambda: FixedRate(1e9))
    b = Context(w.provider("10.0.0.2"), Scale(), rate_controller_factory=lambda: FixedRate(1e9))
    pa, pb = a.alloc_pd(), b.alloc_pd()
    ma = pa.reg_mr(bytearray(size), Access.LOCAL_WRITE)
    mb = pb.reg_mr(bytearray(size), Access.LOCAL_WRITE | Access.REMOTE_WRITE)
    ca, cb = a.create_cq(), b.create_cq()
    qa, qb = pa.create_qp(ca), pb.create_qp(cb)
    connect_pair(qa, qb, path_mtu=mtu)
    from hosts.roce import RecvWR

    qb.post_recv(RecvWR(wr_id=1))
    qa.post_send(SendWR(1, WROpcode.RDMA_WRITE_WITH_IMM, ma.sge(), remote_addr=mb.addr,
                        rkey=mb.rkey, imm_data=1))
    assert w.run(lambda: len(ca) >= 1, 5.0)
    assert qa.stats["retransmits"] == 0
    assert qa.stats["tx_bytes"] == message_wire_bytes(size, mtu)


# ---------------------------------------------------------------------------
# agent processes on loopback addresses


def _loopback_ips(n: int) -> list[str]:
    # Random 127/8 addresses: parallel test runs on one machine do not meet on UDP 4791.
    base = random.Random(os.getpid() ^ int.from_bytes(os.urandom(4), "big"))
    a, b = base.randrange(1, 250), base.randrange(1, 250)
    return [f"127.{a}.{b}.{i + 1}" for i in range(n)]


def _transport() -> TransportSpec:
    return TransportSpec(scale={"slowdown": 1000.0, "nic_rate_bps": 40e9},
                         dcqcn={"preset": "paper"}, sample_interval_us=2000)


def _run_agents(tmp: Path, specs: list[JobSpec], timeout: float = 60,
                env: dict[str, str] | None = None) -> list[tuple[int, str]]:
    procs = []
    for i, s in enumerate(specs):
        s = JobSpec.from_dict({**s.to_dict(), "rendezvous_dir": str(tmp / "rdv"),
                               "barrier": (i, len(specs))})
        (tmp / f"{s.host}.json").write_text(s.to_json())
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "hosts.agent", "--spec", str(tmp / f"{s.host}.json"),
             "--events", str(tmp / f"{s.host}.jsonl")], cwd=REPO, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}))
    out = []
    for p in procs:
        try:
            _o, err = p.communicate(timeout=timeout)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        out.append((p.returncode, err))
    return out


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _sender_receiver(ip_a: str, ip_b: str, common: dict[str, Any],
                     **sender: Any) -> list[JobSpec]:
    """Host a sending flow ``common`` (plus ``sender``'s fields) to host b,
    which receives it."""
    return [
        JobSpec(host="a", ip=ip_a, transport=_transport(),
                flows=(FlowSpec(role="sender", peer_ip=ip_b, **sender, **common),), timeout_s=30),
        JobSpec(host="b", ip=ip_b, transport=_transport(),
                flows=(FlowSpec(role="receiver", peer_ip=ip_a, **common),), timeout_s=30),
    ]


def test_sender_and_receiver_agents_move_and_verify_the_bytes(tmp_path: Path) -> None:
    ip_a, ip_b = _loopback_ips(2)
    common = {"flow": "f1", "msg_bytes": 16384, "count": 12, "window": 3, "seed": 9}
    specs = _sender_receiver(ip_a, ip_b, common)
    results = _run_agents(tmp_path, specs)
    assert [rc for rc, _ in results] == [0, 0], results
    ev_a, ev_b = _events(tmp_path / "a.jsonl"), _events(tmp_path / "b.jsonl")
    kinds_a = [e["event"] for e in ev_a]
    assert kinds_a[0] == "agent_start" and kinds_a[-1] == "agent_end"
    assert ev_a[0]["pid"] > 0 and ev_a[0]["spec"]["host"] == "a"
    for k in ("setup_done", "start", "flow_start", "rate", "flow_end", "work_done"):
        assert k in kinds_a, k
    # One common start time: both agents log the same instant.
    start_a = next(e for e in ev_a if e["event"] == "start")["t_ns"]
    start_b = next(e for e in ev_b if e["event"] == "start")["t_ns"]
    assert start_a == start_b
    comps = [e for e in ev_b if e["event"] == "completion"]
    assert sorted(e["index"] for e in comps) == list(range(12))
    assert all(e["bytes"] == 16384 for e in comps)
    end_b = next(e for e in ev_b if e["event"] == "flow_end")
    end_a = next(e for e in ev_a if e["event"] == "flow_end")
    assert end_b["bytes_ok"] is True and end_b["sha256"] == end_a["sha256"]
    assert end_b["qp"]["rx_bytes"] == 12 * 16384
    assert end_a["pacer"]["lateness"]["sends"] == end_a["qp"]["tx_pkts"]
    assert end_a["dcqcn"]["rc_bps"] == pytest.approx(40e6)
    # Rate samples are on CLOCK_MONOTONIC, in order, every ~2 ms while sending.
    rates = [e for e in ev_a if e["event"] == "rate"]
    assert len(rates) >= 3
    assert all(x["t_ns"] < y["t_ns"] for x, y in zip(rates, rates[1:], strict=False))
    assert rates[-1]["tx_bytes"] == end_a["qp"]["tx_bytes"]
    rx = [e for e in ev_b if e["event"] == "rx"]
    assert rx[-1]["rx_bytes"] == 12 * 16384
    # Digests and byte checks wait until every agent of the phase is done (a
    # receiver hashing hundreds of MB would read no frame meanwhile), and
    # the receiver says how long its frames waited to be read.
    kinds_b = [e["event"] for e in ev_b]
    assert kinds_b.index("flow_end") > kinds_b.index("work_done")
    lag = next(e for e in ev_b if e["event"] == "agent_end")["receive_lag"]
    assert lag["batches"] > 0 and lag["threshold_ns"] == 50_000_000   # 50 us x 1000
    assert 0 <= lag["behind_ns"] <= lag["span_ns"]


def test_phantom_flows_move_the_same_messages_without_the_bytes(tmp_path: Path) -> None:
    """A flow and a connection pool with phantom payloads: every message
    delivered and counted, no digest and no byte check at either end."""
    ip_a, ip_b = _loopback_ips(2)
    flow = {"flow": "f1", "msg_bytes": 16384, "count": 12, "window": 3, "seed": 9,
            "payload": "phantom"}
    pool = {"flow": "reqs", "msg_bytes": 8192, "count": 4, "seed": 4, "qps": 2,
            "arrivals_s": (0.01, 0.01, 0.02, 0.03), "payload": "phantom"}
    a, b = _sender_receiver(ip_a, ip_b, flow)
    a2, b2 = _sender_receiver(ip_a, ip_b, pool)
    specs = [dataclasses.replace(a, flows=a.flows + a2.flows),
             dataclasses.replace(b, flows=b.flows + b2.flows)]
    results = _run_agents(tmp_path, specs)
    assert [rc for rc, _ in results] == [0, 0], results
    ev_a, ev_b = _events(tmp_path / "a.jsonl"), _events(tmp_path / "b.jsonl")
    for name, n, size in (("f1", 12, 16384), ("reqs", 4, 8192)):
        comps = [e for e in ev_b if e["event"] == "completion" and e["flow"] == name]
        assert sorted(e["index"] for e in comps) == list(range(n))
        ends = [e for e in ev_a + ev_b if e["event"] == "flow_end" and e["flow"] == name]
        assert len(ends) == 2
        for end in ends:
            assert end["payload"] == "phantom" and "sha256" not in end
            assert "bytes_ok" not in end and end["bytes"] == n * size
    rx = next(e for e in ev_b if e["event"] == "flow_end" and e["flow"] == "f1")
    assert rx["qp"]["rx_bytes"] == 12 * 16384


def test_agents_run_under_the_profiler_when_asked(tmp_path: Path) -> None:
    """P4TB_AGENT_PROFILE=DIR: each agent still does its job and leaves
    DIR/<phase>-<host>.pstats, whose calls include the transport's."""
    import pstats

    ip_a, ip_b = _loopback_ips(2)
    common = {"flow": "f1", "msg_bytes": 8192, "count": 4, "window": 2, "seed": 3}
    out = tmp_path / "profiles"
    results = _run_agents(tmp_path, _sender_receiver(ip_a, ip_b, common),
                          env={PROFILE_ENV: str(out)})
    assert [rc for rc, _ in results] == [0, 0], results
    for host in ("a", "b"):
        ev = _events(tmp_path / f"{host}.jsonl")
        assert next(e for e in ev if e["event"] == "flow_end")["count"] == 4
        path = out / f"main-{host}.pstats"
        assert next(e for e in ev if e["event"] == "profiling")["path"] == str(path)
        functions = {name for (_file, _line, name) in pstats.Stats(str(path)).stats}  # type: ignore[attr-defined]
        assert "progress" in functions and "_on_datagram" in functions


def test_a_sender_with_first_psn_0_starts_its_flow_at_psn_0(tmp_path: Path) -> None:
    ip_a, ip_b = _loopback_ips(2)
    common = {"flow": "step", "msg_bytes": 8192, "count": 4, "window": 2, "seed": 3,
              "job_id": 5, "step": 12}
    specs = _sender_receiver(ip_a, ip_b, common, first_psn=0)
    results = _run_agents(tmp_path, specs)
    assert [rc for rc, _ in results] == [0, 0], results
    start_a = next(e for e in _events(tmp_path / "a.jsonl") if e["event"] == "flow_start")
    assert start_a["psn"] == 0 and start_a["sport"] == 0xC000 | 12 and start_a["job_id"] == 5
    end_b = next(e for e in _events(tmp_path / "b.jsonl") if e["event"] == "flow_end")
    assert end_b["bytes_ok"] is True
    with pytest.raises(SpecError, match="first_psn"):
        FlowSpec(role="sender", peer_ip=ip_b, first_psn=1 << 24, **common)


def test_a_flexible_sender_goes_low_once_it_has_budget(tmp_path: Path) -> None:
    """Alone at 40 Mb/s with alpha 0.5 and T_int 20 ms (cycle 100 ms), the flow
    has budget for an exploit phase (0.5 x R x 60 ms) 120 ms after its first
    estimate: from then on its data packets carry the low DSCP in exploit
    phases and the default one otherwise. It also starts after its delay."""
    ip_a, ip_b = _loopback_ips(2)
    common = {"flow": "flex", "msg_bytes": 32768, "count": 80, "window": 4, "seed": 3}
    flex = {"alpha": 0.5, "t_int_us": 20000, "low_dscp": 8}
    specs = _sender_receiver(ip_a, ip_b, common, start_delay_s=0.1, flexible=flex)
    results = _run_agents(tmp_path, specs)
    assert [rc for rc, _ in results] == [0, 0], results
    ev_a, ev_b = _events(tmp_path / "a.jsonl"), _events(tmp_path / "b.jsonl")
    t0 = next(e for e in ev_a if e["event"] == "start")["t_ns"]
    first = min(e["t_ns"] for e in ev_b if e["event"] == "completion")
    assert first - t0 >= 0.1e9
    switches = [e for e in ev_a if e["event"] == "priority"]
    assert switches and switches[0]["low"] is True
    # The estimate counts acknowledged payload, which advances one ACK at a time
    # (at most every ack_every_pkts packets): a measure interval can hold one
    # ACK more than the line rate carries, and one more if a scheduling delay
    # pushed the previous interval's last ACK into it.
    tr = _transport()
    ack_bits = Scale(**tr.scale).ack_every_pkts * tr.path_mtu * 8
    assert 0 < switches[0]["fair_share_bps"] <= 40e6 + 2 * ack_bits / 20e-3
    rates = [e for e in ev_a if e["event"] == "rate"]
    assert {e["dscp"] for e in rates if e.get("low")} == {8}
    assert {e["dscp"] for e in rates if e.get("low") is False} == {0}
    end = next(e for e in ev_a if e["event"] == "flow_end")
    assert end["flexible"]["low_s"] > 0
    assert next(e for e in ev_b if e["event"] == "flow_end")["bytes_ok"] is True


def test_a_flexible_flow_with_r_below_one_ends_early_with_at_least_r(tmp_path: Path) -> None:
    """alpha = 2 asks for twice the measured fair share, which a lone flow never
    gets: every update is a deficit, drained from B_r = (1 - r) F. Once the
    delivered bytes and what B_r gave up cover the flow, the sender flags its
    last message and both ends stop there, with at least r F delivered and
    the delivered prefix intact."""
    ip_a, ip_b = _loopback_ips(2)
    common = {"flow": "part", "msg_bytes": 32768, "count": 80, "window": 4, "seed": 5}
    flex = {"alpha": 2.0, "r": 0.5, "t_int_us": 20000}
    specs = _sender_receiver(ip_a, ip_b, common, flexible=flex)
    results = _run_agents(tmp_path, specs)
    assert [rc for rc, _ in results] == [0, 0], results
    ev_a, ev_b = _events(tmp_path / "a.jsonl"), _events(tmp_path / "b.jsonl")
    end_a = next(e for e in ev_a if e["event"] == "flow_end")
    end_b = next(e for e in ev_b if e["event"] == "flow_end")
    n = end_b["partial"]["messages"]
    assert 40 <= n < 80 and end_a["partial"]["messages"] == n
    assert end_b["count"] == n and end_b["bytes"] == n * 32768
    assert end_b["bytes_ok"] is True and end_b["sha256"] == end_a["sha256"]
    assert end_a["flexible"]["b_r"] < 0.5 * 80 * 32768
    assert [e["index"] for e in ev_b if e["event"] == "completion"] == list(range(n))


def test_a_sender_with_stop_after_ends_once_the_other_flow_is_received(tmp_path: Path) -> None:
    """A long flow that stops after a short one: once the short flow's receiver
    has all of it, the long flow's next message is its last, both ends agree
    on where it ended and on the delivered bytes, and nothing is left hanging."""
    ip_a, ip_b, ip_c = _loopback_ips(3)
    long = {"flow": "long", "msg_bytes": 16384, "count": 400, "window": 2, "seed": 1}
    short = {"flow": "short", "msg_bytes": 16384, "count": 4, "window": 2, "seed": 2}
    specs = [
        JobSpec(host="a", ip=ip_a, transport=_transport(),
                flows=(FlowSpec(role="sender", peer_ip=ip_c, stop_after="short", **long),),
                timeout_s=30),
        JobSpec(host="b", ip=ip_b, transport=_transport(),
                flows=(FlowSpec(role="sender", peer_ip=ip_c, start_delay_s=0.05, **short),),
                timeout_s=30),
        JobSpec(host="c", ip=ip_c, transport=_transport(),
                flows=(FlowSpec(role="receiver", peer_ip=ip_a, **long),
                       FlowSpec(role="receiver", peer_ip=ip_b, **short)), timeout_s=30),
    ]
    results = _run_agents(tmp_path, specs)
    assert [rc for rc, _ in results] == [0, 0, 0], results
    ev_a, ev_c = _events(tmp_path / "a.jsonl"), _events(tmp_path / "c.jsonl")
    ends = {(e["host"], e["flow"]): e for e in ev_a + ev_c if e["event"] == "flow_end"}
    assert ends[("c", "short")]["count"] == 4 and "partial" not in ends[("c", "short")]
    stop = next(e for e in ev_a if e["event"] == "stop_after")
    assert stop["after"] == "short" and stop["t_ns"] >= ends[("c", "short")]["t_ns"]
    n = ends[("c", "long")]["partial"]["messages"]
    assert n == stop["messages"] < 400 and ends[("a", "long")]["partial"]["messages"] == n
    assert ends[("c", "long")]["bytes_ok"] is True
    assert ends[("c", "long")]["sha256"] == ends[("a", "long")]["sha256"]
    with pytest.raises(SpecError, match="stop_after"):
        FlowSpec(role="receiver", peer_ip=ip_a, stop_after="short", **long)
    with pytest.raises(SpecError, match="stop_after"):
        FlowSpec(role="sender", peer_ip=ip_c, stop_after="long", **long)


def test_flexible_specs_are_checked() -> None:
    base = {"flow": "f", "peer_ip": "10.0.0.2", "msg_bytes": 1024, "count": 4}
    with pytest.raises(SpecError, match="only a sender"):
        FlowSpec(role="receiver", flexible={"alpha": 0.9, "t_int_us": 5000}, **base)
    with pytest.raises(SpecError, match="unknown flexible fields"):
        FlowSpec(role="sender", flexible={"alpha": 0.9, "t_int_us": 5000, "beta": 1}, **base)
    with pytest.raises(SpecError, match="r must be in"):
        FlowSpec(role="sender", flexible={"alpha": 0.9, "t_int_us": 5000, "r": 1.5}, **base)
    with pytest.raises(SpecError, match="t_int_ns must be positive"):
        FlowSpec(role="sender", flexible={"alpha": 0.9, "t_int_us": 0}, **base)
    with pytest.raises(SpecError, match="dscp"):
        FlowSpec(role="sender", dscp=64, **base)


@pytest.mark.parametrize("origin", [False, True], ids=["one-qp", "step-psn-origin"])
def test_collective_agents_give_bit_exact_sums(tmp_path: Path, origin: bool) -> None:
    ips = _loopback_ips(3)
    specs = [JobSpec(host=f"r{r}", ip=ip, transport=_transport(), timeout_s=30,
                     collective=CollectiveSpec(rank=r, size=3, count=3000, iterations=2, seed=4,
                                               step_psn_origin=origin))
             for r, ip in enumerate(ips)]
    results = _run_agents(tmp_path, specs)
    assert [rc for rc, _ in results] == [0, 0, 0], results
    checks = [e for r in range(3) for e in _events(tmp_path / f"r{r}.jsonl")
              if e["event"] == "collective_check"]
    assert len(checks) == 6 and all(c["ok"] for c in checks)
    assert len({c["sha256"] for c in checks if c["iteration"] == 1}) == 1
    reports = [e for e in _events(tmp_path / "r0.jsonl") if e["event"] == "pacer_report"]
    assert reports and reports[0]["pacer"]["lateness"]["sends"] > 0
    assert len(reports) == (5 if origin else 1)     # one sending QP per lane: 2 size - 1


def test_a_sequence_of_ring_primitives_is_checked_bit_for_bit(tmp_path: Path) -> None:
    ips = _loopback_ips(3)
    ops = ("reduce", "broadcast", "reduce_scatter", "all_gather", "barrier")
    specs = [JobSpec(host=f"r{r}", ip=ip, transport=_transport(), timeout_s=30,
                     collective=CollectiveSpec(rank=r, size=3, dtype="int32", ops=ops,
                                               counts=(900, 900, 900, 300, 1), root=1, seed=3))
             for r, ip in enumerate(ips)]
    assert JobSpec.from_json(specs[0].to_json()) == specs[0]
    results = _run_agents(tmp_path, specs)
    assert [rc for rc, _ in results] == [0, 0, 0], results
    checks = {(r, e["iteration"]): e for r in range(3)
              for e in _events(tmp_path / f"r{r}.jsonl") if e["event"] == "collective_check"}
    assert len(checks) == 15 and all(c["ok"] for c in checks.values())
    assert [checks[(0, i)]["op"] for i in range(5)] == list(ops)
    # only the root receives a Reduce; a Barrier delivers nothing
    assert [checks[(r, 0)]["sha256"] is None for r in range(3)] == [True, False, True]
    assert all(checks[(r, 4)]["sha256"] is None for r in range(3))
    # every rank holds the root's broadcast input
    root_spec = specs[1].collective
    assert root_spec is not None
    root_input = collective_input(root_spec, 1, 1)
    want = hashlib.sha256(root_input.tobytes()).hexdigest()
    assert {checks[(r, 1)]["sha256"] for r in range(3)} == {want}


def test_an_agent_whose_peer_never_comes_fails_with_a_clear_message(tmp_path: Path) -> None:
    ip_a, ip_b = _loopback_ips(2)
    spec = JobSpec(host="lonely", ip=ip_a, transport=_transport(), timeout_s=1.0,
                   flows=(FlowSpec(flow="f", role="receiver", peer_ip=ip_b, msg_bytes=100,
                                   count=1),))
    [(rc, err)] = _run_agents(tmp_path, [spec])
    assert rc == 1
    assert "agent lonely: error:" in err and "rendezvous" in err, err
    last = _events(tmp_path / "lonely.jsonl")[-1]
    assert last["event"] == "error" and "rendezvous" in last["message"]


def test_an_invalid_spec_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"host": "h", "ip": "127.0.0.1", "flows": []}))
    r = subprocess.run([sys.executable, "-m", "hosts.agent", "--spec", str(bad), "--events",
                        str(tmp_path / "e.jsonl")], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 2 and "invalid spec" in r.stderr and "no flows" in r.stderr
    r = subprocess.run([sys.executable, "-m", "hosts.agent", "--spec", str(tmp_path / "none"),
                        "--events", str(tmp_path / "e.jsonl")], cwd=REPO, capture_output=True,
                       text=True)
    assert r.returncode == 2 and "cannot read spec" in r.stderr


def test_messages_on_a_schedule_take_a_free_connection_of_the_pool(tmp_path: Path) -> None:
    """Ten 8 KiB messages over two connections at 40 Mb/s (one takes ~1.8 ms):
    the first four arrive together, so two go at once, two wait for a
    connection; the rest arrive 50 ms apart, each on the connection idle
    longest. Every message lands at its own offset, verified at the end."""
    ip_a, ip_b = _loopback_ips(2)
    arrivals = (0.01, 0.01, 0.01, 0.01, 0.06, 0.11, 0.16, 0.21, 0.26, 0.31)
    common = {"flow": "reqs", "msg_bytes": 8192, "count": 10, "seed": 4, "qps": 2,
              "arrivals_s": arrivals}
    specs = _sender_receiver(ip_a, ip_b, common)
    results = _run_agents(tmp_path, specs)
    assert [rc for rc, _ in results] == [0, 0], results
    ev_a, ev_b = _events(tmp_path / "a.jsonl"), _events(tmp_path / "b.jsonl")
    t0 = next(e for e in ev_a if e["event"] == "start")["t_ns"]
    rx = {e["index"]: e for e in ev_b if e["event"] == "completion"}
    assert sorted(rx) == list(range(10))
    for i, a in enumerate(arrivals):      # none delivered before it arrived
        assert rx[i]["t_ns"] >= t0 + a * 1e9
    tx = {e["index"]: e for e in ev_a if e["event"] == "completion"}
    # the idle gaps alternate the connections: 4 on the one 0 and 2 freed
    assert {tx[4]["qp"], tx[5]["qp"]} == {0, 1} and tx[5]["qp"] != tx[6]["qp"]
    end_a = next(e for e in ev_a if e["event"] == "flow_end")
    end_b = next(e for e in ev_b if e["event"] == "flow_end")
    assert end_a["pool"]["qps"] == 2 and end_a["pool"]["waited"] == 2
    assert end_b["bytes_ok"] is True and end_b["bytes"] == 10 * 8192
    reports = [e for e in ev_a if e["event"] == "pacer_report"]
    assert sorted(e["flow"] for e in reports) == ["reqs.q0", "reqs.q1"]
    assert sum(e["qp"]["tx_pkts"] for e in reports) >= 10 * 8
    assert sorted(e["flow"] for e in ev_b if e["event"] == "qp_report") == ["reqs.q0", "reqs.q1"]


def test_a_pool_of_messages_of_their_own_sizes_lands_each_at_its_offset(tmp_path: Path) -> None:
    """Messages of varying size (msg_sizes: 1 byte to 20 KiB, not whole
    packets) over two connections: each lands at the sum of the sizes before
    it, the receiver's bytes check against the pattern, and the flow's bytes
    are the sizes' sum."""
    ip_a, ip_b = _loopback_ips(2)
    sizes = (3000, 1, 20480, 1024, 777, 9000)
    common = {"flow": "ws", "msg_bytes": max(sizes), "count": len(sizes), "seed": 9, "qps": 2,
              "arrivals_s": (0.01, 0.01, 0.02, 0.03, 0.03, 0.05), "msg_sizes": sizes}
    results = _run_agents(tmp_path, _sender_receiver(ip_a, ip_b, common))
    assert [rc for rc, _ in results] == [0, 0], results
    ev_b = _events(tmp_path / "b.jsonl")
    rx = {e["index"]: e["bytes"] for e in ev_b if e["event"] == "completion"}
    assert rx == dict(enumerate(sizes))
    end_b = next(e for e in ev_b if e["event"] == "flow_end")
    assert end_b["bytes_ok"] is True and end_b["bytes"] == sum(sizes)


def test_scheduled_message_sizes_are_checked() -> None:
    base = {"flow": "f", "peer_ip": "10.0.0.2", "msg_bytes": 1024, "count": 3}
    with pytest.raises(SpecError, match="needs arrivals_s"):
        FlowSpec(role="sender", msg_sizes=(1, 2, 1024), **base)
    with pytest.raises(SpecError, match="3 sizes >= 1"):
        FlowSpec(role="sender", arrivals_s=(0.0, 0.1, 0.2), msg_sizes=(1, 1024), **base)
    with pytest.raises(SpecError, match="largest equal to msg_bytes"):
        FlowSpec(role="sender", arrivals_s=(0.0, 0.1, 0.2), msg_sizes=(1, 2, 3), **base)
    with pytest.raises(SpecError, match="3 sizes >= 1"):
        FlowSpec(role="sender", arrivals_s=(0.0, 0.1, 0.2), msg_sizes=(0, 2, 1024), **base)
    f = FlowSpec(role="receiver", arrivals_s=(0.0, 0.1, 0.2), msg_sizes=[5, 1024, 7],  # type: ignore[arg-type]
                 **base)
    assert f.msg_sizes == (5, 1024, 7) and f.total_bytes == 1036 and f.message_bytes(2) == 7
    js = JobSpec(host="h", ip="10.0.0.1", flows=(f,))
    assert JobSpec.from_json(js.to_json()) == js


def test_scheduled_message_specs_are_checked() -> None:
    base = {"flow": "f", "peer_ip": "10.0.0.2", "msg_bytes": 1024, "count": 3}
    with pytest.raises(SpecError, match="one arrival per message"):
        FlowSpec(role="sender", arrivals_s=(0.0, 0.1), **base)
    with pytest.raises(SpecError, match="non-decreasing"):
        FlowSpec(role="sender", arrivals_s=(0.0, 0.2, 0.1), **base)
    with pytest.raises(SpecError, match="needs arrivals_s"):
        FlowSpec(role="sender", qps=2, **base)
    with pytest.raises(SpecError, match="no flexible"):
        FlowSpec(role="sender", arrivals_s=(0.0, 0.1, 0.2), rate_bps=1e6, **base)
    # JSON lists come back as the tuple
    f = FlowSpec(role="receiver", arrivals_s=[0.0, 0.1, 0.2], qps=3, **base)  # type: ignore[arg-type]
    assert f.arrivals_s == (0.0, 0.1, 0.2)
    js = JobSpec(host="h", ip="10.0.0.1", flows=(f,))
    assert JobSpec.from_json(js.to_json()) == js


def test_an_epic_rank_reports_the_group_qps_that_sent_on_either_provider() -> None:
    """The end-of-collective report has one pacer_report per group QP that sent
    (the AllReduce group's always): the udp provider counts a QP's packets, an
    rxe QP only its work requests, and neither may break the report. On an rxe
    host the device's counters over the phase come first."""
    from types import SimpleNamespace

    from hosts.agent.collective import _Collective

    emitted: list[tuple[str, dict[str, Any]]] = []
    log = SimpleNamespace(emit=lambda ev, **kw: emitted.append((ev, kw)))
    spec = CollectiveSpec(rank=0, size=2, count=64, dtype="int32", scheme="epic",
                          epic={"switch_ip": "10.255.0.1", "qpn": 0x100, "gid": 0})
    device = {"sent_pkts": 9, "rcvd_pkts": 8}
    for stats, shim in (([{"tx_pkts": 5}, {"tx_pkts": 0}, {"tx_pkts": 3}], None),  # udp
                        ([{"send_wrs": 2, "recv_wrs": 2}, {"send_wrs": 0, "recv_wrs": 0},
                          {"send_wrs": 1, "recv_wrs": 0}], SimpleNamespace())):     # rxe
        agent: Any = SimpleNamespace(log=log, qp_stats=lambda qp: dict(qp.stats), shim=shim,
                                     rxe_device_counters=lambda: dict(device))
        worker = object.__new__(_Collective)
        worker.agent, worker.spec = agent, spec
        worker.comm = SimpleNamespace(qps=[SimpleNamespace(stats=s, pacer=None,
                                                           rate_controller=None)
                                           for s in stats])
        emitted.clear()
        worker._report()
        if shim is not None:
            assert emitted.pop(0) == ("device_counters", {"counters": device})
        assert [(ev, kw["flow"]) for ev, kw in emitted] == [
            ("pacer_report", "rank0-epic"), ("pacer_report", "rank0-epic-g2")]
        assert emitted[1][1]["qp"] == stats[2]
