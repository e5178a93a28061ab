"""STF (simple test framework) runner for the soft switch.

``run_stf(p4_path, stf_path) -> StfResult`` compiles the program, runs the
STF commands in order against a fresh switch (packets synchronously: each
packet goes through ingress, the traffic manager, egress before the next
command), then compares outputs with expectations per port, as p4c's BMv2
runner does:

- ``packet <port> <hex>`` sends a frame (hex may contain spaces);
- ``expect <port> <hex>[$]`` expects the port's next output; ``*`` is a
  wildcard nibble, a trailing ``$`` demands the exact length (otherwise the
  output may be longer); ``expect <port>`` alone accepts any output there;
  each port must produce exactly as many packets as it has expects, and a
  port with output and no expect fails;
- ``add <table> [<prio>] <key>:<value>[/<plen>] ... <action>(<p>:<v>, ...) [= <id>]``
  (table, key, action names by suffix; ternary values may use ``*`` nibbles,
  an lpm value without ``/`` gets the prefix of its digits; a higher STF
  priority wins), ``setdefault <table> <action>(...)``, ``remove all``,
  ``wait``, ``check_counter <name>(<index or $id>) [packets|bytes] [<op> N]``;
- ``mc_*``, ``mirroring_*``, ``register_*``, ``counter_*``, ``meter_*`` and
  the other simple_switch_CLI verbs go to the control plane unchanged.

``main(argv)`` is the command-line entry (``python -m switches.soft.stf
prog.p4 test.stf [--json]``): prints a readable diff and returns 0 if the
test passed, 1 if it failed, 2 if it could not run.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from switches.soft.control.verbs import CommandError, resolve
from switches.soft.runtime.tables import TableError

_STF_PRIO_BASE = 10000  # STF: higher wins; runtime: smaller wins


@dataclass
class StfResult:
    passed: bool
    packets: int
    mismatches: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "packets": self.packets, "mismatches": self.mismatches}


class StfError(Exception):
    pass


# ---------------------------------------------------------------------------
# output comparison


def _clean_hex(text: str) -> str:
    return "".join(text.split()).upper()


def compare_packet(expected: str, got: bytes) -> str | None:
    """None if ``got`` matches the STF expectation, else a readable diff."""
    exp = _clean_hex(expected)
    exact = exp.endswith("$")
    if exact:
        exp = exp[:-1]
    rec = got.hex().upper()
    problems = []
    if len(rec) < len(exp):
        problems.append(f"too short: {len(rec) // 2} bytes, expected "
                        f"{'exactly' if exact else 'at least'} {len(exp) / 2:g}")
    elif exact and len(rec) > len(exp):
        problems.append(f"too long: {len(rec) // 2} bytes, expected exactly {len(exp) / 2:g}")
    diffs = [i for i, c in enumerate(exp) if c != "*" and (i >= len(rec) or rec[i] != c)]
    if not problems and not diffs:
        return None
    if diffs:
        first = diffs[0]
        problems.append(f"{len(diffs)} nibble(s) differ, first at byte {first // 2}")
    # mark differing bytes in both strings
    marks = []
    for b in range(0, max(len(exp), len(rec)), 2):
        bad = any(i in diffs for i in (b, b + 1)) or b >= len(rec) or \
            (exact and b >= len(exp))
        marks.append("^^" if bad else "  ")
    def spaced(s: str) -> str:
        return " ".join(s[i:i + 2] for i in range(0, len(s), 2))
    return ("; ".join(problems) + "\n"
            + f"    expected: {spaced(exp)}{' $' if exact else ''}\n"
            + f"    got:      {spaced(rec)}\n"
            + f"              {' '.join(marks).rstrip()}")


# ---------------------------------------------------------------------------
# STF command translation


def resolve_stf_name(names: list[str], wanted: str, what: str) -> str:
    """The one name of ``names`` an STF file means by ``wanted``: exact, then
    dot-suffix, then plain suffix (as p4c's runner matches them); raises
    StfError naming ``what`` when none or several fit."""
    if wanted in names:
        return wanted
    try:
        return resolve(names, wanted, what)
    except CommandError:
        pass
    cands = [n for n in names if n.endswith(wanted)]
    if len(cands) == 1:
        return cands[0]
    if len(cands) > 1:
        raise StfError(f"{what} name '{wanted}' is ambiguous: {', '.join(sorted(cands))}")
    raise StfError(f"no {what} named '{wanted}'")


def parse_stf_int(tok: str) -> int:
    """An STF number: ``0x``/``0b``/``0o`` prefixed, else decimal (a leading
    zero does not make it octal)."""
    tok = tok.strip()
    if tok.lower().startswith("0x") or tok.lower().startswith("0b") or tok.lower().startswith("0o"):
        return int(tok, 0)
    return int(tok, 10)


def parse_stf_ternary(tok: str, width: int) -> tuple[int, int]:
    """A ternary STF value as (value, mask): ``v&&&m``, or a prefixed number
    whose ``*`` digits are wildcards (other digits exact); a plain decimal
    number is exact over ``width`` bits."""
    t = tok.lower()
    if "&&&" in t:
        vs, ms = t.split("&&&", 1)
        return parse_stf_int(vs), parse_stf_int(ms)
    for prefix, bits, base in (("0x", 4, 16), ("0b", 1, 2), ("0o", 3, 8)):
        if t.startswith(prefix):
            digits = t[2:]
            v = m = 0
            for d in digits:
                v <<= bits
                m <<= bits
                if d != "*":
                    v |= int(d, base)
                    m |= (1 << bits) - 1
            return v, m
    return int(t, 10), (1 << width) - 1


def parse_stf_lpm(tok: str, width: int) -> tuple[int, int]:
    """An lpm STF value as (value, prefix length): ``v/len``, or a prefixed
    number whose trailing ``*`` digits are outside the prefix (the prefix is
    the given digits, at most ``width``); a plain decimal number is exact."""
    if "/" in tok:
        vs, ps = tok.split("/", 1)
        return parse_stf_int(vs), int(ps, 0)
    t = tok.lower()
    if t.startswith("0x"):
        bits = 4
    elif t.startswith("0b"):
        bits = 1
    elif t.startswith("0o"):
        bits = 3
    else:
        return int(t, 10), width
    digits = t[2:]
    plen = (len(digits) - digits.count("*")) * bits
    v = int(digits.replace("*", "0"), {4: 16, 1: 2, 3: 8}[bits])
    # digits are left-aligned in the field when they cover it fully
    return v, min(plen, width)


_ADD_RE = re.compile(r"^\s*(\S+)\s+(.*)$")
# ``action(name:value, ...) [= id]`` at the end of an add/setdefault line
STF_ACTION_RE = re.compile(r"([A-Za-z_$.\[\]0-9\"]+)\s*\((.*)\)\s*(?:=\s*(\S+))?\s*$")


class StfRunner:
    def __init__(self, switch: Any) -> None:
        self.sw = switch
        self.outputs: dict[int, list[bytes]] = {}
        self.expects: dict[int, list[str]] = {}
        self.expect_any: set[int] = set()
        self.errors: list[str] = []
        self.packets = 0
        self.handles: dict[str, tuple[str, int]] = {}
        self._noprio_seq = 0

    # -- commands -------------------------------------------------------------
    def run_text(self, text: str) -> None:
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            try:
                self.command(line)
            except (StfError, CommandError, TableError, ValueError) as e:
                self.errors.append(f"line {n}: {line}: {e}")

    def command(self, line: str) -> None:
        verb, rest = (line.split(None, 1) + [""])[:2]
        v = verb.lower()
        rest = rest.strip()
        if v == "packet":
            port_s, data = (rest.split(None, 1) + [""])[:2]
            port = int(port_s)
            try:
                frame = bytes.fromhex("".join(data.split()))
            except ValueError:
                raise StfError(f"invalid packet data '{data}'") from None
            self.packets += 1
            errors_before = self.sw.drops["exception"]
            for p, out in self.sw.process_sync(port, frame):
                self.outputs.setdefault(p, []).append(out)
            if self.sw.drops["exception"] != errors_before:
                raise StfError(f"the pipeline raised an exception: {self.sw.last_error}")
        elif v == "expect":
            port_s, data = (rest.split(None, 1) + [""])[:2]
            port = int(port_s)
            data = data.strip()
            if data:
                self.expects.setdefault(port, []).append(data)
            else:
                self.expect_any.add(port)
        elif v == "add":
            self._add(rest)
        elif v == "setdefault":
            self._setdefault(rest)
        elif v == "remove":
            if rest.lower() != "all":
                raise StfError("only 'remove all' is supported")
            for t in self.sw.tables.values():
                t.clear()
        elif v == "wait":
            pass  # processing is synchronous: everything sent is done
        elif v == "no_packet":
            pass
        elif v == "check_counter":
            self._check_counter(rest)
        else:
            self.sw.control.execute(line)

    def _table(self, name: str) -> Any:
        return self.sw.tables[resolve_stf_name(list(self.sw.tables), name.strip('"'), "table")]

    def _action(self, table: Any, name: str) -> str:
        return resolve_stf_name(list(table.info.actions), name.strip('"'), "action")

    def _args(self, action: str, text: str) -> list[int]:
        ainfo = self.sw.info.actions.get(action)
        params = ainfo.params if ainfo is not None else []
        given: dict[str, int] = {}
        for part in [p for p in text.split(",") if p.strip()]:
            k, sep, val = part.partition(":")
            if not sep:
                raise StfError(f"action argument '{part.strip()}' is not <name>:<value>")
            given[k.strip()] = parse_stf_int(val)
        out = []
        for p in params:
            if p.name not in given:
                raise StfError(f"action {action} needs argument {p.name}")
            out.append(given.pop(p.name) & ((1 << p.width) - 1))
        if given:
            raise StfError(f"action {action} has no parameter(s) {', '.join(given)}")
        return out

    def _key_index(self, table: Any, name: str) -> int:
        names = [k.name for k in table.keys]
        name = name.strip('"')
        m = re.match(r"^(.*)\$([0-9]+)(.*)$", name)
        if m:
            name = f"{m.group(1)}[{m.group(2)}]{m.group(3)}"
        alts = [name]
        if name.endswith(".$valid$") or name.endswith(".$valid"):
            base = name.rsplit(".", 1)[0]
            alts.append(base + ".isValid()")
        elif name.endswith(".valid"):
            alts.append(name[:-6] + ".isValid()")
        for a in alts:
            if a in names:
                return names.index(a)
        for a in alts:
            cands = [i for i, n in enumerate(names) if n.endswith("." + a)]
            if len(cands) == 1:
                return cands[0]
        raise StfError(f"table {table.name} has no key field '{name}' (keys: {', '.join(names)})")

    def _add(self, text: str) -> None:
        m = STF_ACTION_RE.search(text)
        if not m:
            raise StfError("add needs an action call <action>(<args>)")
        head = text[:m.start()].split()
        if not head:
            raise StfError("add needs a table name")
        aname, atext, hid = m.group(1), m.group(2), m.group(3)
        table = self._table(head[0])
        prio_tok = None
        matches_toks = head[1:]
        if matches_toks and re.fullmatch(r"[0-9]+", matches_toks[0]):
            prio_tok = matches_toks[0]
            matches_toks = matches_toks[1:]
        # default (wildcard) values for keys not given, as p4c's runner does
        matches: list[Any] = []
        for k in table.keys:
            if k.match_kind == "lpm":
                matches.append((0, 0))
            elif k.match_kind in ("ternary", "optional"):
                matches.append((0, 0))
            elif k.match_kind == "range":
                matches.append((0, (1 << k.width) - 1))
            else:
                matches.append(0)
        for tok in matches_toks:
            kname, sep, val = tok.rpartition(":")
            if not sep:
                raise StfError(f"key '{tok}' is not <field>:<value>")
            i = self._key_index(table, kname)
            k = table.keys[i]
            if k.match_kind == "lpm":
                matches[i] = parse_stf_lpm(val, k.width)
            elif k.match_kind in ("ternary", "optional"):
                matches[i] = parse_stf_ternary(val, k.width)
            elif k.match_kind == "range":
                if "->" in val:
                    lo, hi = val.split("->", 1)
                    matches[i] = (parse_stf_int(lo), parse_stf_int(hi))
                else:
                    x = parse_stf_int(val)
                    matches[i] = (x, x)
            else:
                matches[i] = parse_stf_int(val)
        action = self._action(table, aname)
        args = self._args(action, atext)
        prio = None
        if table.needs_priority:
            if prio_tok is not None:
                prio = _STF_PRIO_BASE - int(prio_tok)
            else:
                # no priority given: earlier entries win, after prioritized ones
                self._noprio_seq += 1
                prio = 2 * _STF_PRIO_BASE + self._noprio_seq
        h = table.add_entry(matches, action, args, prio)
        if hid:
            self.handles[hid] = (table.name, h)

    def _setdefault(self, text: str) -> None:
        m = STF_ACTION_RE.search(text)
        if not m:
            raise StfError("setdefault needs an action call <action>(<args>)")
        head = text[:m.start()].split()
        if len(head) != 1:
            raise StfError("setdefault <table> <action>(<args>)")
        table = self._table(head[0])
        action = self._action(table, m.group(1))
        table.set_default(action, self._args(action, m.group(2)))

    def _check_counter(self, text: str) -> None:
        m = re.fullmatch(r"\s*([^\s(]+)\s*\(\s*([^)\s]+)\s*\)\s*(?:(packets|bytes)\s*"
                         r"(==|!=|<=|>=|<|>)\s*(\S+))?\s*", text, re.IGNORECASE)
        if not m:
            raise StfError("check_counter <name>(<index>) [packets|bytes <op> <value>]")
        name, idx_s, kind, op, val_s = m.groups()
        full = resolve_stf_name(list(self.sw.info.counters), name, "counter")
        cinfo = self.sw.info.counters[full]
        if idx_s.startswith("$"):
            if idx_s[1:] not in self.handles:
                raise StfError(f"unknown entry id {idx_s}")
            idx = self.handles[idx_s[1:]][1]
        else:
            idx = parse_stf_int(idx_s)
        if cinfo.direct_table:
            e = self.sw.tables[cinfo.direct_table].get_entry(idx)
            nbytes, npk = e.bytes, e.packets
        else:
            nbytes, npk = self.sw.counters[full].read(idx)
        kind = (kind or "packets").lower()
        op = op or "=="
        want = parse_stf_int(val_s) if val_s is not None else 0
        got = npk if kind == "packets" else nbytes
        ok = {"==": got == want, "!=": got != want, "<=": got <= want, ">=": got >= want,
              "<": got < want, ">": got > want}[op]
        if not ok:
            self.errors.append(f"check_counter {name}({idx_s}): {kind} is {got}, expected "
                               f"{op} {want}")

    # -- verdict ----------------------------------------------------------------
    def mismatches(self) -> list[str]:
        out = list(self.errors)
        ports = sorted(set(self.outputs) | set(self.expects))
        for port in ports:
            if port in self.expect_any:
                continue
            got = self.outputs.get(port, [])
            exp = self.expects.get(port, [])
            for i in range(max(len(got), len(exp))):
                if i >= len(exp):
                    out.append(f"port {port}: unexpected packet #{i}: {got[i].hex().upper()}")
                elif i >= len(got):
                    out.append(f"port {port}: expected packet #{i} not received: "
                               f"{_clean_hex(exp[i])}")
                else:
                    d = compare_packet(exp[i], got[i])
                    if d is not None:
                        out.append(f"port {port}: packet #{i} differs: {d}")
            if len(got) != len(exp):
                out.append(f"port {port}: expected {len(exp)} packet(s), got {len(got)}")
        return out


def run_stf_text(module: Any, text: str, switch_factory: Callable[[Any], Any] | None = None
                 ) -> StfResult:
    """Run STF ``text`` against a compiled program module."""
    if switch_factory is None:
        from switches.soft.runtime.switch import SoftSwitch
        sw = SoftSwitch(module)
    else:
        sw = switch_factory(module)
    r = StfRunner(sw)
    r.run_text(text)
    mism = r.mismatches()
    return StfResult(passed=not mism, packets=r.packets, mismatches=mism)


def run_stf(p4_path: str | Path, stf_path: str | Path, backend: str = "python",
            timeout: float | None = None) -> StfResult:
    """Compile ``p4_path`` (includes from its directory) and run ``stf_path``
    on data-path ``backend`` (see ``switches.soft.backends``; anything but
    ``python`` runs in a subprocess of that backend's interpreter, which may
    take ``timeout`` seconds)."""
    from switches.soft.backends import check_backend
    from switches.soft.compiler import compile_program
    check_backend(backend)
    p4_path = Path(p4_path)
    module = compile_program(str(p4_path), include_dirs=[str(p4_path.parent)])
    if backend == "python":
        return run_stf_text(module, Path(stf_path).read_text())
    return _run_stf_subprocess(backend, module, Path(stf_path), timeout)


def _run_stf_subprocess(backend: str, module: Any, stf_path: Path,
                        timeout: float | None) -> StfResult:
    import os
    import subprocess

    from switches.soft.backends import interpreter, write_generated
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    cmd = [interpreter(backend), "-m", "switches.soft.stf", "--generated",
           write_generated(module), str(stf_path), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root,
                          timeout=timeout, check=False)
    lines = proc.stdout.strip().splitlines()
    try:
        rec = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise StfError(f"backend {backend}: STF run failed (exit {proc.returncode}): "
                       f"{proc.stderr.strip()[-2000:]}") from None
    if proc.returncode == 2:
        raise StfError(f"backend {backend}: {'; '.join(rec.get('mismatches', []))}")
    return StfResult(passed=bool(rec["passed"]), packets=int(rec["packets"]),
                     mismatches=list(rec["mismatches"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stf", description="Run an STF test on the soft switch")
    ap.add_argument("p4", nargs="?", help="P4_16 v1model program")
    ap.add_argument("stf", help="STF test file")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--backend", default="python", help="data-path backend (python, pypy)")
    ap.add_argument("--generated", metavar="FILE",
                    help="run an already generated program module instead of compiling P4 "
                         "(what a non-default backend's subprocess does)")
    a = ap.parse_args(argv)
    if (a.p4 is None) == (a.generated is None):
        ap.error("give either a P4 program or --generated FILE")
    try:
        if a.generated:
            from switches.soft.backends import install_compat, load_generated
            install_compat()
            res = run_stf_text(load_generated(a.generated), Path(a.stf).read_text())
        else:
            res = (run_stf(a.p4, a.stf) if a.backend == "python"
                   else run_stf(a.p4, a.stf, backend=a.backend))
    except Exception as e:  # compile errors and unreadable files
        if a.json:
            print(json.dumps({"passed": False, "packets": 0, "mismatches": [str(e)]}))
        else:
            print(f"error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(res.to_json()))
    else:
        for m in res.mismatches:
            print(f"*** {m}")
        print(f"{'PASS' if res.passed else 'FAIL'}: {a.stf} ({res.packets} packets)")
    return 0 if res.passed else 1


if __name__ == "__main__":
    sys.exit(main())
