"""The control line protocol, its client and ``testbed switch-cli`` (no root needed)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from switches.soft.control.client import SwitchClient, SwitchConnectionError, SwitchError
from switches.soft.control.server import CommandFailed, ControlServer
from switches.soft.pcap import PcapWriter, read_pcap
from switches.soft.ports import parse_interface_spec
from testbed.cli import main as cli_main


class Tables:
    """A tiny command executor standing in for a switch's control plane."""

    def __init__(self) -> None:
        self.entries: list[str] = []

    def __call__(self, line: str) -> str:
        verb, *args = line.split()
        if verb == "table_add":
            self.entries.append(" ".join(args))
            return f"Entry has been added with handle {len(self.entries) - 1}"
        if verb == "table_dump":
            return "\n".join([".leading dot", *self.entries, ".OK", ".ERR"])
        if verb == "boom":
            raise RuntimeError("kaput")
        raise CommandFailed(f"Invalid command: {verb}")


@pytest.fixture
def server() -> Iterator[tuple[ControlServer, Tables]]:
    tables = Tables()
    srv = ControlServer(tables, port=0)
    srv.start()
    yield srv, tables
    srv.close()


def test_replies_errors_and_marker_lookalikes(server: tuple[ControlServer, Tables]) -> None:
    srv, tables = server
    with SwitchClient(srv.port) as c:
        assert c.execute("table_add t a 1 => 2") == "Entry has been added with handle 0"
        c.execute("table_add t a 3 => 4")
        # Reply lines that look like end markers come through verbatim.
        assert c.execute("table_dump t").splitlines() == [
            ".leading dot", "t a 1 => 2", "t a 3 => 4", ".OK", ".ERR"]
        with pytest.raises(SwitchError, match="Invalid command: nosuch") as e:
            c.execute("nosuch verb")
        assert e.value.message == "Invalid command: nosuch"
        # An exception inside the executor is an error reply, not a dead server.
        with pytest.raises(SwitchError, match="internal error: RuntimeError: kaput"):
            c.execute("boom")
        assert c.execute("table_add t a 5 => 6").endswith("handle 2")


def test_client_reconnects_after_the_server_dropped_it(
        server: tuple[ControlServer, Tables]) -> None:
    srv, _ = server
    c = SwitchClient(srv.port)
    c.execute("table_add t a 1 => 2")
    assert c._sock is not None
    c._sock.shutdown(socket.SHUT_RDWR)  # as if the connection broke
    assert c.execute("table_add t a 2 => 3").endswith("handle 1")
    c.close()


def test_client_without_server_says_where_it_looked() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(SwitchConnectionError, match=f"127.0.0.1:{port}"):
        SwitchClient(port, timeout=1).execute("table_dump t")


def test_switch_cli_runs_a_file_and_stops_at_the_first_error(
        server: tuple[ControlServer, Tables], tmp_path: Path) -> None:
    srv, tables = server
    f = tmp_path / "cmds.txt"
    f.write_text("# routes\ntable_add t a 1 => 2\n\nbad_verb x\ntable_add t a 3 => 4\n")
    r = CliRunner().invoke(cli_main, ["switch-cli", "--port", str(srv.port), str(f)])
    assert r.exit_code == 1
    assert "handle 0" in r.output
    assert "line 4: bad_verb x" in r.output and "Invalid command: bad_verb" in r.output
    assert tables.entries == ["t a 1 => 2"]
    r = CliRunner().invoke(cli_main, ["switch-cli", "--port", str(srv.port), "-k"],
                           input=f.read_text())
    assert r.exit_code == 1
    assert tables.entries == ["t a 1 => 2", "t a 1 => 2", "t a 3 => 4"]
    r = CliRunner().invoke(cli_main, ["switch-cli", "--port", str(srv.port)],
                           input="table_add t a 9 => 9\n")
    assert r.exit_code == 0 and "handle 3" in r.output


def test_switch_cli_without_switch_exits_2() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = CliRunner().invoke(cli_main, ["switch-cli", "--port", str(port)], input="x\n")
    assert r.exit_code == 2 and "cannot reach" in r.output


def test_pcap_roundtrip(tmp_path: Path) -> None:
    w = PcapWriter(tmp_path / "p.pcap")
    w.write(b"\x01" * 60, ts=1000.25)
    w.write(b"\x02" * 1514, ts=1001.5)
    w.close()
    recs = read_pcap(tmp_path / "p.pcap")
    assert [(round(t, 3), len(d), d[:1]) for t, d in recs] == [
        (1000.25, 60, b"\x01"), (1001.5, 1514, b"\x02")]


@pytest.mark.parametrize("spec,expected", [("1@s1-eth1", (1, "s1-eth1")),
                                           ("510@veth.x@y", (510, "veth.x@y"))])
def test_interface_spec(spec: str, expected: tuple[int, str]) -> None:
    assert parse_interface_spec(spec) == expected


@pytest.mark.parametrize("spec", ["s1-eth1", "x@s1", "1@", "511@s1-eth1"])
def test_bad_interface_spec(spec: str) -> None:
    with pytest.raises(ValueError, match="bad interface spec"):
        parse_interface_spec(spec)


def test_daemon_rejects_a_missing_program(tmp_path: Path) -> None:
    import subprocess
    import sys

    log = tmp_path / "s.log"
    r = subprocess.run([sys.executable, "-m", "switches.soft.daemon", "--program",
                        str(tmp_path / "nope.p4"), "--log", str(log), "-i", "1@lo"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert f"P4 program not found: {tmp_path / 'nope.p4'}" in r.stderr
    assert "P4 program not found" in log.read_text()


def test_daemon_rejects_bad_interface_specs(tmp_path: Path) -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "switches.soft.daemon", "--program", "x.p4",
                        "-i", "1@a", "-i", "1@b"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "the same port number is given twice" in r.stderr
