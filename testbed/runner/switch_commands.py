"""A plan's switch lines (simple_switch_CLI syntax) applied through the
controller API of either target (switches.controller): queue settings and
default actions as controller calls, the soft target's extensions as BMv2's
closest settings where it has none (recorded as approximations), every
other line through simple_switch_CLI."""

from __future__ import annotations

from typing import TYPE_CHECKING

from switches.controller.api import Controller, ControllerError
from switches.controller.cli import CliController
from switches.controller.p4runtime import P4RuntimeController
from switches.targets import Target
from testbed.runner.errors import RunError

if TYPE_CHECKING:
    from testbed.runner.records import AppliedCommand

BMV2_RATE_NOTE = ("approximation: BMv2 limits each egress queue in packets per second; "
                  "pps = bit rate / (8 x packet_bytes), exact only for frames of packet_bytes")


def bps_to_pps(bps: float, packet_bytes: int) -> int:
    """The packet rate BMv2's ``set_queue_rate`` needs for ``bps`` with frames
    of ``packet_bytes`` (at least 1 pps). An approximation: BMv2 counts
    packets, so smaller frames get less and larger ones more than ``bps``."""
    if packet_bytes <= 0:
        raise ValueError("packet_bytes must be positive")
    return max(1, round(bps / (8 * packet_bytes)))


def _cli_of(ctl: Controller) -> CliController:
    cli = ctl if isinstance(ctl, CliController) else (
        ctl.cli if isinstance(ctl, P4RuntimeController) else None)
    if cli is None:
        raise ControllerError("this switch has no simple_switch_CLI connection")
    return cli


def _port_prio(words: list[str], verb: str, first: int) -> tuple[int | None, int | None]:
    rest = words[first:]
    if len(rest) > 2:
        raise ControllerError(f"{verb}: too many arguments")
    try:
        vals = [int(w, 0) for w in rest] + [None, None]  # type: ignore[list-item]
    except ValueError:
        raise ControllerError(f"{verb}: port and priority must be numbers") from None
    return vals[0], vals[1]


BMV2_WEIGHTS_NOTE = ("approximation: BMv2 has strict priority only; the highest-weight queue "
                     "is capped at its weighted share of the port rate (packets/s), so the "
                     "others get at least their share, but that queue alone gets no more")


def _priority_weights(ctl: Controller, words: list[str], target: Target, packet_bytes: int,
                      port_rate_bps: float | None) -> AppliedCommand:
    """``set_priority_weights PORT W0 W1 ...`` (or ``PORT strict``): DRR on a
    target that has the verb (the soft one); on BMv2 the closest setting, a
    packets/s cap on the queue with the largest weight at that weight's share
    of the port's rate."""
    if len(words) < 3:
        raise ControllerError("set_priority_weights <port> <w_prio0> <w_prio1> ... | strict")
    try:
        port = int(words[1], 0)
        weights = None if words[2:] == ["strict"] else [int(w) for w in words[2:]]
    except ValueError:
        raise ControllerError("set_priority_weights: port and weights must be numbers") from None
    if weights is not None and (len(weights) < 2 or min(weights) < 1):
        raise ControllerError("set_priority_weights: one positive weight per priority queue")
    rec: AppliedCommand = {"line": " ".join(words)}
    if target.has_verb("set_priority_weights"):
        _cli_of(ctl).execute(rec["line"])
        rec["via"] = "cli"
        return rec
    if weights is None:
        rec["via"] = "none"   # BMv2 is strict priority already
        return rec
    if not port_rate_bps:
        raise ControllerError("set_priority_weights on BMv2 needs an earlier "
                              "set_port_rate_bps for the port (the cap is a share of it)")
    top = max(range(len(weights)), key=lambda i: (weights[i], i))
    bps = port_rate_bps * weights[top] / sum(weights)
    pps = bps_to_pps(bps, packet_bytes)
    ctl.set_queue_rate(pps, port, top)
    rec.update({"via": "set_queue_rate", "port": port, "priority": top, "bps": bps, "pps": pps,
                "note": BMV2_WEIGHTS_NOTE})
    return rec


