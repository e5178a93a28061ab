"""testbed.symphony: parameters and the job-id allocator, against symphony.p4
running on in-process soft switches (through switches.controller's CLI backend)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from hosts.agent_spec import CollectiveSpec, FlowSpec, JobSpec, TransportSpec
from switches.soft.compiler import compile_program
from switches.soft.control.verbs import ControlPlane
from switches.soft.runtime.switch import SoftSwitch
from switches.targets import SOFT
from testbed.symphony import (
    JobIdAllocator,
    SymphonyError,
    SymphonyParams,
    config_command,
    host_jobs,
    job_commands,
    source_job_commands,
)

P4 = Path(__file__).resolve().parents[2] / "switches" / "p4" / "symphony.p4"
BTH_BYTE4 = 14 + 20 + 8 + 4      # the job id: Ethernet, IPv4, UDP, then BTH byte 4


@pytest.fixture(scope="module")
def program():
    return compile_program(P4)


class Switch:
    def __init__(self, program) -> None:
        self.sw = SoftSwitch(program, now_us=lambda: 0, seed=5)
        self.cp = ControlPlane(self.sw)
        self.ctl = SOFT.cli_controller(execute=self.cp.execute)
        self.cp.execute("table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.0.0/8 => "
                        "00:00:00:00:0a:01 1")
        # k = 1: a packet ahead of step_min with psn >= psn_rec is always marked
        self.cp.execute("table_set_default MyEgress.symphony.config MyEgress.symphony.set_params "
                        "1000000 250000 4000000000 4000000000 8 8")

    def send(self, job: int, step: int, psn: int, src: str = "10.0.0.1") -> bool:
        return self.send_out(job, step, psn, src)[IP].tos & 3 == 3

    def send_out(self, job: int, step: int, psn: int, src: str = "10.0.0.1") -> Ether:
        bth = struct.pack("!BBHB", 0x07, 0, 0xFFFF, job) + (0x11).to_bytes(3, "big") \
            + b"\0" + psn.to_bytes(3, "big")
        frame = bytes(Ether(dst="02:00:00:00:00:00", src="00:00:00:00:00:01")
                      / IP(src=src, dst="10.1.2.3", tos=0x02)
                      / UDP(sport=0xC000 | step, dport=4791, chksum=0)
                      / Raw(bth + b"x" * 16 + b"\0" * 4))
        (_, out), = self.sw.process_sync(0, frame)
        return Ether(out)

    def runs_ahead_marked(self, job: int, src: str = "10.0.0.1") -> bool:
        """Whether the switch tracks ``job``: a step-2 packet after step 1 is marked."""
        self.send(job, 1, 20, src)
        return self.send(job, 2, 40, src)

    def reg(self, name: str, job: int) -> int:
        return self.sw.register(f"MyEgress.symphony.{name}").read(job)


def test_params_scale_times_and_convert_fractions() -> None:
    v = SymphonyParams().switch_values(slowdown=1250)
    assert v == {"k_ppm": 10000, "tau_ppm": 250000, "t_win_us": 125000,
                 "psn_window_us": 125000, "n_warmup": 8, "n_sample": 8}
    assert config_command(SymphonyParams(k=0.1), 2).endswith(
        "set_params 100000 250000 200 200 8 8")


@pytest.mark.parametrize("kw", [{"k": 2.0}, {"k": 1e-9}, {"tau": -0.1}, {"t_win_us": -1},
                                {"n_warmup": -1}])
def test_bad_params_are_refused(kw) -> None:
    with pytest.raises(SymphonyError):
        SymphonyParams(**kw)


def test_window_too_long_for_the_register() -> None:
    with pytest.raises(SymphonyError, match="32 bits"):
        SymphonyParams(t_win_us=1e6).switch_values(slowdown=1e4)


def test_allocate_registers_the_job_on_its_path_only(program) -> None:
    s1, s2 = Switch(program), Switch(program)
    alloc = JobIdAllocator({"s1": s1.ctl, "s2": s2.ctl})
    job = alloc.allocate(["s1"], name="train-a")
    assert job == 1
    assert alloc.jobs == {1: ("train-a", ("s1",))}
    assert s1.runs_ahead_marked(job)
    assert not s2.runs_ahead_marked(job)      # s2 is not on the path: untouched


def test_ids_are_unique_and_reused_after_release(program) -> None:
    s1 = Switch(program)
    alloc = JobIdAllocator({"s1": s1.ctl})
    a, b = alloc.allocate(["s1"]), alloc.allocate(["s1", "s1"])
    assert (a, b) == (1, 2)
    assert s1.runs_ahead_marked(a) and s1.runs_ahead_marked(b)
    alloc.release(a)
    assert not s1.runs_ahead_marked(a)        # unregistered: passes untouched
    assert s1.reg("step_min", a) == 0 and s1.reg("seen", a) == 0
    assert alloc.allocate(["s1"]) == a        # the lowest free id again


def test_allocation_clears_state_left_by_the_previous_owner(program) -> None:
    s1 = Switch(program)
    alloc = JobIdAllocator({"s1": s1.ctl})
    job = alloc.allocate(["s1"])
    s1.send(job, 9000, 50)                    # step_min 9000 in the old job
    alloc.release(job)
    # a stale "seen" state would make step 2 look older than 9000
    s1.sw.register("MyEgress.symphony.seen").write(job, 1)
    s1.sw.register("MyEgress.symphony.step_min").write(job, 9000)
    assert alloc.allocate(["s1"]) == job
    assert s1.runs_ahead_marked(job)
    assert s1.reg("step_min", job) == 1


def test_configure_sets_scaled_params_on_every_switch(program) -> None:
    s1, s2 = Switch(program), Switch(program)
    alloc = JobIdAllocator({"s1": s1.ctl, "s2": s2.ctl})
    alloc.configure(SymphonyParams(k=0.0), slowdown=10)
    job = alloc.allocate(["s1", "s2"])
    assert not s1.runs_ahead_marked(job) and not s2.runs_ahead_marked(job)  # k = 0


def test_allocator_errors_name_the_problem(program) -> None:
    s1 = Switch(program)
    alloc = JobIdAllocator({"s1": s1.ctl})
    with pytest.raises(SymphonyError, match="unknown switch.*s9"):
        alloc.allocate(["s1", "s9"])
    with pytest.raises(SymphonyError, match="empty path"):
        alloc.allocate([])
    with pytest.raises(SymphonyError, match="not allocated"):
        alloc.release(3)
    with pytest.raises(SymphonyError, match="1..255"):
        alloc.release(0)
    for _ in range(255):
        alloc.allocate(["s1"])
    with pytest.raises(SymphonyError, match="all 255 job ids"):
        alloc.allocate(["s1"])
    with pytest.raises(SymphonyError, match="at least one switch"):
        JobIdAllocator({})


def test_job_commands_register_the_job(program) -> None:
    s1 = Switch(program)
    for line in job_commands(4):
        s1.cp.execute(line)
    assert s1.runs_ahead_marked(4) and not s1.runs_ahead_marked(5)
    with pytest.raises(SymphonyError):
        job_commands(0)


def _phase(ips_jobs: dict[str, int]) -> dict[str, JobSpec]:
    t = TransportSpec()
    return {f"h{i}": JobSpec(host=f"h{i}", ip=ip, transport=t,
                             collective=CollectiveSpec(rank=i, size=len(ips_jobs), job_id=job))
            for i, (ip, job) in enumerate(ips_jobs.items())}


def test_source_job_commands_tag_the_untagged_packets_of_a_phases_hosts(program) -> None:
    # rdma_rxe hosts send job id 0: the switch writes their job's id, per phase
    s1 = Switch(program)
    for line in job_commands(4) + job_commands(6):
        s1.cp.execute(line)
    for line in source_job_commands(_phase({"10.0.0.1": 4, "10.0.0.2": 4})):
        s1.cp.execute(line)
    assert bytes(s1.send_out(0, 1, 20))[BTH_BYTE4] == 4     # written by the switch
    assert s1.runs_ahead_marked(0, "10.0.0.2")               # tracked as job 4
    assert not s1.runs_ahead_marked(0, "10.0.0.3")           # no job: untagged
    # the next phase's mapping replaces this one's
    for line in source_job_commands(_phase({"10.0.0.3": 6})):
        s1.cp.execute(line)
    assert bytes(s1.send_out(0, 1, 20))[BTH_BYTE4] == 0
    assert s1.runs_ahead_marked(0, "10.0.0.3")


def test_host_jobs_takes_collectives_and_flows_and_one_job_per_host() -> None:
    t = TransportSpec()
    flows = (FlowSpec(flow="a", role="sender", peer_ip="10.0.0.9", msg_bytes=1024, count=1,
                      job_id=3),)
    jobs = {"h1": JobSpec(host="h1", ip="10.0.0.1", transport=t, flows=flows),
            "h2": JobSpec(host="h2", ip="10.0.0.2", transport=t,
                          flows=(FlowSpec(flow="bg", role="sender", peer_ip="10.0.0.9",
                                          msg_bytes=1024, count=1),))}
    assert host_jobs(jobs) == {"10.0.0.1": 3}          # job 0 (untagged) left out
    both = {"h1": JobSpec(host="h1", ip="10.0.0.1", transport=t, flows=flows,
                          collective=CollectiveSpec(rank=0, size=2, job_id=5))}
    with pytest.raises(SymphonyError, match=r"h1 \(10.0.0.1\) runs jobs \[3, 5\]"):
        host_jobs(both)


def test_a_phase_that_starts_from_no_job_can_be_applied_again(program) -> None:
    """What a phase run again (testbed run --phase-retries) does: the same
    lines a second time. Registered twice without the clear, the job's entry
    is a duplicate; after it, the job is tracked as after the first time, and
    an earlier phase's job no longer is."""
    from testbed.symphony import tracking_cleared

    s = Switch(program)
    for line in job_commands(3):
        s.cp.execute(line)
    with pytest.raises(Exception, match="DUPLICATE_ENTRY|already"):
        for line in job_commands(3):
            s.cp.execute(line)
    phase = [*tracking_cleared(), *job_commands(4)]
    for _ in range(2):
        for line in phase:
            s.cp.execute(line)
    assert s.runs_ahead_marked(4)
    assert not s.runs_ahead_marked(3)
