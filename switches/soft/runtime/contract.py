"""The contract between generated program code and the v1model runtime.

The backend turns a checked P4 program into a Python module. That module
defines ``make_program(rt: Services) -> CompiledProgram`` and a module-level
``INFO: ProgramInfo``. The runtime (``switches.soft.runtime``) owns
everything stateful (tables, registers, counters, meters, the traffic manager,
the PRE) and hands the generated code a ``Services`` object; the generated
code owns per-packet parsing, control flow, and deparsing.

Names are the control-plane names p4c gives: the fully qualified name
``<control>.<local>`` (e.g. ``MyIngress.ipv4_lpm``, ``MyIngress.set_nhop``)
unless an ``@name`` annotation overrides it (a leading ``.`` in ``@name``
makes it top-level, dot removed). Actions declared at top level are named
just by their name (e.g. ``NoAction``). Key field names are the key
expression as written (``hdr.ipv4.dstAddr``), or ``@name`` when given;
``isValid()`` keys are named e.g. ``hdr.ipv4.isValid()``.

Values: ``bit<W>`` and ``int<W>`` are Python ints (int<W> in two's
complement *signed* range), ``bool`` is bool, ``error`` and enums are ints
(members numbered from 0 in declaration order; errors: core.p4's
NoError=0, PacketTooShort=1, NoMatch=2, StackOutOfBounds=3,
HeaderTooShort=4, ParserTimeout=5, ParserInvalidArgument=6, then the
program's own in declaration order).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

# ---------------------------------------------------------------------------
# Static description of a compiled program (also the source of P4Info later)


@dataclass
class ParamInfo:
    name: str
    width: int


@dataclass
class ActionInfo:
    name: str
    params: list[ParamInfo] = field(default_factory=list)
    # @defaultonly / @tableonly scopes are per table: see TableInfo.


@dataclass
class KeyInfo:
    name: str
    match_kind: str  # 'exact', 'lpm', 'ternary', 'range', 'optional', 'selector'
    width: int


@dataclass
class EntryInfo:
    """A const/initial entry. ``matches`` has one item per key:
    exact -> int; lpm -> (value, prefix_len); ternary -> (value, mask);
    range -> (lo, hi); optional -> (value, mask) with mask all ones or 0.
    A don't-care key (``_`` / ``default``) is given in its wildcard form
    (lpm prefix 0, ternary mask 0, range full, optional mask 0)."""

    matches: list[Any]
    action: str
    args: list[int]
    priority: int | None = None  # P4 source priority (set by @priority or implicit order)


@dataclass
class TableInfo:
    name: str
    keys: list[KeyInfo]
    actions: list[str]  # action names valid for entries and default
    default_action: str
    default_args: list[int]
    default_const: bool = False
    entries: list[EntryInfo] = field(default_factory=list)
    entries_const: bool = False
    size: int = 1024
    direct_counter: str | None = None
    direct_meter: str | None = None
    default_only_actions: list[str] = field(default_factory=list)
    table_only_actions: list[str] = field(default_factory=list)
    # In P4 source, entries listed earlier win unless priorities say otherwise;
    # largest_priority_wins follows the table property of that name.
    largest_priority_wins: bool = True
    # ``implementation``: the action profile/selector whose members or groups
    # entries name (ProgramInfo.action_profiles); None for a direct table
    implementation: str | None = None
    # the ``selector`` key fields (not part of ``keys``: they take no part in
    # matching), hashed by the action selector to choose a group's member
    selector_keys: list[KeyInfo] = field(default_factory=list)


@dataclass
class ActionProfileInfo:
    """A v1model ``action_profile(size)`` or ``action_selector(algorithm,
    size, outputWidth)`` (``selector_algo`` None for a plain profile)."""

    name: str
    size: int
    tables: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # of its tables
    selector_algo: str | None = None
    selector_output_width: int = 0


@dataclass
class RegisterInfo:
    name: str
    width: int
    size: int


@dataclass
class CounterInfo:
    name: str
    size: int  # 0 for direct counters
    kind: str  # 'packets', 'bytes', 'packets_and_bytes'
    direct_table: str | None = None


@dataclass
class MeterInfo:
    name: str
    size: int  # 0 for direct meters
    kind: str  # 'packets', 'bytes'
    direct_table: str | None = None


@dataclass
class DigestInfo:
    """One ``digest<T>(receiver, data)`` call site's type."""

    name: str  # the struct type name T
    fields: list[ParamInfo] = field(default_factory=list)


@dataclass
class ProgramInfo:
    name: str  # program file stem
    tables: dict[str, TableInfo] = field(default_factory=dict)
    actions: dict[str, ActionInfo] = field(default_factory=dict)
    registers: dict[str, RegisterInfo] = field(default_factory=dict)
    counters: dict[str, CounterInfo] = field(default_factory=dict)
    meters: dict[str, MeterInfo] = field(default_factory=dict)
    digests: dict[str, DigestInfo] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # error names by value
    # custom-CRC calculations (hash/checksum call sites using crc16_custom or
    # crc32_custom), by BMv2's calculation name -> algorithm; generated code
    # passes the name as the algorithm, set_crc*_parameters configures one
    calculations: dict[str, str] = field(default_factory=dict)
    action_profiles: dict[str, ActionProfileInfo] = field(default_factory=dict)


# ---------------------------------------------------------------------------
# Per-packet state