def _port_rate(applied: list[AppliedCommand], port: int) -> float | None:
    """The last bit rate a plan line gave ``port`` (or every port)."""
    for rec in reversed(applied):
        if rec.get("line", "").split()[:1] == ["set_port_rate_bps"] and rec.get("port") in (
                None, port):
            return float(rec["bps"])
    return None


def apply_switch_command(ctl: Controller, line: str, target: Target, packet_bytes: int,
                         port_rate_bps: float | None = None) -> AppliedCommand:
    """Apply one plan line (simple_switch_CLI syntax) through the switch's
    controller API (switches.controller); what was done, for summary.json.

    Queue settings and default actions (``table_set_default``, values by
    position as in the CLI) are controller calls (P4Runtime where the switch
    speaks it). ``set_port_rate_bps BPS [PORT]`` is the soft target's
    extension: on BMv2 it becomes ``set_queue_rate`` with :func:`bps_to_pps`
    (an approximation, recorded as such). Every other line (table_add,
    register_reset, ...) goes to the switch's simple_switch_CLI, whose
    syntax both targets accept. Raises ControllerError on a rejected
    command."""
    words = line.split()
    if not words:
        return {"line": line, "via": "none"}
    verb = words[0]
    rec: AppliedCommand = {"line": line}
    if verb in ("set_port_rate_bps", "set_queue_rate", "set_queue_depth"):
        if len(words) < 2:
            raise ControllerError(f"{verb}: needs a value")
        try:
            value = int(float(words[1]))
        except ValueError:
            raise ControllerError(f"{verb}: {words[1]!r} is not a number") from None
        port, prio = _port_prio(words, verb, 2)
        if verb == "set_port_rate_bps":
            if prio is not None:
                raise ControllerError("set_port_rate_bps takes a rate and an optional port")
            if target.has_verb("set_port_rate_bps"):
                ctl.set_port_rate_bps(value, port)
                rec.update({"via": "set_port_rate_bps", "bps": value, "port": port})
            else:
                pps = bps_to_pps(value, packet_bytes)
                ctl.set_queue_rate(pps, port)
                rec.update({"via": "set_queue_rate", "bps": value, "pps": pps, "port": port,
                            "packet_bytes": packet_bytes, "note": BMV2_RATE_NOTE})
        else:
            getattr(ctl, verb)(value, port, prio)
            rec["via"] = verb
        return rec
    if verb == "set_priority_weights":
        return _priority_weights(ctl, words, target, packet_bytes, port_rate_bps)
    if verb == "set_pfc" and not target.has_verb("set_pfc"):
        raise ControllerError("set_pfc: priority flow control is a soft-switch extension "
                              "(BMv2's simple_switch has none); run this network on the soft "
                              "target or without PFC")
    if verb == "table_set_default":
        if len(words) < 3:
            raise ControllerError("table_set_default <table> <action> [<value> ...]")
        table, values = words[1], words[3:]
        aname, names = ctl.action_params(table, words[2])
        if len(values) != len(names):
            raise ControllerError(f"action {aname} takes {len(names)} value(s) "
                                  f"({', '.join(names) or 'none'}), got {len(values)}")
        ctl.table_set_default(table, aname, dict(zip(names, values, strict=True)))
        rec["via"] = "table_set_default"
        return rec
    _cli_of(ctl).execute(line)
    rec["via"] = "cli"
    return rec


def _apply_commands(ctl: Controller, lines: tuple[str, ...] | list[str], target: Target,
                    packet_bytes: int, where: str, applied: list[AppliedCommand]) -> None:
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            words = line.split()
            rate = (_port_rate(applied, int(words[1], 0))
                    if words[0] == "set_priority_weights" and len(words) > 1
                    and words[1].isdigit() else None)
            rec = apply_switch_command(ctl, line.strip(), target, packet_bytes, rate)
        except ControllerError as e:
            raise RunError(f"{where}: switch command failed: {line.strip()}: {e}") from e
        applied.append({"where": where, **rec})
