"""Point validation on the CPU: every coordinate < q and every point on its curve, compiled by numba.

A key holds millions of points in the on-disk layout (Montgomery form, little-endian 32-bit limbs,
G1 rows (x, y), G2 rows (x.c0, x.c1, y.c0, y.c1), infinity = all-zero row). Each point is checked
where it lies, without decoding, with the limb arithmetic of :mod:`distprove.fqlimbs` (CIOS
Montgomery products on 32-bit limbs held in uint64), and the curve equation stays in Montgomery form:
with X = x·R, Y = y·R, mont(a, b) = a·b·R⁻¹,  y² = x³ + b  <=>  mont(Y, Y) = mont(mont(X, X), X) + b·R,
per component in Fq2 for G2 (u² = −1). 3 products a G1 point, 10 a G2 point.

The compiled loops release the GIL and run on a thread pool, one slice of the rows a core (numba's
own parallel loops cost a third of a second to load in a fresh process); each point gets a status
code and the caller reports the first bad one. No subgroup check, like snarkjs.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit
from dask.system import CPU_COUNT

from distprove import bn254
from distprove.fqlimbs import fq_add as _add
from distprove.fqlimbs import fq_ge_q as _ge_q
from distprove.fqlimbs import fq_mul as _mul
from distprove.fqlimbs import fq_sub as _sub
from distprove.fqlimbs import limbs_of

OK, COORD_GE_Q, OFF_CURVE = 0, 1, 2
"""Per-point status codes."""

_B1 = limbs_of(3 * bn254.FQ_MONT % bn254.Q)
_B2_0 = limbs_of(bn254.G2.b[0] * bn254.FQ_MONT % bn254.Q)
_B2_1 = limbs_of(bn254.G2.b[1] * bn254.FQ_MONT % bn254.Q)
_BLOCK = 4096
"""Rows below which one thread does the whole array."""


@njit(cache=True)
def _coord(row: np.ndarray, c: int) -> tuple:
    """Coordinate ``c`` of a row as 8 uint64 limbs."""
    o = 8 * c
    return (
        np.uint64(row[o]), np.uint64(row[o + 1]), np.uint64(row[o + 2]), np.uint64(row[o + 3]),
        np.uint64(row[o + 4]), np.uint64(row[o + 5]), np.uint64(row[o + 6]), np.uint64(row[o + 7]),
    )


@njit(cache=True)
def _g1_status(row: np.ndarray) -> int:
    live = False
    for k in range(16):
        if row[k] != 0:
            live = True
            break
    if not live:
        return OK
    x, y = _coord(row, 0), _coord(row, 1)
    if _ge_q(x) or _ge_q(y):
        return COORD_GE_Q
    lhs = _mul(y, y)  # y²R
    rhs = _add(_mul(_mul(x, x), x), _B1)  # x³R + bR
    return OK if lhs == rhs else OFF_CURVE


@njit(cache=True)
def _g2_status(row: np.ndarray) -> int:
    live = False
    for k in range(32):
        if row[k] != 0:
            live = True
            break
    if not live:
        return OK
    x0, x1, y0, y1 = _coord(row, 0), _coord(row, 1), _coord(row, 2), _coord(row, 3)
    if _ge_q(x0) or _ge_q(x1) or _ge_q(y0) or _ge_q(y1):
        return COORD_GE_Q
    s0 = _sub(_mul(x0, x0), _mul(x1, x1))  # x² = (x0² − x1², 2·x0·x1)
    p = _mul(x0, x1)
    s1 = _add(p, p)
    r0 = _add(_sub(_mul(s0, x0), _mul(s1, x1)), _B2_0)  # x³ + b
    r1 = _add(_add(_mul(s0, x1), _mul(s1, x0)), _B2_1)
    l0 = _sub(_mul(y0, y0), _mul(y1, y1))  # y²
    p = _mul(y0, y1)
    l1 = _add(p, p)
    return OK if (l0 == r0 and l1 == r1) else OFF_CURVE


@njit(nogil=True, cache=True)
def _status_g1(limbs: np.ndarray, status: np.ndarray) -> None:
    for i in range(limbs.shape[0]):
        status[i] = _g1_status(limbs[i])


@njit(nogil=True, cache=True)
def _status_g2(limbs: np.ndarray, status: np.ndarray) -> None:
    for i in range(limbs.shape[0]):
        status[i] = _g2_status(limbs[i])


_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(CPU_COUNT, thread_name_prefix="pointcheck")
    return _POOL


def point_status(limbs: np.ndarray, group: bn254.Group) -> np.ndarray:
    """Per-row status (OK, COORD_GE_Q, OFF_CURVE) of an (n, 16) G1 or (n, 32) G2 limb array."""
    arr = np.ascontiguousarray(limbs, dtype=np.uint32)
    if arr.ndim != 2 or arr.shape[1] != group.limbs:
        raise ValueError(f"expected (n, {group.limbs}) limbs for {group.name}, got {arr.shape}")
    n = arr.shape[0]
    status = np.empty(n, dtype=np.uint8)
    fn = _status_g1 if group is bn254.G1 else _status_g2
    parts = min(CPU_COUNT, -(-n // _BLOCK))
    if parts <= 1:
        fn(arr, status)
        return status
    step = -(-n // parts)
    jobs = [_pool().submit(fn, arr[lo : lo + step], status[lo : lo + step]) for lo in range(0, n, step)]
    for job in jobs:
        job.result()
    return status


def first_bad_point(limbs: np.ndarray, group: bn254.Group, chunk: int = 1 << 20) -> tuple[int, int] | None:
    """(index, status) of the first point with a coordinate >= q or off its curve, or None.

    Runs ``chunk`` rows at a time, so a bad key stops early and the status array stays small.
    """
    for lo in range(0, limbs.shape[0], chunk):
        st = point_status(limbs[lo : lo + chunk], group)
        bad = np.flatnonzero(st)
        if bad.size:
            i = int(bad[0])
            return lo + i, int(st[i])
    return None
