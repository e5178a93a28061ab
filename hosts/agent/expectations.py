"""What a collective rank puts in and must hold afterwards, which every rank
recomputes from the spec.

Each rank draws every rank's input from the spec's seed (collective_input,
collective_inputs), so it knows the result it must hold (collective_expected)
and, for a float32 sum through EPIC, how far from the exact sum it may be
(collective_bound). A CollectiveExpectation holds one collective's and judges
the result (hosts.agent.collective makes them before the start where memory
allows). numpy is imported where used: a flow-only agent runs on PyPy
without it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hosts.agent_spec import CollectiveSpec

if TYPE_CHECKING:
    import numpy as np


def collective_input(spec: CollectiveSpec, rank: int, iteration: int) -> np.ndarray:
    """Rank ``rank``'s input of ``iteration``: small integers of the spec's dtype
    (sums of up to 1024 ranks stay inside int32, so EPIC's saturating adds are exact)."""
    import numpy as np

    rng = np.random.default_rng([spec.seed, rank, iteration])
    count = spec.schedule()[iteration]
    if spec.dtype == "float32":
        return (rng.standard_normal(count) * 1000.0).astype(np.float32)
    return rng.integers(-(1 << 20), 1 << 20, count, dtype=np.dtype(spec.dtype))


def collective_inputs(spec: CollectiveSpec, iteration: int) -> list[np.ndarray]:
    """Every rank's input of ``iteration``, by rank."""
    return [collective_input(spec, r, iteration) for r in range(spec.size)]


def collective_expected(spec: CollectiveSpec, iteration: int,
                        inputs: list[np.ndarray] | None = None) -> np.ndarray | None:
    """What rank ``spec.rank`` must hold after collective ``iteration``: None
    where it receives nothing (a Reduce's other ranks, a Barrier).
    ``inputs``: collective_inputs(spec, iteration), if already drawn."""
    import numpy as np

    from hosts.commlib import split

    op, count = spec.sequence()[iteration]
    if op == "barrier" or (op == "reduce" and spec.rank != spec.root):
        return None
    xs = inputs if inputs is not None else collective_inputs(spec, iteration)
    if op == "all_gather":
        return np.concatenate(xs)
    if op == "broadcast":
        return xs[spec.root]
    if spec.dtype == "float32":           # the exact sum; collective_bound says how near
        exact = np.sum(np.stack(xs).astype(np.float64), axis=0)
        if op == "reduce_scatter":
            off, ln = split(count, spec.size)[spec.rank]
            return exact[off: off + ln]
        return exact
    total = np.zeros(count, dtype=np.dtype(spec.dtype))
    with np.errstate(over="ignore"):
        for x in xs:
            np.add(total, x, out=total)  # wraps exactly as CommLib's sums do
    if op == "reduce_scatter":
        off, ln = split(count, spec.size)[spec.rank]
        return total[off: off + ln]
    return total


def collective_bound(spec: CollectiveSpec, iteration: int, exact: np.ndarray,
                     inputs: list[np.ndarray] | None = None) -> np.ndarray | None:
    """The largest error a float32 sum through EPIC may have per element (the
    fixed-point rounding of every rank, hosts.commlib.epic.fixed_point_bound,
    plus float32 rounding); None where the result must be bit-exact.
    ``inputs``: collective_inputs(spec, iteration), if already drawn."""
    op, _count = spec.sequence()[iteration]
    if spec.dtype != "float32" or op in ("all_gather", "broadcast", "barrier"):
        return None
    import numpy as np

    from hosts.commlib.epic import fixed_point_bound, fixed_point_factor

    xs = inputs if inputs is not None else collective_inputs(spec, iteration)
    maxima = sum(float(np.max(np.abs(x))) for x in xs)
    # the ranks agree on a factor from an upper bound of the maxima (within 2^-24)
    bound = fixed_point_bound(spec.size, fixed_point_factor(maxima)) * (1 + 2.0**-20)
    return bound + np.abs(exact) * 2.0**-23


@dataclass
class CollectiveExpectation:
    """One collective of a rank: its input (None once handed over, or for a
    Barrier), the result it must hold, the float tolerance and the result's
    sha256 (None where it receives nothing)."""

    x: np.ndarray | None
    want: np.ndarray | None
    bound: np.ndarray | None
    sha256: str | None

    @classmethod
    def make(cls, spec: CollectiveSpec, iteration: int) -> CollectiveExpectation:
        op = spec.sequence()[iteration][0]
        if op == "barrier":
            return cls(None, None, None, None)
        if op == "reduce" and spec.rank != spec.root:       # receives nothing
            return cls(collective_input(spec, spec.rank, iteration), None, None, None)
        xs = collective_inputs(spec, iteration)     # drawn once for all three
        want = collective_expected(spec, iteration, xs)
        assert want is not None
        x = xs[spec.rank]
        if x is want:       # a Broadcast's root: the communicator gets its own copy
            x = x.copy()
        return cls(x, want, collective_bound(spec, iteration, want, xs),
                   hashlib.sha256(want.tobytes()).hexdigest())

    def judge(self, got: np.ndarray | None) -> tuple[bool, str | None]:
        """Whether ``got`` is the result (bit-exact, or within the float
        bound), and its sha256."""
        import numpy as np

        want, bound = self.want, self.bound
        if want is None:
            return True, None
        if got is None:
            return False, None
        if bound is not None:
            ok = (got.dtype == np.float32 and got.shape == want.shape
                  and bool(np.all(np.abs(got.astype(np.float64) - want) <= bound)))
        else:
            ok = got.dtype == want.dtype and np.array_equal(got, want)
        # a bit-exact result's hash is the expected one's, made beforehand
        return ok, (self.sha256 if ok and bound is None
                    else hashlib.sha256(got.tobytes()).hexdigest())
