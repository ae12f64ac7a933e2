"""snarkjs Groth16 proving keys (.zkey, SNARKJS_FORMATS.md §6), memory-mapped and validated.

Point arrays are read-only views of the mapped file in the on-disk layout (Montgomery,
little-endian uint32 limbs; infinity = all-zero row); see docs/DESIGN.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from distprove import bn254
from distprove.bn254 import G1, G2, Q, R
from distprove.errors import FormatError
from distprove.formats.container import (
    Container,
    PointChecker,
    check_few_points,
    check_points,
    first_false,
    lt_bound,
    open_container,
)

ZKEY_MAX_VERSION = 2
_PROTOCOLS = {1: "Groth16", 2: "PLONK", 10: "FFLONK"}
_HEADER_SIZE = 660
_COEF_DTYPE = np.dtype([("matrix", "<u4"), ("row", "<u4"), ("signal", "<u4"), ("value", "<u4", (8,))])
assert _COEF_DTYPE.itemsize == 44
ZKEY_POINT_ARRAYS = ("IC", "A", "B1", "B2", "C", "H")
"""The point arrays in file order (sections 3, 5-9), as :func:`check_zkey_points` names them."""


@dataclass(frozen=True)
class ZKey:
    """A Groth16 zkey. Point fields are Montgomery limb rows ((16,) G1, (32,) G2); section arrays
    are read-only views of the mapped file. ``coef_value`` is the stored coef·R² mod r."""

    path: str
    n8q: int
    n8r: int
    n_vars: int
    n_public: int
    domain_size: int
    power: int
    alpha1: np.ndarray
    beta1: np.ndarray
    beta2: np.ndarray
    gamma2: np.ndarray
    delta1: np.ndarray
    delta2: np.ndarray
    ic: np.ndarray
    coef_matrix: np.ndarray
    coef_row: np.ndarray
    coef_signal: np.ndarray
    coef_value: np.ndarray
    a: np.ndarray
    b1: np.ndarray
    b2: np.ndarray
    c: np.ndarray
    h: np.ndarray

    @property
    def n_coefs(self) -> int:
        """Number of coefficient records (section 4)."""
        return int(self.coef_matrix.shape[0])


def _header_point(z: Container, off: int, name: str, width: int) -> np.ndarray:
    row = z.limbs(off, 1, width)
    check_few_points(z.path, name, row, G1 if width == 16 else G2)
    return row[0]


def _points(z: Container, sid: int, name: str, rows: int, width: int) -> np.ndarray:
    s = z.expect_size(sid, name, rows * width * 4)
    return z.limbs(s.offset, rows, width)


def read_zkey(path: str | os.PathLike[str], check_points: bool = True) -> ZKey:
    """Map and validate a snarkjs Groth16 .zkey: :func:`open_zkey`, :func:`check_coefficients`,
    then with ``check_points`` (default) :func:`check_zkey_points` on the CPU; pass False to skip
    the point checks for keys already validated (or checked elsewhere: ``keystore.ZkeyKey``
    checks them on the GPU when there is one). Raises FormatError(path, problem).
    """
    z = open_zkey(path)
    check_coefficients(z)
    if check_points:
        check_zkey_points(z)
    return z


def open_zkey(path: str | os.PathLike[str]) -> ZKey:
    """Map a snarkjs Groth16 .zkey and run the checks that read no more than its headers.

    Checks the container, protocol (Groth16 only), q and r (BN254), the header values, every
    section size and the six header points; the arrays are views of the mapped file, so this
    costs microseconds whatever the key's size. :func:`check_coefficients` and
    :func:`check_zkey_points` check the records and points (:func:`read_zkey` runs all three).
    Raises FormatError(path, problem).
    """
    z = open_container(path, "zkey", ZKEY_MAX_VERSION)
    s1 = z.expect_size(1, "protocol", 4)
    proto = z.u32(s1.offset)
    if proto != 1:
        label = _PROTOCOLS.get(proto, "unknown")
        z.fail(f"protocol {proto} ({label}) is not supported, only Groth16 (1)")

    h = z.expect_size(2, "Groth16 header", _HEADER_SIZE).offset
    n8q = z.u32(h)
    if n8q != 32:
        z.fail(f"header n8q is {n8q}, expected 32 (BN254)")
    if z.uint(h + 4, 32) != Q:
        z.fail("header q is not BN254's base field prime (only bn128 is supported)")
    n8r = z.u32(h + 36)
    if n8r != 32:
        z.fail(f"header n8r is {n8r}, expected 32 (BN254)")
    if z.uint(h + 40, 32) != R:
        z.fail("header r is not BN254's scalar field prime (only bn128 is supported)")
    n_vars, n_public, domain_size = z.u32(h + 72), z.u32(h + 76), z.u32(h + 80)
    if n_vars < 1 or n_public + 1 > n_vars:
        z.fail(f"header nVars {n_vars} must be >= nPublic + 1 = {n_public + 1}")
    if domain_size == 0 or domain_size & (domain_size - 1):
        z.fail(f"header domainSize {domain_size} is not a power of two")
    power = domain_size.bit_length() - 1
    if power > bn254.FR_S:
        z.fail(f"header domainSize 2^{power} exceeds 2^{bn254.FR_S}")
    alpha1 = _header_point(z, h + 84, "alpha1", 16)
    beta1 = _header_point(z, h + 148, "beta1", 16)
    beta2 = _header_point(z, h + 212, "beta2", 32)
    gamma2 = _header_point(z, h + 340, "gamma2", 32)
    delta1 = _header_point(z, h + 468, "delta1", 16)
    delta2 = _header_point(z, h + 532, "delta2", 32)

    ic = _points(z, 3, "IC", n_public + 1, 16)
    matrix, row, signal, value = _coefficients(z)
    a = _points(z, 5, "A", n_vars, 16)
    b1 = _points(z, 6, "B1", n_vars, 16)
    b2 = _points(z, 7, "B2", n_vars, 32)
    c = _points(z, 8, "C", n_vars - n_public - 1, 16)
    hpts = _points(z, 9, "H", domain_size, 16)
    return ZKey(
        path=z.path, n8q=n8q, n8r=n8r, n_vars=n_vars, n_public=n_public, domain_size=domain_size,
        power=power, alpha1=alpha1, beta1=beta1, beta2=beta2, gamma2=gamma2, delta1=delta1,
        delta2=delta2, ic=ic, coef_matrix=matrix, coef_row=row, coef_signal=signal,
        coef_value=value, a=a, b1=b1, b2=b2, c=c, h=hpts,
    )


def _coefficients(z: Container) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Section 4 as (matrix, row, signal, value) views of one structured array (its size checked)."""
    s = z.section(4, "coefficients")
    if s.size < 4:
        z.fail(f"section 4 (coefficients) has {s.size} bytes, too short for its record count")
    n = z.u32(s.offset)
    if s.size != 4 + 44 * n:
        z.fail(f"section 4 (coefficients) has {s.size} bytes, expected 4 + 44 * nCoefs ({n}) = {4 + 44 * n}")
    rec = np.frombuffer(z.data, dtype=_COEF_DTYPE, count=n, offset=s.offset + 4)
    return rec["matrix"], rec["row"], rec["signal"], rec["value"]


