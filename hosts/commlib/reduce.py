"""Element-wise reductions used by the ring collectives (numpy, in place).

Integer sums wrap modulo 2**bits exactly like numpy's own sums, so integer
results are bit-exact whatever the ring order; float32 results differ from a
sequential sum only by rounding order.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

__all__ = ["ReduceOp", "SUPPORTED_DTYPES", "reduce_into", "check_dtype"]

SUPPORTED_DTYPES = (
    np.dtype(np.int32),
    np.dtype(np.int64),
    np.dtype(np.float32),
    np.dtype(np.float64),
)


class ReduceOp(StrEnum):
    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"


_UFUNCS = {
    ReduceOp.SUM: np.add,
    ReduceOp.PROD: np.multiply,
    ReduceOp.MAX: np.maximum,
    ReduceOp.MIN: np.minimum,
}


def check_dtype(dtype: np.dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in SUPPORTED_DTYPES:
        raise TypeError(f"unsupported dtype {dt} (supported: {[str(d) for d in SUPPORTED_DTYPES]})")
    return dt


def reduce_into(dst: np.ndarray, src: np.ndarray, op: ReduceOp = ReduceOp.SUM) -> None:
    """dst <- dst (op) src, element-wise, in place."""
    if dst.shape != src.shape or dst.dtype != src.dtype:
        raise ValueError("reduce_into needs equal shapes and dtypes")
    with np.errstate(over="ignore"):
        _UFUNCS[ReduceOp(op)](dst, src, out=dst)
