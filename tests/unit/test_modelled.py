"""testbed.modelled: a paper's network in its units, converted once."""

from __future__ import annotations

import dataclasses

import pytest

from experiments import roce_basics
from testbed.experiment import ExperimentError
from testbed.modelled import ModelledNetwork, NetworkError, Red, full_frame_bytes, kbytes, packets

CMD = "table_set_default MyEgress.ecn_config MyEgress.set_ecn_params {kmin} {kmax} {pmax_percent}"


def test_hpcc_thresholds_in_bytes_become_packets_of_the_mtu_in_use() -> None:
    # Symphony follows HPCC: Kmin 50 KB, Kmax 100 KB, Pmax 0.2 at 10 Gb/s, 1 us per hop.
    net = ModelledNetwork(link_gbps=10, slowdown=1000, link_delay_us=1,
                          red=Red(kbytes(50), kbytes(100), 0.2, CMD))
    assert full_frame_bytes(1024) == 1082
    c = net.convert(1024)
    assert (c.kmin_pkts, c.kmax_pkts) == (46, 92)   # 50000 / 1082, 100000 / 1082
    assert c.queue_depth_pkts == 93                  # deep enough for Kmax
    assert c.link_bps == 10e6 and c.link_delay_us == 1000 and c.port_delay_us == 2000
    assert c.commands == ("set_port_rate_bps 10000000", "set_queue_depth 93",
                          CMD.format(kmin=46, kmax=92, pmax_percent=20))
    # a larger MTU: fewer, larger packets for the same bytes
    assert net.convert(4096).kmin_pkts == round(50000 / full_frame_bytes(4096)) == 12
    rec = net.record(1024)
    assert rec["modelled"]["red"] == {"kmin": "50000 B", "kmax": "100000 B", "pmax": 0.2}
    assert rec["modelled"]["base_rtt_us"] == 4
    assert rec["modelled"]["base_rtt_pkts"] == pytest.approx(4 / (1082 * 8 / 1e4))


def test_reflex_packet_counts_stay_packets_and_the_queue_is_as_deep_as_stated() -> None:
    net = ModelledNetwork(link_gbps=25, slowdown=2500, buffer=packets(466),
                          red=Red(packets(65), packets(65), 1.0, CMD))
    c = net.convert(1024)
    assert (c.kmin_pkts, c.kmax_pkts, c.queue_depth_pkts) == (65, 65, 466)
    assert "set_queue_depth 466" in c.commands


def test_impossible_networks_are_clear_errors() -> None:
    with pytest.raises(NetworkError, match="cannot hold RED's kmax 92 packets"):
        ModelledNetwork(link_gbps=10, slowdown=1000, buffer=kbytes(60),
                        red=Red(kbytes(50), kbytes(100), 0.2, CMD)).convert(1024)
    with pytest.raises(NetworkError, match="pmax"):
        Red(packets(1), packets(2), 1.5, CMD)
    with pytest.raises(NetworkError, match="exactly one"):
        from testbed.modelled import Size
        Size(bytes=1, packets=1)
    with pytest.raises(NetworkError, match="link_delay_us"):
        ModelledNetwork(link_gbps=10, slowdown=10, link_delay_us=-1)


def test_a_plan_states_its_network_and_the_runner_applies_it_first() -> None:
    p = dataclasses.replace(roce_basics.Params.quick(), link_delay_us=2.0)
    plan = roce_basics.plan(p)
    cmds = plan.network_commands()
    assert cmds[:2] == ("set_port_rate_bps 4000000", "set_queue_depth 64")
    assert plan.topology.network is not None
    # 2 us x slowdown 10000 = 20 ms per link on the testbed
    assert plan.topology.network.convert(plan.path_mtu()).link_delay_us == 20_000


def test_hosts_with_different_mtus_cannot_share_a_network_in_bytes() -> None:
    p = roce_basics.Params.quick()
    plan = roce_basics.plan(p)
    ph = plan.phases[0]
    h1 = ph.jobs["h1"]
    odd = dataclasses.replace(h1, transport=dataclasses.replace(h1.transport, path_mtu=4096))
    with pytest.raises(ExperimentError, match="different path MTUs"):
        dataclasses.replace(plan, phases=(dataclasses.replace(ph, jobs={**ph.jobs, "h1": odd}),
                                          *plan.phases[1:]))


def test_pfc_thresholds_convert_with_the_buffer_and_must_fit_below_it() -> None:
    from testbed.modelled import Pfc

    net = ModelledNetwork(link_gbps=10, slowdown=2500, buffer=packets(256),
                          red=Red(kbytes(50), kbytes(100), 0.2, CMD),
                          pfc=Pfc(xoff=kbytes(110), xon=kbytes(108)))
    c = net.convert(1024)
    assert (c.pfc_xoff_pkts, c.pfc_xon_pkts) == (102, 100)   # 110000 / 1082, 108000 / 1082
    assert c.commands[-1] == "set_pfc 102 100"
    assert net.record(1024)["modelled"]["pfc"] == {"xoff": "110000 B", "xon": "108000 B"}
    with pytest.raises(NetworkError, match="XON < XOFF < the queue depth 64"):
        ModelledNetwork(link_gbps=10, slowdown=10, buffer=packets(64),
                        pfc=Pfc(xoff=packets(64), xon=packets(8))).convert(1024)
    with pytest.raises(NetworkError, match="XON < XOFF"):
        ModelledNetwork(link_gbps=10, slowdown=10, buffer=packets(64),
                        pfc=Pfc(xoff=packets(8), xon=packets(8))).convert(1024)


def test_symphony_networks_pause_above_red_kmax_only_when_asked() -> None:
    from experiments import symphony_ring

    lossy = symphony_ring.Params.quick()
    assert lossy.network().pfc is None and not lossy.transport().pfc
    assert not any(c.startswith("set_pfc") for c in lossy.conversion.commands)
    lossless = dataclasses.replace(lossy, pfc=True)
    conv = lossless.conversion
    assert lossless.transport().pfc
    assert conv.kmax_pkts is not None and conv.pfc_xoff_pkts is not None
    # ECN acts first: a queue fed by one ingress passes Kmax before it pauses
    assert conv.kmax_pkts < conv.pfc_xoff_pkts < conv.queue_depth_pkts
    assert f"set_pfc {conv.pfc_xoff_pkts} {conv.pfc_xon_pkts}" in conv.commands