def check_coefficients(z: ZKey) -> None:
    """Every coefficient record of section 4: matrix in {0, 1}, row < domainSize, signal < nVars,
    value < r. Raises FormatError(path, problem) naming the first bad record."""
    for arr, ok, what in (
        (z.coef_matrix, z.coef_matrix <= 1, "matrix {v} (expected 0 = A or 1 = B)"),
        (z.coef_row, z.coef_row < z.domain_size, f"constraint {{v}} >= domainSize {z.domain_size}"),
        (z.coef_signal, z.coef_signal < z.n_vars, f"signal {{v}} >= nVars {z.n_vars}"),
    ):
        i = first_false(ok)
        if i is not None:
            raise FormatError(z.path, f"coefficient {i} has " + what.format(v=int(arr[i])))
    i = first_false(lt_bound(z.coef_value, R))
    if i is not None:
        raise FormatError(z.path, f"coefficient {i} value is >= r (not reduced)")


def check_zkey_points(
    z: ZKey, first_bad: PointChecker | None = None, names: tuple[str, ...] = ZKEY_POINT_ARRAYS
) -> None:
    """Every point of the arrays ``names`` (of IC, A, B1, B2, C, H: sections 3 and 5-9) has
    coordinates < q and lies on its curve, scanned by ``first_bad``
    (:func:`~distprove.formats.container.check_points`: the CPU's by default). Raises
    FormatError(path, "<name> point <i> ...")."""
    for name in names:
        arr = getattr(z, name.lower())
        check_points(z.path, name, arr, G2 if arr.shape[1] == 32 else G1, first_bad)