class PacketState:
    """What one packet carries through the pipeline.

    ``hdr``/``meta``/``sm`` are instances of the generated classes for the
    program's H, M and standard_metadata_t (attribute per field; headers and
    unions expose ``isValid()``/``setValid()``/``setInvalid()``; the runtime
    only touches ``sm``). ``payload`` is the unparsed rest of the packet.
    Generated code sets the request fields when the program calls the
    v1model externs clone/clone3/clone_preserving_field_list, resubmit*,
    recirculate*, truncate and digest (each call overwrites the previous
    request of its kind, as in BMv2, except truncate, where the smallest
    length wins); the runtime acts on them at the end of ingress/egress and
    resets them.

    ``ingress_length`` is the length the packet had when it entered ingress
    (what counters and meters count, as BMv2's ``Packet::get_ingress_length``);
    ``length_change`` is the bytes added minus removed by ``setValid()`` /
    ``setInvalid()`` (BMv2's add_header/remove_header update the packet length
    register, which egress sees as ``standard_metadata.packet_length``).
    """

    __slots__ = (
        "hdr", "meta", "sm", "payload",
        "clone_session", "clone_type", "clone_field_list",
        "resubmit_field_list", "recirculate_field_list",
        "truncate_len", "digest", "ingress_length", "length_change",
    )

    def __init__(self, hdr: Any, meta: Any, sm: Any, payload: bytes = b"") -> None:
        self.hdr = hdr
        self.meta = meta
        self.sm = sm
        self.payload = payload
        self.clone_session: int | None = None  # set by clone*/clone_preserving_field_list
        self.clone_type: int = 0  # 0 = I2E, 1 = E2E (v1model CloneType)
        self.clone_field_list: int | None = None
        self.resubmit_field_list: int | None = None  # None = no resubmit requested
        self.recirculate_field_list: int | None = None
        self.truncate_len: int | None = None
        self.digest: tuple[int, str, dict[str, int]] | None = None  # (receiver, type, values)
        self.ingress_length = 0
        self.length_change = 0


class StandardMetadata(Protocol):
    """The fields of v1model's standard_metadata_t that the runtime and the
    extern calls write (the generated class has them all)."""

    egress_spec: int
    mcast_grp: int


class CompiledProgram(Protocol):
    """What the generated module's ``make_program(rt)`` returns."""

    info: ProgramInfo

    def new_state(self) -> PacketState:
        """Fresh state: all headers invalid, metadata zero, sm zero."""

    def parse(self, st: PacketState, packet: bytes) -> None:
        """Run the P4 parser on ``packet`` (sm.ingress_port etc. already set).
        Sets ``st.sm.parser_error`` on error (the packet goes on to ingress,
        as in BMv2) and ``st.payload`` to the bytes the parser did not consume."""

    def verify_checksum(self, st: PacketState) -> None: ...

    def ingress(self, st: PacketState) -> None: ...

    def egress(self, st: PacketState) -> None: ...

    def compute_checksum(self, st: PacketState) -> None: ...

    def deparse(self, st: PacketState) -> bytes:
        """Emit valid headers in deparser order, then ``st.payload``."""

    def copy_state(self, st: PacketState) -> PacketState:
        """Deep copy of hdr/meta/sm/payload (for clones and multicast replicas);
        request fields are reset."""

    def field_list(self, st: PacketState, index: int) -> dict[str, Any]:
        """Values of the metadata fields annotated ``@field_list(index)``
        (keyed by their path, e.g. ``meta.x``; includes standard_metadata
        fields so annotated)."""

    def restore_field_list(self, st: PacketState, values: dict[str, Any]) -> None: ...


# ---------------------------------------------------------------------------
# What generated code calls (implemented by the runtime)


class TableRuntime(Protocol):
    def apply(self, key: tuple[int, ...],
              selector: list[tuple[int, int]] | None = None) -> tuple[str, tuple[int, ...], bool]:
        """Look up ``key`` (one int per key element, bool as 0/1) and return
        (action name, action data, hit). Updates the direct counter of the
        hit entry. Tables with an action selector are also given the
        ``selector`` key fields as (value, width) pairs."""


class RegisterRuntime(Protocol):
    def read(self, index: int) -> int: ...

    def write(self, index: int, value: int) -> None: ...


class CounterRuntime(Protocol):
    def count(self, index: int, packet_length: int) -> None: ...


class MeterRuntime(Protocol):
    def execute(self, index: int, packet_length: int) -> int:
        """Returns the colour: 0 GREEN, 1 YELLOW, 2 RED."""


class Services(Protocol):
    """Handed to ``make_program``. Generated code binds the named objects once
    at construction and calls the functions per packet."""

    def table(self, name: str) -> TableRuntime: ...

    def register(self, name: str) -> RegisterRuntime: ...

    def counter(self, name: str) -> CounterRuntime: ...

    def meter(self, name: str) -> MeterRuntime: ...

    def direct_meter_read(self, table: str, packet_length: int) -> int:
        """Colour from the direct meter of the entry ``table`` last hit."""

    # v1model extern functions. ``data`` arguments are lists of
    # (value, width) pairs in P4 order, flattened from the P4 expression.
    def hash(self, algo: str, base: int, data: list[tuple[int, int]], max_: int) -> int:
        """HashAlgorithm name as in v1model (crc32, crc32_custom, crc16,
        crc16_custom, random, identity, csum16, xor16). Result is
        ``base + (h % max_)`` (``base`` when max_ == 0), caller truncates."""

    def checksum(self, algo: str, data: list[tuple[int, int]]) -> int:
        """For verify_checksum/update_checksum(_with_payload)."""

    def random(self, lo: int, hi: int) -> int: ...

    def now_us(self) -> int:
        """Microseconds since switch start (global timestamps)."""

    def log_msg(self, fmt: str, args: list[Any]) -> None: ...

    def mark_to_drop(self, sm: StandardMetadata) -> None: ...


class ProgramModule(Protocol):
    """A compiled program: the module the backend generates (or loads)."""

    INFO: ProgramInfo
    SOURCE: str  # the generated Python source

    def make_program(self, rt: Services) -> CompiledProgram: ...
