"""snarkjs powers-of-tau files (.ptau, SNARKJS_FORMATS.md §5): memory-mapped reader and streaming writer.

Point sections are read-only (n, 16) G1 / (n, 32) G2 Montgomery limb views. The Lagrange
sections 12-15 (present after ``prepare phase2``) concatenate levels p = 0, 1, ...; level p
holds 2^p points starting at point index 2^p - 1 (see :func:`lagrange_level`).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import BinaryIO, Callable

import numpy as np

from distprove.bn254 import G1, G2, Q, R
from distprove.formats.container import Container, SectionData, check_points, open_container, write_container

PTAU_MAX_VERSION = 1
MAX_POWER = 28
_N8 = 32


@dataclass(frozen=True)
class PtauHeader:
    """Section 1 of a ptau: the power (N = 2^power) and the ceremony's power."""

    power: int
    ceremony_power: int


@dataclass(frozen=True)
class Ptau:
    """A parsed ptau. Lagrange arrays are None when the file was not prepared for phase 2."""

    path: str
    power: int
    ceremony_power: int
    tau_g1: np.ndarray
    """(2N - 1, 16)"""
    tau_g2: np.ndarray
    """(N, 32)"""
    alpha_tau_g1: np.ndarray
    """(N, 16)"""
    beta_tau_g1: np.ndarray
    """(N, 16)"""
    beta_g2: np.ndarray
    """(32,)"""
    contributions: np.ndarray
    """section 7, raw uint8 bytes"""
    lagrange_tau_g1: np.ndarray | None
    """(2^(power+2) - 1, 16): levels 0 … power+1"""
    lagrange_tau_g2: np.ndarray | None
    """(2^(power+1) - 1, 32): levels 0 … power"""
    lagrange_alpha_tau_g1: np.ndarray | None
    """(2^(power+1) - 1, 16)"""
    lagrange_beta_tau_g1: np.ndarray | None
    """(2^(power+1) - 1, 16)"""

    @property
    def n_contributions(self) -> int:
        """The contribution count that opens section 7."""
        return int(self.contributions[:4].view("<u4")[0])


def lagrange_level(section: np.ndarray, p: int) -> np.ndarray:
    """The 2^p points of level ``p`` of a Lagrange section (rows 2^p - 1 … 2^(p+1) - 2)."""
    return section[(1 << p) - 1 : (1 << (p + 1)) - 1]


# (id, name, group, count as a function of N) of the point sections
_POINT_SECTIONS = {
    2: ("tauG1", G1, lambda n: 2 * n - 1),
    3: ("tauG2", G2, lambda n: n),
    4: ("alphaTauG1", G1, lambda n: n),
    5: ("betaTauG1", G1, lambda n: n),
    6: ("betaG2", G2, lambda n: 1),
    12: ("lagrange tauG1", G1, lambda n: 4 * n - 1),
    13: ("lagrange tauG2", G2, lambda n: 2 * n - 1),
    14: ("lagrange alphaTauG1", G1, lambda n: 2 * n - 1),
    15: ("lagrange betaTauG1", G1, lambda n: 2 * n - 1),
}


def _points(t: Container, sid: int, n: int, check: bool) -> np.ndarray:
    name, group, count = _POINT_SECTIONS[sid]
    rows = count(n)
    s = t.expect_size(sid, name, rows * group.limbs * 4)
    arr = t.limbs(s.offset, rows, group.limbs)
    if check:
        check_points(t.path, name, arr, group)
    return arr


def read_ptau(path: str | os.PathLike[str], check_points: bool = False) -> Ptau:
    """Map and validate a .ptau: header (n8 32, prime q, 1 <= power <= ceremonyPower <= 28),
    sections 2-7 present with the sizes the power implies, sections 12-15 (all or none) too.

    ``check_points`` also checks every point (coordinates < q, on the curve); it is off by
    default because ceremony files are large (2^(power+2) points) and come from a checked
    ceremony. Raises FormatError(path, problem).
    """
    t = open_container(path, "ptau", PTAU_MAX_VERSION)
    h = t.section(1, "header")
    if h.size < 4 or t.u32(h.offset) != _N8:
        t.fail(f"header n8 is {t.u32(h.offset) if h.size >= 4 else 'missing'}, expected 32 (BN254)")
    t.expect_size(1, "header", 4 + _N8 + 8)
    prime = t.uint(h.offset + 4, _N8)
    if prime != Q:
        which = "r (the scalar field)" if prime == R else str(prime)
        t.fail(f"ptau prime is {which}, expected q (the BN254 base field)")
    power, ceremony_power = struct.unpack("<II", t.data[h.offset + 36 : h.offset + 44].tobytes())
    if not 1 <= power <= ceremony_power <= MAX_POWER:
        t.fail(f"power {power} / ceremonyPower {ceremony_power} must satisfy 1 <= power <= ceremonyPower <= {MAX_POWER}")
    n = 1 << power
    pts = {sid: _points(t, sid, n, check_points) for sid in (2, 3, 4, 5, 6)}
    lag_ids = [sid for sid in (12, 13, 14, 15) if t.has(sid)]
    if lag_ids and len(lag_ids) != 4:
        missing = sorted({12, 13, 14, 15} - set(lag_ids))
        t.fail(f"Lagrange sections {missing} missing (12-15 come together after prepare phase2)")
    for sid in lag_ids:
        pts[sid] = _points(t, sid, n, check_points)
    contrib = t.raw(7, "contributions")
    if contrib.shape[0] < 4:
        t.fail(f"section 7 (contributions) has {contrib.shape[0]} bytes, too short for its count")
    return Ptau(
        path=t.path, power=power, ceremony_power=ceremony_power,
        tau_g1=pts[2], tau_g2=pts[3], alpha_tau_g1=pts[4], beta_tau_g1=pts[5], beta_g2=pts[6][0],
        contributions=contrib,
        lagrange_tau_g1=pts.get(12), lagrange_tau_g2=pts.get(13),
        lagrange_alpha_tau_g1=pts.get(14), lagrange_beta_tau_g1=pts.get(15),
    )


def write_ptau(
    path: str | os.PathLike[str],
    header: PtauHeader,
    sections: dict[int, SectionData],
    fill: Callable[[BinaryIO, dict[int, int]], object] | None = None,
) -> None:
    """Write a ptau atomically: section 1 from ``header``, then ``sections`` in increasing id order
    (as snarkjs does), each streamed from bytes, an array or an iterable of chunks, or reserved
    (:class:`~distprove.formats.container.Reserved`) and written in place by ``fill``
    (:func:`~distprove.formats.container.write_container`)."""
    if 1 in sections:
        raise ValueError("section 1 is written from the header")
    head = struct.pack("<I", _N8) + Q.to_bytes(_N8, "little") + struct.pack("<II", header.power, header.ceremony_power)
    write_container(path, "ptau", 1, [(1, head)] + sorted(sections.items(), key=lambda kv: kv[0]), fill)
