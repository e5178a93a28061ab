"""simple_switch_CLI verbs for the soft switch.

``ControlPlane(switch).execute(line) -> str`` runs one command and returns
what simple_switch_CLI prints for it (without the trailing newline), or
raises ``CommandError`` naming the offending token. ``run_script(text)``
runs many lines; ``#`` comments and blank lines are ignored. Callers hold
``switch.lock`` around these calls when packets may flow concurrently.

Names (tables, actions, registers, counters, meters) match the full
control-plane name or any unique dot-separated suffix of it. Numbers are
decimal or 0x-hex; a 32-bit value may be an IPv4 address (a.b.c.d), a 48-bit
one a MAC (aa:bb:cc:dd:ee:ff), a 128-bit one an IPv6 address.

Verbs: table_add, table_set_default, table_reset_default, table_modify,
table_delete, table_dump, table_dump_entry, table_num_entries, table_clear,
show_tables, table_show_actions, counter_read, counter_write,
counter_reset, register_read, register_write, register_reset,
meter_array_set_rates, meter_set_rates, meter_get_rates, mc_mgrp_create,
mc_mgrp_destroy, mc_node_create, mc_node_update, mc_node_associate,
mc_node_dissociate, mc_node_destroy, mc_dump, mirroring_add,
mirroring_add_mc, mirroring_delete, mirroring_get, set_queue_depth,
set_queue_rate, set_crc16_parameters, set_crc32_parameters (the name is
a calculation: each hash/checksum call site using crc16_custom or
crc32_custom has its own, named calc, calc_0, calc_1, ... in source order,
as p4c names BMv2's), get_time_elapsed, reset_state, help.
Action profiles and selectors: act_prof_create_member,
act_prof_delete_member, act_prof_modify_member, act_prof_create_group,
act_prof_delete_group, act_prof_add_member_to_group,
act_prof_remove_member_from_group, act_prof_dump_member,
act_prof_dump_group, act_prof_dump, table_indirect_add,
table_indirect_add_with_group, table_indirect_delete, table_indirect_modify,
table_indirect_modify_with_group, table_indirect_set_default,
table_indirect_set_default_with_group, table_indirect_reset_default, and
BMv2's older table-based forms (table_indirect_create_member, ... naming
the table instead of its profile).

Soft-target extensions (BMv2 has no equivalent):
- ``set_port_rate_bps <bps> [<port>]``: line rate of an egress port in bits/s
  (0 = unlimited); without a port, every port.
- ``set_port_delay_us <us> [<port>]``: propagation delay of an egress
  port's link (0 = none); without a port, every port.
- ``set_priority_weights <port> <w_prio0> <w_prio1> ...``: weighted deficit
  round robin among the priority queues of a port instead of strict
  priority (one positive weight per priority queue);
  ``set_priority_weights <port> strict`` goes back to strict priority.
- ``set_pfc <xoff_pkts> <xon_pkts>`` | ``set_pfc off``: priority flow
  control on every port (runtime/pfc.py): an ingress port whose packets
  waiting in egress queues reach xoff (per priority) sends a PFC pause for
  that priority, and an XON at xon; PFC frames arriving are obeyed instead
  of entering the pipeline. Only while the queues are empty.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from switches.soft.runtime.action_profiles import ActionProfile, ActionProfileError
from switches.soft.runtime.externs import MeterError
from switches.soft.runtime.pre import PreError
from switches.soft.runtime.tables import Table, TableError

if TYPE_CHECKING:
    from switches.soft.runtime.switch import SoftSwitch


class CommandError(Exception):
    """A control command was rejected; the message says which token and why."""


# ---------------------------------------------------------------------------
# value parsing and printing


def parse_value(token: str, width: int, what: str = "value") -> int:
    """A number for a ``width``-bit field, as simple_switch_CLI accepts it."""
    nbytes = (width + 7) // 8
    v: int | None = None
    if "." in token and token.count(".") == 3 and ":" not in token:
        parts = token.split(".")
        try:
            bs = [int(p) for p in parts]
        except ValueError:
            raise CommandError(f"Invalid IPv4 address '{token}' for {what}") from None
        if any(not 0 <= b <= 255 for b in bs):
            raise CommandError(f"Invalid IPv4 address '{token}' for {what}")
        v = int.from_bytes(bytes(bs), "big")
    elif ":" in token:
        parts = token.split(":")
        if len(parts) == 6 and all(1 <= len(p) <= 2 for p in parts):
            try:
                v = int.from_bytes(bytes(int(p, 16) for p in parts), "big")
            except ValueError:
                raise CommandError(f"Invalid MAC address '{token}' for {what}") from None
        else:
            try:
                v = int(ipaddress.IPv6Address(token))
            except ValueError:
                raise CommandError(f"Invalid address '{token}' for {what}") from None
    else:
        try:
            v = int(token, 0)
        except ValueError:
            raise CommandError(f"Invalid {what} '{token}': not an integer "
                               "(decimal, or hex with 0x prefix)") from None
    if v < 0:
        raise CommandError(f"Invalid {what} '{token}': negative")
    if v >= 1 << (8 * nbytes):
        raise CommandError(f"Invalid {what} '{token}': too large for {width} bits")
    return v & ((1 << width) - 1)


def _bytes_of(v: int, width: int) -> bytes:
    return int(v).to_bytes(max(1, (width + 7) // 8), "big")


def _colon(v: int, width: int) -> str:
    return ":".join(f"{b:02x}" for b in _bytes_of(v, width))


def _hexstr(v: int, width: int) -> str:
    return _bytes_of(v, width).hex()


def _parse_int(token: str, what: str) -> int:
    try:
        return int(token, 0)
    except ValueError:
        raise CommandError(f"Bad format for {what} '{token}', expected integer") from None


def _parse_nonneg(token: str, what: str) -> int:
    v = _parse_int(token, what)
    if v < 0:
        raise CommandError(f"Bad value for {what} '{token}', must be >= 0")
    return v


def resolve(names: Iterable[str], wanted: str, what: str) -> str:
    """Full name, or the unique name having ``wanted`` as a dot-separated suffix."""
    names = list(names)
    if wanted in names:
        return wanted
    cands = [n for n in names if n.endswith("." + wanted)]
    if len(cands) == 1:
        return cands[0]
    if len(cands) > 1:
        raise CommandError(f"Ambiguous {what} name '{wanted}': {', '.join(sorted(cands))}")
    raise CommandError(f"Invalid {what} name ({wanted})")


def _port_map(ports: list[int]) -> str:
    if not ports:
        return ""
    top = max(ports)
    bits = ["1" if p in ports else "0" for p in range(top + 1)]
    return "".join(reversed(bits))


# ---------------------------------------------------------------------------


class ControlPlane:
    def __init__(self, switch: SoftSwitch) -> None:
        self.sw = switch
        self._verbs: dict[str, Callable[[list[str]], str]] = {
            name[3:]: getattr(self, name) for name in dir(self) if name.startswith("do_")
        }

    # -- entry points ---------------------------------------------------------
    def execute(self, line: str) -> str:
        line = line.split("#", 1)[0].strip()
        if not line:
            return ""
        words = line.split()
        verb, args = words[0], words[1:]
        fn = self._verbs.get(verb)
        if fn is None:
            raise CommandError(f"Unknown command '{verb}' (try 'help')")
        try:
            return fn(args)
        except (TableError, ActionProfileError) as e:
            raise CommandError(f"Invalid table operation ({e.code})"
                               + (f": {e.detail}" if e.detail else "")) from None
        except PreError as e:
            raise CommandError(f"Invalid PRE operation ({e.code})"
                               + (f": {e.detail}" if e.detail else "")) from None
        except MeterError as e:
            raise CommandError(f"Invalid meter operation ({e})") from None
        except ValueError as e:  # traffic-manager settings out of range
            raise CommandError(str(e)) from None

    def run_script(self, text: str) -> list[str]:
        """Run every line; stops at the first error (raised as CommandError
        with the line number)."""
        outs = []
        for n, line in enumerate(text.splitlines(), 1):
            try:
                out = self.execute(line)
            except CommandError as e:
                raise CommandError(f"line {n}: {e}") from None
            if line.split("#", 1)[0].strip():
                outs.append(out)
        return outs

    # -- helpers ---------------------------------------------------------------
    @staticmethod
    def _nargs(args: list[str], n: int, usage: str) -> None:
        if len(args) != n:
            raise CommandError(f"Wrong number of args, expected {n} but got {len(args)} "
                               f"(usage: {usage})")

    @staticmethod
    def _minargs(args: list[str], n: int, usage: str) -> None:
        if len(args) < n:
            raise CommandError(f"Insufficient number of args (usage: {usage})")

    def _table(self, name: str) -> Table:
        return self.sw.tables[resolve(self.sw.tables, name, "table")]

    def _action(self, table: Table, name: str) -> str:
        acts = table.info.actions
        if name in acts:
            return name
        cands = [a for a in acts if a.endswith("." + name)]
        if len(cands) == 1:
            return cands[0]
        raise CommandError(f"Table {table.name} has no action {name}")

    def _action_args(self, action: str, tokens: list[str]) -> list[int]:
        ainfo = self.sw.info.actions.get(action)
        params = ainfo.params if ainfo is not None else []
        if len(tokens) != len(params):
            raise CommandError(f"Action {action} needs {len(params)} parameters, got "
                               f"{len(tokens)}")
        return [parse_value(t, p.width, f"parameter {p.name}") for t, p in zip(tokens, params, strict=False)]

    def _match(self, table: Table, tokens: list[str]) -> list[Any]:
        if len(tokens) != len(table.keys):
            raise CommandError(f"Table {table.name} needs {len(table.keys)} key fields, got "
                               f"{len(tokens)}")
        out: list[Any] = []
        for tok, k in zip(tokens, table.keys, strict=False):
            w = k.width
            what = f"key {k.name}"
            kind = k.match_kind
            if kind in ("exact", "selector"):
                out.append(parse_value(tok, w, what))
            elif kind == "lpm":
                if "/" not in tok:
                    raise CommandError(f"Invalid LPM value {tok} for {k.name}, use '/' to "
                                       "separate prefix and length")
                v, plen = tok.split("/", 1)
                pl = _parse_int(plen, f"prefix length of {k.name}")
                if not 0 <= pl <= w:
                    raise CommandError(f"Invalid prefix length {pl} for {w}-bit key {k.name}")
                out.append((parse_value(v, w, what), pl))
            elif kind in ("ternary", "optional"):
                if "&&&" in tok:
                    v, m = tok.split("&&&", 1)
                    out.append((parse_value(v, w, what), parse_value(m, w, f"mask of {k.name}")))
                elif kind == "optional":
                    if tok in ("*", "_"):
                        out.append((0, 0))
                    else:
                        out.append((parse_value(tok, w, what), (1 << w) - 1))
                else:
                    raise CommandError(f"Invalid ternary value {tok} for {k.name}, use '&&&' to "
                                       "separate key and mask")
            elif kind == "range":
                if "->" not in tok:
                    raise CommandError(f"Invalid range value {tok} for {k.name}, use '->' to "
                                       "separate range start and range end")
                lo, hi = tok.split("->", 1)
                lo_v, hi_v = parse_value(lo, w, what), parse_value(hi, w, what)
                if lo_v > hi_v:
                    raise CommandError(f"Invalid range {tok} for {k.name}: start above end")
                out.append((lo_v, hi_v))
            else:
                raise CommandError(f"Unsupported match kind {kind} for {k.name}")
        return out

    @staticmethod
    def _key_str(table: Table, matches: list[Any]) -> str:
        parts = []
        for m, k in zip(matches, table.keys, strict=False):
            w = k.width
            kind = k.match_kind
            if kind == "lpm":
                parts.append(f"LPM-{_colon(m[0], w)}/{m[1]}")
            elif kind in ("ternary", "optional"):
                parts.append(f"TERNARY-{_colon(m[0], w)} &&& {_colon(m[1], w)}")
            elif kind == "range":
                parts.append(f"RANGE-{_colon(m[0], w)} -> {_colon(m[1], w)}")
            else:
                parts.append(f"EXACT-{_colon(m, w)}")
        return "\t".join(parts)

    def _data_str(self, action: str, args: Iterable[int], sep: str = "\t",
                  fmt: Callable[[int, int], str] = _colon) -> str:
        ainfo = self.sw.info.actions.get(action)
        params = ainfo.params if ainfo is not None else []
        return sep.join(fmt(a, p.width) for a, p in zip(args, params, strict=False))

    # -- tables -----------------------------------------------------------------
    def do_table_add(self, args: list[str]) -> str:
        usage = "table_add <table> <action> <match fields> => <action parameters> [priority]"
        self._minargs(args, 2, usage)
        tname, aname = args[0], args[1]
        table = self._table(tname)
        action = self._action(table, aname)
        rest = args[2:]
        priority = None
        if table.needs_priority:
            if not rest or rest[-1] == "=>":
                raise CommandError("Table is ternary, but could not extract a valid priority "
                                   "from args")
            try:
                priority = int(rest[-1], 0)
            except ValueError:
                raise CommandError(f"Table is ternary, but could not extract a valid priority "
                                   f"from args (last token '{rest[-1]}')") from None
            rest = rest[:-1]
        if "=>" in rest:
            i = rest.index("=>")
            keys, params = rest[:i], rest[i + 1:]
        else:
            keys, params = rest, []
        values = self._action_args(action, params)
        matches = self._match(table, keys)
        handle = table.add_entry(matches, action, values, priority)
        e = table.get_entry(handle)
        return "\n".join([
            f"Adding entry to {table.match_type} match table {tname}",
            "{:20} {}".format("match key:", self._key_str(table, e.matches)),
            "{:20} {}".format("action:", aname),
            "{:20} {}".format("runtime data:", self._data_str(action, values)),
            f"Entry has been added with handle {handle}",
        ])

    def do_table_set_default(self, args: list[str]) -> str:
        usage = "table_set_default <table> <action> <action parameters>"
        self._minargs(args, 2, usage)
        tname, aname = args[0], args[1]
        table = self._table(tname)
        action = self._action(table, aname)
        params = [a for a in args[2:] if a != "=>"]
        values = self._action_args(action, params)
        table.set_default(action, values)
        return "\n".join([
            f"Setting default action of {tname}",
            "{:20} {}".format("action:", aname),
            "{:20} {}".format("runtime data:", self._data_str(action, values)),
        ])

    def do_table_reset_default(self, args: list[str]) -> str:
        self._nargs(args, 1, "table_reset_default <table>")
        self._table(args[0]).reset_default()
        return ""

    def do_table_modify(self, args: list[str]) -> str:
        usage = "table_modify <table> <action> <entry handle> [action parameters]"
        self._minargs(args, 3, usage)
        tname, aname = args[0], args[1]
        table = self._table(tname)
        action = self._action(table, aname)
        handle = _parse_int(args[2], "entry handle")
        params = args[3:]
        if params and params[0] == "=>":
            params = params[1:]
        values = self._action_args(action, params)
        table.modify_entry(handle, action, values)
        return f"Modifying entry {handle} for {table.match_type} match table {tname}"

    def do_table_delete(self, args: list[str]) -> str:
        self._nargs(args, 2, "table_delete <table> <entry handle>")
        table = self._table(args[0])
        handle = _parse_int(args[1], "entry handle")
        table.delete_entry(handle)
        return f"Deleting entry {handle} from {args[0]}"

    def do_table_num_entries(self, args: list[str]) -> str:
        self._nargs(args, 1, "table_num_entries <table>")
        return str(self._table(args[0]).num_entries())

    def do_table_clear(self, args: list[str]) -> str:
        self._nargs(args, 1, "table_clear <table>")
        self._table(args[0]).clear()
        return ""

    def _dump_entry(self, table: Table, e: Any) -> list[str]:
        w = max([20] + [len(k.name) for k in table.keys])
        lines = [f"Dumping entry {hex(e.handle)}", "Match key:"]
        for m, k in zip(e.matches, table.keys, strict=False):
            kw = k.width
            kind = k.match_kind
            if kind == "lpm":
                t, s = "LPM", f"{_hexstr(m[0], kw)}/{m[1]}"
            elif kind in ("ternary", "optional"):
                t, s = "TERNARY", f"{_hexstr(m[0], kw)} &&& {_hexstr(m[1], kw)}"
            elif kind == "range":
                t, s = "RANGE", f"{_hexstr(m[0], kw)} -> {_hexstr(m[1], kw)}"
            else:
                t, s = "EXACT", _hexstr(m, kw)
            lines.append("* {0:{w}}: {1:10}{2}".format(k.name, t, s, w=w))
        if e.priority >= 0:
            lines.append(f"Priority: {e.priority}")
        if e.group is not None:
            lines.append(f"Index: group({e.group})")
        elif e.member is not None:
            lines.append(f"Index: member({e.member})")
        else:
            lines.append(f"Action entry: {e.action} - "
                         + self._data_str(e.action, e.args, ", ", _hexstr))
        return lines

    def do_table_dump(self, args: list[str]) -> str:
        self._nargs(args, 1, "table_dump <table>")
        table = self._table(args[0])
        lines = ["==========", "TABLE ENTRIES"]
        for e in table.sorted_entries():
            lines.append("**********")
            lines.extend(self._dump_entry(table, e))
        lines += ["==========", "Dumping default entry",
                  f"Action entry: {table.default_action} - "
                  + self._data_str(table.default_action, table.default_args, ", ", _hexstr),
                  "=========="]
        return "\n".join(lines)

    def do_table_dump_entry(self, args: list[str]) -> str:
        self._nargs(args, 2, "table_dump_entry <table> <entry handle>")
        table = self._table(args[0])
        e = table.get_entry(_parse_int(args[1], "entry handle"))
        return "\n".join(self._dump_entry(table, e))

    def do_show_tables(self, args: list[str]) -> str:
        lines = []
        for name, t in sorted(self.sw.tables.items()):
            mk = ",\t".join(f"{k.name}({k.match_kind}, {k.width})" for k in t.keys)
            lines.append(f"{name:30} [implementation={t.info.implementation}, mk={mk}]")
        return "\n".join(lines)

    def do_table_show_actions(self, args: list[str]) -> str:
        self._nargs(args, 1, "table_show_actions <table>")
        table = self._table(args[0])
        lines = []
        for a in table.info.actions:
            ainfo = self.sw.info.actions.get(a)
            params = ",\t".join(f"{p.name}({p.width})" for p in (ainfo.params if ainfo else []))
            lines.append(f"{a:30} [{params}]")
        return "\n".join(lines)

    # -- counters -----------------------------------------------------------------
    def _direct_entry(self, table_name: str, handle: int, what: str) -> tuple[Table, Any]:
        """The table entry that holds a direct counter/meter cell."""
        table = self.sw.tables[table_name]
        try:
            return table, table.get_entry(handle)
        except TableError:
            raise CommandError(f"Invalid {what} operation (INVALID_ENTRY_HANDLE): no entry "
                               f"{handle} in table {table.name}") from None

    def _counter_name(self, name: str) -> str:
        return resolve(self.sw.info.counters, name, "counter")

    def do_counter_read(self, args: list[str]) -> str:
        self._nargs(args, 2, "counter_read <name> <index>")
        full = self._counter_name(args[0])
        idx = _parse_int(args[1], "index")
        cinfo = self.sw.info.counters[full]
        if cinfo.direct_table:
            table, e = self._direct_entry(cinfo.direct_table, idx, "counter")
            return (f"this is the direct counter for table {table.name}\n"
                    f"{args[0]}[{idx}]= ({e.bytes} bytes, {e.packets} packets)")
        c = self.sw.counters[full]
        try:
            b, p = c.read(idx)
        except IndexError:
            raise CommandError(f"Invalid counter operation (INVALID_INDEX): index {idx} out of "
                               f"range 0..{c.size - 1} for {full}") from None
        return f"{args[0]}[{idx}]= ({b} bytes, {p} packets)"

    def do_counter_write(self, args: list[str]) -> str:
        self._nargs(args, 4, "counter_write <name> <index> <packets> <bytes>")
        full = self._counter_name(args[0])
        idx = _parse_int(args[1], "index")
        pk = _parse_nonneg(args[2], "packets")
        by = _parse_nonneg(args[3], "bytes")
        cinfo = self.sw.info.counters[full]
        pre = ""
        if cinfo.direct_table:
            table, e = self._direct_entry(cinfo.direct_table, idx, "counter")
            e.packets, e.bytes = pk, by
            pre = f"writing to direct counter for table {table.name}\n"
        else:
            try:
                self.sw.counters[full].write(idx, pk, by)
            except IndexError:
                raise CommandError(f"Invalid counter operation (INVALID_INDEX): index {idx} "
                                   f"out of range for {full}") from None
        return f"{pre}{args[0]}[{idx}] has been updated"

    def do_counter_reset(self, args: list[str]) -> str:
        self._nargs(args, 1, "counter_reset <name>")
        full = self._counter_name(args[0])
        cinfo = self.sw.info.counters[full]
        if cinfo.direct_table:
            table = self.sw.tables[cinfo.direct_table]
            table.reset_counters()
            return f"this is the direct counter for table {table.name}"
        self.sw.counters[full].reset()
        return ""

    # -- registers ----------------------------------------------------------------
    def _register(self, name: str) -> Any:
        return self.sw.registers[resolve(self.sw.registers, name, "register")]

    @staticmethod
    def _register_index(reg: Any, token: str) -> int:
        idx = _parse_int(token, "index")
        if not 0 <= idx < reg.size:
            raise CommandError(f"Invalid register operation (ERROR): index {idx} out of range "
                               f"0..{reg.size - 1} for {reg.name}")
        return idx

    def do_register_read(self, args: list[str]) -> str:
        usage = "register_read <name> [index]"
        self._minargs(args, 1, usage)
        if len(args) > 2:
            self._nargs(args, 2, usage)
        reg = self._register(args[0])
        if len(args) == 2:
            idx = self._register_index(reg, args[1])
            return f"{args[0]}[{idx}]= {reg.values[idx]}"
        return f"{args[0]}= " + ", ".join(str(v) for v in reg.values)

    def do_register_write(self, args: list[str]) -> str:
        self._nargs(args, 3, "register_write <name> <index> <value>")
        reg = self._register(args[0])
        idx = self._register_index(reg, args[1])
        val = _parse_int(args[2], "value")
        reg.write(idx, val)
        return ""

    def do_register_reset(self, args: list[str]) -> str:
        self._nargs(args, 1, "register_reset <name>")
        self._register(args[0]).reset()
        return ""

    # -- meters -----------------------------------------------------------------
    def _meter_name(self, name: str) -> str:
        return resolve(self.sw.info.meters, name, "meter")

    @staticmethod
    def _rates(tokens: list[str]) -> list[tuple[float, int]]:
        if len(tokens) != 2:
            raise CommandError(f"Invalid number of rates, expected 2 but got {len(tokens)}")
        out = []
        for t in tokens:
            try:
                r, b = t.split(":")
                out.append((float(r), int(b)))
            except ValueError:
                raise CommandError(f"Error while parsing rates: '{t}' is not "
                                   "<rate>:<burst>") from None
        return out

    def _meter_obj(self, full: str, idx: int) -> Any:
        minfo = self.sw.info.meters[full]
        if minfo.direct_table:
            return self._direct_entry(minfo.direct_table, idx, "meter")[1].meter
        arr = self.sw.meters[full]
        if not 0 <= idx < arr.size:
            raise CommandError(f"Invalid meter operation (INVALID_INDEX): index {idx} out of "
                               f"range 0..{arr.size - 1} for {full}")
        return arr.meters[idx]

    def do_meter_array_set_rates(self, args: list[str]) -> str:
        self._minargs(args, 1, "meter_array_set_rates <name> <rate_1>:<burst_1> <rate_2>:<burst_2>")
        full = self._meter_name(args[0])
        rates = self._rates(args[1:])
        direct = self.sw.info.meters[full].direct_table
        if direct:
            for e in self.sw.tables[direct].entries.values():
                if e.meter is not None:
                    e.meter.set_rates(rates)
        else:
            self.sw.meters[full].set_all_rates(rates)
        return ""

    def do_meter_set_rates(self, args: list[str]) -> str:
        self._minargs(args, 2,
                      "meter_set_rates <name> <index> <rate_1>:<burst_1> <rate_2>:<burst_2>")
        full = self._meter_name(args[0])
        idx = _parse_int(args[1], "index")
        rates = self._rates(args[2:])
        self._meter_obj(full, idx).set_rates(rates)
        return ""

    def do_meter_get_rates(self, args: list[str]) -> str:
        self._nargs(args, 2, "meter_get_rates <name> <index>")
        full = self._meter_name(args[0])
        idx = _parse_int(args[1], "index")
        m = self._meter_obj(full, idx)
        lines = []
        if len(m.rates) != 2:
            lines.append(f"WARNING: expected 2 rates but only received {len(m.rates)}")
        for i, (r, b) in enumerate(m.rates):
            lines.append(f"{i}: info rate = {r}, burst size = {b}")
        return "\n".join(lines)

    # -- PRE --------------------------------------------------------------------
    def do_mc_mgrp_create(self, args: list[str]) -> str:
        self._nargs(args, 1, "mc_mgrp_create <group id>")
        mgid = _parse_int(args[0], "multicast group id")
        self.sw.pre.mgrp_create(mgid)
        return f"Creating multicast group {mgid}"

    def do_mc_mgrp_destroy(self, args: list[str]) -> str:
        self._nargs(args, 1, "mc_mgrp_destroy <group id>")
        mgid = _parse_int(args[0], "multicast group id")
        self.sw.pre.mgrp_destroy(mgid)
        return f"Destroying multicast group {mgid}"

    @staticmethod
    def _ports(tokens: list[str]) -> list[int]:
        if "|" in tokens:  # LAG lists are accepted and ignored (no LAGs here)
            tokens = tokens[:tokens.index("|")]
        ports = []
        for t in tokens:
            try:
                p = int(t)
            except ValueError:
                raise CommandError(f"'{t}' is not a valid port number") from None
            if p < 0:
                raise CommandError(f"'{t}' is not a valid port number")
            if p in ports:
                raise CommandError(f"Found duplicate port number '{p}'")
            ports.append(p)
        return ports

    def do_mc_node_create(self, args: list[str]) -> str:
        self._minargs(args, 1, "mc_node_create <rid> <port list>")
        rid = _parse_int(args[0], "rid")
        ports = self._ports(args[1:])
        h = self.sw.pre.node_create(rid, ports)
        return (f"Creating node with rid {rid} , port map {_port_map(ports)} and lag map \n"
                f"node was created with handle {h}")

    def do_mc_node_update(self, args: list[str]) -> str:
        self._minargs(args, 1, "mc_node_update <node handle> <port list>")
        h = _parse_int(args[0], "node handle")
        ports = self._ports(args[1:])
        self.sw.pre.node_update(h, ports)
        return f"Updating node {h} with port map {_port_map(ports)} and lag map "

    def _group_and_node(self, args: list[str], verb: str) -> tuple[int, int]:
        """``verb <group id> <node handle>``'s two numbers."""
        self._nargs(args, 2, f"{verb} <group id> <node handle>")
        return _parse_int(args[0], "multicast group id"), _parse_int(args[1], "node handle")

    def do_mc_node_associate(self, args: list[str]) -> str:
        mgid, h = self._group_and_node(args, "mc_node_associate")
        self.sw.pre.node_associate(mgid, h)
        return f"Associating node {h} to multicast group {mgid}"

    def do_mc_node_dissociate(self, args: list[str]) -> str:
        mgid, h = self._group_and_node(args, "mc_node_dissociate")
        self.sw.pre.node_dissociate(mgid, h)
        return f"Dissociating node {h} from multicast group {mgid}"

    def do_mc_node_destroy(self, args: list[str]) -> str:
        self._nargs(args, 1, "mc_node_destroy <node handle>")
        h = _parse_int(args[0], "node handle")
        self.sw.pre.node_destroy(h)
        return f"Destroying node {h}"

    def do_mc_dump(self, args: list[str]) -> str:
        pre = self.sw.pre
        lines = ["==========", "MC ENTRIES"]
        for mgid in sorted(pre.groups):
            lines.append("**********")
            lines.append(f"mgrp({mgid})")
            for h in pre.groups[mgid].nodes:
                node = pre.nodes[h]
                lines.append(f"  -> (L1h={h}, rid={node.rid}) -> (ports=["
                             + ", ".join(str(p) for p in node.ports) + "], lags=[])")
        lines += ["==========", "LAGS", "=========="]
        return "\n".join(lines)

    # -- mirroring ------------------------------------------------------------------
    def do_mirroring_add(self, args: list[str]) -> str:
        self._nargs(args, 2, "mirroring_add <mirror_id> <egress_port>")
        sid = _parse_int(args[0], "mirror_id")
        port = _parse_nonneg(args[1], "egress_port")
        self._mirror_call(lambda: self.sw.mirrors.add(sid, port=port))
        return ""

    def do_mirroring_add_mc(self, args: list[str]) -> str:
        self._nargs(args, 2, "mirroring_add_mc <mirror_id> <mgrp>")
        sid = _parse_int(args[0], "mirror_id")
        mgid = _parse_nonneg(args[1], "mgrp")
        self._mirror_call(lambda: self.sw.mirrors.add(sid, mgid=mgid))
        return ""

    def do_mirroring_delete(self, args: list[str]) -> str:
        self._nargs(args, 1, "mirroring_delete <mirror_id>")
        sid = _parse_int(args[0], "mirror_id")
        self._mirror_call(lambda: self.sw.mirrors.delete(sid))
        return ""

    def do_mirroring_get(self, args: list[str]) -> str:
        self._nargs(args, 1, "mirroring_get <mirror_id>")
        sid = _parse_int(args[0], "mirror_id")
        s = self.sw.mirrors.get(sid)
        if s is None:
            raise CommandError(f"Invalid mirroring operation (SESSION_NOT_FOUND): no session {sid}")
        return f"MirroringSessionConfig(port={s.port}, mgid={s.mgid})"

    @staticmethod
    def _mirror_call(fn: Callable[[], None]) -> None:
        try:
            fn()
        except PreError as e:
            raise CommandError(f"Invalid mirroring operation ({e.code}): {e.detail}") from None

    # -- traffic manager --------------------------------------------------------------
    def _port_prio(self, args: list[str]) -> tuple[int | None, int | None]:
        port = _parse_nonneg(args[1], "egress_port") if len(args) > 1 else None
        prio = _parse_nonneg(args[2], "priority") if len(args) > 2 else None
        if prio is not None and prio >= self.sw.priority_queues:
            raise CommandError(f"Invalid priority '{args[2]}': the switch has "
                               f"{self.sw.priority_queues} priority queue(s) per port")
        return port, prio

    def _queue_setting(self, args: list[str], verb: str, what: str,
                       setter: Callable[[int, int | None, int | None], None]) -> str:
        usage = f"{verb} <{what}> [<egress_port> [<priority>]]"
        self._minargs(args, 1, usage)
        if len(args) > 3:
            raise CommandError(f"Too many args (usage: {usage})")
        value = _parse_nonneg(args[0], what)
        port, prio = self._port_prio(args)
        setter(value, port, prio)
        return ""

    def do_set_queue_depth(self, args: list[str]) -> str:
        return self._queue_setting(args, "set_queue_depth", "nb_pkts", self.sw.tm.set_depth)

    def do_set_queue_rate(self, args: list[str]) -> str:
        return self._queue_setting(args, "set_queue_rate", "rate_pps", self.sw.tm.set_rate)

    def _port_setting(self, args: list[str], verb: str, what: str,
                      setter: Callable[[int, int | None], None]) -> str:
        """``verb <what> [<egress_port>]``: ``setter(value, port)``, every
        port without one."""
        usage = f"{verb} <{what}> [<egress_port>]  (soft-target extension)"
        self._minargs(args, 1, usage)
        if len(args) > 2:
            raise CommandError(f"Too many args (usage: {usage})")
        value = _parse_nonneg(args[0], what)
        port = _parse_nonneg(args[1], "egress_port") if len(args) > 1 else None
        setter(value, port)
        return ""

    def do_set_port_rate_bps(self, args: list[str]) -> str:
        return self._port_setting(args, "set_port_rate_bps", "bps", self.sw.tm.set_port_rate_bps)

    def do_set_port_delay_us(self, args: list[str]) -> str:
        return self._port_setting(args, "set_port_delay_us", "microseconds",
                                  self.sw.tm.set_port_delay_us)

    def do_set_pfc(self, args: list[str]) -> str:
        usage = "set_pfc <xoff_pkts> <xon_pkts> | set_pfc off  (soft-target extension)"
        if args == ["off"]:
            self.sw.set_pfc(None)
            return ""
        if len(args) != 2:
            raise CommandError(f"set_pfc takes 2 args (usage: {usage})")
        xoff = _parse_nonneg(args[0], "xoff_pkts")
        xon = _parse_nonneg(args[1], "xon_pkts")
        try:
            self.sw.set_pfc(xoff, xon)
        except ValueError as e:
            raise CommandError(f"set_pfc: {e}") from None
        return ""

    def do_set_priority_weights(self, args: list[str]) -> str:
        nq = self.sw.priority_queues
        usage = (f"set_priority_weights <egress_port> <w_prio0> ... <w_prio{nq - 1}> | "
                 "set_priority_weights <egress_port> strict  (soft-target extension)")
        self._minargs(args, 2, usage)
        port = _parse_nonneg(args[0], "egress_port")
        if args[1:] == ["strict"]:
            self.sw.tm.set_priority_weights(port, None)
            return ""
        ws = [_parse_int(a, "weight") for a in args[1:]]
        if len(ws) != nq:
            raise CommandError(f"Expected {nq} weights (one per priority queue), got {len(ws)} "
                               f"(usage: {usage})")
        for tok, w in zip(args[1:], ws, strict=False):
            if w < 1:
                raise CommandError(f"Invalid weight '{tok}': weights must be positive integers")
        self.sw.tm.set_priority_weights(port, ws)
        return ""

    # -- action profiles and selectors (runtime_CLI.py's act_prof_* and
    # table_indirect_* verbs; the table-based forms name the table's profile)
    def _profile(self, name: str) -> ActionProfile:
        return self.sw.action_profiles[resolve(self.sw.action_profiles, name,
                                               "action profile")]

    def _profile_of_table(self, name: str) -> ActionProfile:
        t = self._table(name)
        if t.profile is None:
            raise CommandError("Cannot run this command on non-indirect table")
        return t.profile

    def _indirect_table(self, name: str, ws: bool) -> Table:
        t = self._table(name)
        if t.profile is None or (ws and not t.profile.with_selector):
            raise CommandError("Cannot run this command on non-indirect table"
                               + (", or on indirect table with no selector" if ws else ""))
        return t

    def _selector(self, prof: ActionProfile) -> None:
        if not prof.with_selector:
            raise CommandError("Cannot run this command on an action profile without selector")

    def _profile_action(self, prof: ActionProfile, name: str) -> str:
        acts = prof.info.actions
        if name in acts:
            return name
        cands = [a for a in acts if a.endswith("." + name)]
        if len(cands) == 1:
            return cands[0]
        raise CommandError(f"Action profile '{prof.name}' has no action '{name}'")

    @staticmethod
    def _handle(tok: str, what: str) -> int:
        try:
            return int(tok, 0)
        except ValueError:
            raise CommandError(f"Bad format for {what} handle") from None

    def _create_member(self, prof: ActionProfile, aname: str, params: list[str]) -> str:
        action = self._profile_action(prof, aname)
        values = self._action_args(action, [p for p in params if p != "=>"])
        return f"Member has been created with handle {prof.add_member(action, values)}"

    def do_act_prof_create_member(self, args: list[str]) -> str:
        self._minargs(args, 2, _HELP["act_prof_create_member"])
        return self._create_member(self._profile(args[0]), args[1], args[2:])

    def do_table_indirect_create_member(self, args: list[str]) -> str:
        self._minargs(args, 2, _HELP["table_indirect_create_member"])
        return self._create_member(self._profile_of_table(args[0]), args[1], args[2:])

    def do_act_prof_delete_member(self, args: list[str]) -> str:
        self._nargs(args, 2, _HELP["act_prof_delete_member"])
        self._profile(args[0]).delete_member(self._handle(args[1], "member"))
        return ""

    def do_table_indirect_delete_member(self, args: list[str]) -> str:
        self._nargs(args, 2, _HELP["table_indirect_delete_member"])
        self._profile_of_table(args[0]).delete_member(self._handle(args[1], "member"))
        return ""

    def _modify_member(self, prof: ActionProfile, args: list[str]) -> str:
        action = self._profile_action(prof, args[1])
        values = self._action_args(action, [p for p in args[3:] if p != "=>"])
        prof.modify_member(self._handle(args[2], "member"), action, values)
        return ""

    def do_act_prof_modify_member(self, args: list[str]) -> str:
        self._minargs(args, 3, _HELP["act_prof_modify_member"])
        return self._modify_member(self._profile(args[0]), args)

    def do_table_indirect_modify_member(self, args: list[str]) -> str:
        self._minargs(args, 3, _HELP["table_indirect_modify_member"])
        return self._modify_member(self._profile_of_table(args[0]), args)

    def _create_group(self, prof: ActionProfile) -> str:
        self._selector(prof)
        return f"Group has been created with handle {prof.create_group()}"

    def do_act_prof_create_group(self, args: list[str]) -> str:
        self._nargs(args, 1, _HELP["act_prof_create_group"])
        return self._create_group(self._profile(args[0]))

    def do_table_indirect_create_group(self, args: list[str]) -> str:
        self._nargs(args, 1, _HELP["table_indirect_create_group"])
        return self._create_group(self._profile_of_table(args[0]))

    def _delete_group(self, prof: ActionProfile, tok: str) -> str:
        self._selector(prof)
        prof.delete_group(self._handle(tok, "group"))
        return ""

    def do_act_prof_delete_group(self, args: list[str]) -> str:
        self._nargs(args, 2, _HELP["act_prof_delete_group"])
        return self._delete_group(self._profile(args[0]), args[1])

    def do_table_indirect_delete_group(self, args: list[str]) -> str:
        self._nargs(args, 2, _HELP["table_indirect_delete_group"])
        return self._delete_group(self._profile_of_table(args[0]), args[1])

    def _group_member(self, prof: ActionProfile, args: list[str], add: bool) -> str:
        self._selector(prof)
        mbr, grp = self._handle(args[1], "member"), self._handle(args[2], "group")
        if add:
            prof.add_member_to_group(mbr, grp)
        else:
            prof.remove_member_from_group(mbr, grp)
        return ""

    def do_act_prof_add_member_to_group(self, args: list[str]) -> str:
        self._nargs(args, 3, _HELP["act_prof_add_member_to_group"])
        return self._group_member(self._profile(args[0]), args, True)

    def do_table_indirect_add_member_to_group(self, args: list[str]) -> str:
        self._nargs(args, 3, _HELP["table_indirect_add_member_to_group"])
        return self._group_member(self._profile_of_table(args[0]), args, True)

    def do_act_prof_remove_member_from_group(self, args: list[str]) -> str:
        self._nargs(args, 3, _HELP["act_prof_remove_member_from_group"])
        return self._group_member(self._profile(args[0]), args, False)

    def do_table_indirect_remove_member_from_group(self, args: list[str]) -> str:
        self._nargs(args, 3, _HELP["table_indirect_remove_member_from_group"])
        return self._group_member(self._profile_of_table(args[0]), args, False)

    def _indirect_add(self, args: list[str], ws: bool) -> str:
        verb = "table_indirect_add_with_group" if ws else "table_indirect_add"
        self._minargs(args, 2, _HELP[verb])
        table = self._indirect_table(args[0], ws)
        rest = args[1:]
        priority = None
        if table.needs_priority:
            try:
                priority = int(rest[-1], 0)
            except ValueError:
                raise CommandError("Table is ternary, but could not extract a valid priority "
                                   "from args") from None
            rest = rest[:-1]
        if "=>" not in rest or rest.index("=>") != len(rest) - 2:
            raise CommandError("Invalid arguments, could not find handle")
        keys, tok = rest[:-2], rest[-1]
        h = self._handle(tok, "group" if ws else "member")
        matches = self._match(table, keys)
        if ws:
            handle = table.add_entry(matches, "", (), priority, group=h)
        else:
            handle = table.add_entry(matches, "", (), priority, member=h)
        return (f"Adding entry to indirect match table {table.name}\n"
                f"Entry has been added with handle {handle}")

    def do_table_indirect_add(self, args: list[str]) -> str:
        return self._indirect_add(args, ws=False)

    def do_table_indirect_add_with_group(self, args: list[str]) -> str:
        return self._indirect_add(args, ws=True)

    def do_table_indirect_delete(self, args: list[str]) -> str:
        self._nargs(args, 2, _HELP["table_indirect_delete"])
        table = self._indirect_table(args[0], False)
        h = self._handle(args[1], "entry")
        table.delete_entry(h)
        return f"Deleting entry {h} from {table.name}"

    def do_table_indirect_modify(self, args: list[str]) -> str:
        self._nargs(args, 3, _HELP["table_indirect_modify"])
        table = self._indirect_table(args[0], False)
        table.modify_indirect(self._handle(args[1], "entry"),
                              member=self._handle(args[2], "member"))
        return ""

    def do_table_indirect_modify_with_group(self, args: list[str]) -> str:
        self._nargs(args, 3, _HELP["table_indirect_modify_with_group"])
        table = self._indirect_table(args[0], True)
        table.modify_indirect(self._handle(args[1], "entry"),
                              group=self._handle(args[2], "group"))
        return ""

    def do_table_indirect_set_default(self, args: list[str]) -> str:
        self._nargs(args, 2, _HELP["table_indirect_set_default"])
        table = self._indirect_table(args[0], False)
        table.set_default_indirect(member=self._handle(args[1], "member"))
        return ""

    def do_table_indirect_set_default_with_group(self, args: list[str]) -> str:
        self._nargs(args, 2, _HELP["table_indirect_set_default_with_group"])
        table = self._indirect_table(args[0], True)
        table.set_default_indirect(group=self._handle(args[1], "group"))
        return ""

    def do_table_indirect_reset_default(self, args: list[str]) -> str:
        self._nargs(args, 1, _HELP["table_indirect_reset_default"])
        self._indirect_table(args[0], False).reset_default()
        return ""

    def _member_lines(self, prof: ActionProfile, h: int) -> list[str]:
        m = prof.member(h)
        return [f"Dumping member {h}",
                f"Action entry: {m.action} - " + self._data_str(m.action, m.args, ", ", _hexstr)]

    def do_act_prof_dump_member(self, args: list[str]) -> str:
        self._nargs(args, 2, _HELP["act_prof_dump_member"])
        return "\n".join(self._member_lines(self._profile(args[0]),
                                             self._handle(args[1], "member")))

    def do_act_prof_dump_group(self, args: list[str]) -> str:
        self._nargs(args, 2, _HELP["act_prof_dump_group"])
        prof = self._profile(args[0])
        h = self._handle(args[1], "group")
        return f"Dumping group {h}\nMembers: [{', '.join(str(m) for m in prof.group(h))}]"

    def do_act_prof_dump(self, args: list[str]) -> str:
        self._nargs(args, 1, _HELP["act_prof_dump"])
        prof = self._profile(args[0])
        lines = ["==========", "MEMBERS"]
        for h in sorted(prof.members):
            lines += ["**********"] + self._member_lines(prof, h)
        if prof.with_selector:
            lines += ["==========", "GROUPS"]
            for h in sorted(prof.groups):
                lines += ["**********", f"Dumping group {h}",
                          f"Members: [{', '.join(str(m) for m in prof.groups[h])}]"]
        lines.append("==========")
        return "\n".join(lines)

    # -- hash parameters -------------------------------------------------------------
    def _crc_params(self, args: list[str], width: int) -> str:
        usage = (f"set_crc{width}_parameters <name> <polynomial> <initial remainder> "
                 "<final xor value> <reflect data?> <reflect remainder?>")
        self._nargs(args, 6, usage)
        vals = [parse_value(a, width, what) for a, what in
                zip(args[1:4], ("polynomial", "initial remainder", "final xor value"),
                    strict=True)]
        flags = []
        for tok in args[4:6]:
            low = tok.lower()
            if low in ("true", "1"):
                flags.append(True)
            elif low in ("false", "0"):
                flags.append(False)
            else:
                raise CommandError(f"Invalid bool parameter '{tok}' (true/false)")
        # only the named calculation changes, and it must be a custom CRC of
        # this width (runtime_CLI.py set_crc_parameters_common)
        cfg = self.sw.hashes.custom.get(args[0])
        if cfg is None or cfg.width != width:
            raise CommandError(f"Invalid crc{width}_custom name ({args[0]})")
        cfg.poly, cfg.init, cfg.xor_out = vals
        cfg.refin, cfg.refout = flags
        cfg.rebuild()
        return ""

    def do_set_crc16_parameters(self, args: list[str]) -> str:
        return self._crc_params(args, 16)

    def do_set_crc32_parameters(self, args: list[str]) -> str:
        return self._crc_params(args, 32)

    # -- misc ---------------------------------------------------------------------------
    def do_get_time_elapsed(self, args: list[str]) -> str:
        return str(self.sw.now_us())

    def do_reset_state(self, args: list[str]) -> str:
        self.sw.reset_state()
        return ""

    def do_help(self, args: list[str]) -> str:
        if args:
            fn = self._verbs.get(args[0])
            if fn is None:
                raise CommandError(f"Unknown command '{args[0]}'")
            return _HELP.get(args[0], args[0])
        return "Documented commands:\n" + "\n".join(
            f"  {v:24} {_HELP.get(v, '')}" for v in sorted(self._verbs))


