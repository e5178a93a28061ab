"""STF (p4c's simple test framework), one engine for every target.

- :mod:`switches.stf.syntax`: an STF file as a typed command list;
  syntax errors are ``file:line: message``;
- :mod:`switches.stf.engine`: runs the commands on an ``StfTarget``;
- :mod:`switches.stf.verdict`: the per-port verdict, as p4c's BMv2 runner
  judges; ``Mask`` for expected packets with don't-care fields (as ptf's).

Targets: ``switches.soft.stf`` (the soft switch, synchronous) and
``switches.bmv2.stf`` (simple_switch_grpc on veth pairs).
"""

from switches.stf.engine import Entry, KeyField, StfTarget, TableView, run_commands
from switches.stf.syntax import StfError, StfSyntaxError, parse_stf
from switches.stf.verdict import Mask, StfResult, Verdict, compare_packet

__all__ = ["Entry", "KeyField", "Mask", "StfError", "StfResult", "StfSyntaxError", "StfTarget",
           "TableView", "Verdict", "compare_packet", "parse_stf", "run_commands"]