_HELP = {
    "act_prof_create_member": "act_prof_create_member <action profile> <action> [action parameters]",
    "act_prof_delete_member": "act_prof_delete_member <action profile> <member handle>",
    "act_prof_modify_member": "act_prof_modify_member <action profile> <action> <member handle> "
                              "[action parameters]",
    "act_prof_create_group": "act_prof_create_group <action profile>",
    "act_prof_delete_group": "act_prof_delete_group <action profile> <group handle>",
    "act_prof_add_member_to_group": "act_prof_add_member_to_group <action profile> "
                                    "<member handle> <group handle>",
    "act_prof_remove_member_from_group": "act_prof_remove_member_from_group <action profile> "
                                         "<member handle> <group handle>",
    "act_prof_dump_member": "act_prof_dump_member <action profile> <member handle>",
    "act_prof_dump_group": "act_prof_dump_group <action profile> <group handle>",
    "act_prof_dump": "act_prof_dump <action profile>",
    "table_indirect_create_member": "table_indirect_create_member <table> <action> "
                                    "[action parameters]",
    "table_indirect_delete_member": "table_indirect_delete_member <table> <member handle>",
    "table_indirect_modify_member": "table_indirect_modify_member <table> <action> "
                                    "<member handle> [action parameters]",
    "table_indirect_create_group": "table_indirect_create_group <table>",
    "table_indirect_delete_group": "table_indirect_delete_group <table> <group handle>",
    "table_indirect_add_member_to_group": "table_indirect_add_member_to_group <table> "
                                          "<member handle> <group handle>",
    "table_indirect_remove_member_from_group": "table_indirect_remove_member_from_group <table> "
                                               "<member handle> <group handle>",
    "table_indirect_add": "table_indirect_add <table> <match fields> => <member handle> "
                          "[priority]",
    "table_indirect_add_with_group": "table_indirect_add_with_group <table> <match fields> => "
                                     "<group handle> [priority]",
    "table_indirect_delete": "table_indirect_delete <table> <entry handle>",
    "table_indirect_modify": "table_indirect_modify <table> <entry handle> <member handle>",
    "table_indirect_modify_with_group": "table_indirect_modify_with_group <table> "
                                        "<entry handle> <group handle>",
    "table_indirect_set_default": "table_indirect_set_default <table> <member handle>",
    "table_indirect_set_default_with_group": "table_indirect_set_default_with_group <table> "
                                             "<group handle>",
    "table_indirect_reset_default": "table_indirect_reset_default <table>",
    "table_add": "table_add <table> <action> <match fields> => <action parameters> [priority]",
    "table_set_default": "table_set_default <table> <action> <action parameters>",
    "table_reset_default": "table_reset_default <table>",
    "table_modify": "table_modify <table> <action> <entry handle> [action parameters]",
    "table_delete": "table_delete <table> <entry handle>",
    "table_dump": "table_dump <table>",
    "table_dump_entry": "table_dump_entry <table> <entry handle>",
    "table_num_entries": "table_num_entries <table>",
    "table_clear": "table_clear <table>",
    "show_tables": "show_tables",
    "table_show_actions": "table_show_actions <table>",
    "counter_read": "counter_read <name> <index>",
    "counter_write": "counter_write <name> <index> <packets> <bytes>",
    "counter_reset": "counter_reset <name>",
    "register_read": "register_read <name> [index]",
    "register_write": "register_write <name> <index> <value>",
    "register_reset": "register_reset <name>",
    "meter_array_set_rates": "meter_array_set_rates <name> <rate_1>:<burst_1> <rate_2>:<burst_2>"
                             " (rates in units/us)",
    "meter_set_rates": "meter_set_rates <name> <index> <rate_1>:<burst_1> <rate_2>:<burst_2>",
    "meter_get_rates": "meter_get_rates <name> <index>",
    "mc_mgrp_create": "mc_mgrp_create <group id>",
    "mc_mgrp_destroy": "mc_mgrp_destroy <group id>",
    "mc_node_create": "mc_node_create <rid> <port list>",
    "mc_node_update": "mc_node_update <node handle> <port list>",
    "mc_node_associate": "mc_node_associate <group id> <node handle>",
    "mc_node_dissociate": "mc_node_dissociate <group id> <node handle>",
    "mc_node_destroy": "mc_node_destroy <node handle>",
    "mc_dump": "mc_dump",
    "mirroring_add": "mirroring_add <mirror_id> <egress_port>",
    "mirroring_add_mc": "mirroring_add_mc <mirror_id> <mgrp>",
    "mirroring_delete": "mirroring_delete <mirror_id>",
    "mirroring_get": "mirroring_get <mirror_id>",
    "set_queue_depth": "set_queue_depth <nb_pkts> [<egress_port> [<priority>]]",
    "set_queue_rate": "set_queue_rate <rate_pps> [<egress_port> [<priority>]]",
    "set_port_rate_bps": "set_port_rate_bps <bps> [<egress_port>]  (soft-target extension)",
    "set_port_delay_us": ("set_port_delay_us <microseconds> [<egress_port>]  "
                          "(soft-target extension: propagation delay of the port's link)"),
    "set_pfc": ("set_pfc <xoff_pkts> <xon_pkts> | off  (soft-target extension: priority flow "
                "control, thresholds in packets held per ingress port and priority)"),
    "set_priority_weights": "set_priority_weights <egress_port> <w_prio0> <w_prio1> ... | strict"
                            "  (soft-target extension: weighted DRR among priorities)",
    "set_crc16_parameters": "set_crc16_parameters <name> <poly> <init> <xor> <refin> <refout>"
                            "  (<name>: the calculation, calc, calc_0, ... by call site)",
    "set_crc32_parameters": "set_crc32_parameters <name> <poly> <init> <xor> <refin> <refout>"
                            "  (<name>: the calculation, calc, calc_0, ... by call site)",
    "get_time_elapsed": "get_time_elapsed  (microseconds since the switch started)",
    "reset_state": "reset_state  (clear runtime entries, registers, counters, meters, PRE)",
    "help": "help [command]",
}
