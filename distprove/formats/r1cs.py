"""circom constraint systems (.r1cs, SNARKJS_FORMATS.md §3): reader to CSR matrices and writer.

The constraints section is a sequence of linear combinations (A, B, C per constraint), each
``nTerms`` u32 followed by nTerms × (u32 wire, 32-byte standard-form coefficient). The reader
scans only the term counts in Python (one step per linear combination) and gathers the term
records with vectorised numpy indexing, in chunks; no Python object is made per term.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from distprove.bn254 import Q, R
from distprove.formats.container import Container, first_false, lt_bound, open_container, write_container

R1CS_MAX_VERSION = 1
_N8 = 32
_TERM = 4 + _N8  # bytes per term record
_HEADER_SIZE = 4 + _N8 + 4 * 4 + 8 + 4
_CHUNK_LCS = 3 * (1 << 15)
_MATRICES = "ABC"


@dataclass(frozen=True)
class CSR:
    """One constraint matrix by row: terms of row i are ``row_ptr[i]:row_ptr[i+1]``, in file order."""

    row_ptr: np.ndarray
    """(nConstraints + 1,) int64"""
    wire: np.ndarray
    """(nnz,) uint32"""
    coef: np.ndarray
    """(nnz, 8) uint32, standard form"""


@dataclass(frozen=True)
class R1CS:
    """A parsed .r1cs: header fields, the A, B, C matrices and the wire-to-label map (or None)."""

    path: str
    prime: int
    n_wires: int
    n_pub_out: int
    n_pub_in: int
    n_prv_in: int
    n_labels: int
    n_constraints: int
    A: CSR
    B: CSR
    C: CSR
    labels: np.ndarray | None


def read_r1cs(path: str | os.PathLike[str]) -> R1CS:
    """Map and parse a circom .r1cs (BN254 prime only, no custom gates).

    Checks the header (n8 32, prime r, public/private counts fit nWires), that the
    constraint section is exactly consumed, every wire < nWires and every coefficient < r.
    Raises FormatError(path, problem).
    """
    z = open_container(path, "r1cs", R1CS_MAX_VERSION)
    h = z.section(1, "header")
    if h.size < 4 or z.u32(h.offset) != _N8:
        z.fail(f"header n8 is {z.u32(h.offset) if h.size >= 4 else 'missing'}, expected 32 (BN254)")
    z.expect_size(1, "header", _HEADER_SIZE)
    o = h.offset
    prime = z.uint(o + 4, _N8)
    if prime != R:
        which = "q (the base field)" if prime == Q else str(prime)
        z.fail(f"r1cs prime is {which}, expected r (the BN254 scalar field)")
    n_wires, n_pub_out, n_pub_in, n_prv_in = struct.unpack("<4I", z.data[o + 36 : o + 52].tobytes())
    n_labels = z.uint(o + 52, 8)
    n_constraints = z.u32(o + 60)
    if n_wires < 1 + n_pub_out + n_pub_in + n_prv_in:
        z.fail(f"nWires {n_wires} < 1 + nPubOut + nPubIn + nPrvIn = {1 + n_pub_out + n_pub_in + n_prv_in}")
    for sid in (4, 5):
        if z.has(sid):
            z.fail(f"section {sid} (custom gates) is present; only plain R1CS (Groth16) is supported")
    A, B, C = _constraints(z, n_wires, n_constraints)
    labels = None
    if z.has(3):
        s3 = z.expect_size(3, "wire-to-label map", 8 * n_wires)
        labels = np.frombuffer(z.data, dtype="<u8", count=n_wires, offset=s3.offset)
    return R1CS(
        path=z.path, prime=prime, n_wires=n_wires, n_pub_out=n_pub_out, n_pub_in=n_pub_in,
        n_prv_in=n_prv_in, n_labels=n_labels, n_constraints=n_constraints, A=A, B=B, C=C, labels=labels,
    )


def _scan_counts(z: Container, start: int, end: int, n_lc: int) -> tuple[np.ndarray, np.ndarray]:
    """Term counts and byte offsets of the ``n_lc`` linear combinations in [start, end)."""
    counts = np.empty(n_lc, dtype=np.int64)
    offs = np.empty(n_lc, dtype=np.int64)
    buf = memoryview(z.data)
    unpack = struct.Struct("<I").unpack_from
    pos = start
    for k in range(n_lc):
        if pos + 4 > end:
            z.fail(f"truncated constraints section: constraint {k // 3} {_MATRICES[k % 3]} starts past its end")
        (t,) = unpack(buf, pos)
        counts[k] = t
        offs[k] = pos
        pos += 4 + _TERM * t
        if pos > end:
            z.fail(f"truncated constraints section: constraint {k // 3} {_MATRICES[k % 3]} has {t} terms, past its end")
    if pos != end:
        z.fail(f"constraints section has {end - pos} bytes after the last of {n_lc // 3} constraints")
    return counts, offs


def _constraints(z: Container, n_wires: int, n_constraints: int) -> tuple[CSR, CSR, CSR]:
    s = z.section(2, "constraints")
    n_lc = 3 * n_constraints
    if 4 * n_lc > s.size:
        z.fail(f"constraints section has {s.size} bytes, too short for nConstraints {n_constraints} (truncated)")
    counts, offs = _scan_counts(z, s.offset, s.offset + s.size, n_lc)
    per = counts.reshape(n_constraints, 3)
    row_ptrs = [np.concatenate(([0], np.cumsum(per[:, j]))).astype(np.int64) for j in range(3)]
    wires = [np.empty(int(rp[-1]), dtype="<u4") for rp in row_ptrs]
    coefs = [np.empty((int(rp[-1]), 8), dtype="<u4") for rp in row_ptrs]
    fill = [0, 0, 0]
    lc_matrix = np.tile(np.arange(3, dtype=np.int8), n_constraints)
    step = np.arange(9)
    aligned = s.offset % 4 == 0
    words = np.frombuffer(z.data, dtype="<u4", count=z.data.shape[0] // 4) if aligned else None
    for c0 in range(0, n_lc, _CHUNK_LCS):
        cnt = counts[c0 : c0 + _CHUNK_LCS]
        nnz = int(cnt.sum())
        if nnz == 0:
            continue
        first = np.cumsum(cnt) - cnt
        term_off = np.repeat(offs[c0 : c0 + _CHUNK_LCS] + 4 - _TERM * first, cnt) + _TERM * np.arange(nnz)
        rec = words[(term_off // 4)[:, None] + step] if words is not None else _gather_unaligned(z, term_off)
        which = np.repeat(lc_matrix[c0 : c0 + _CHUNK_LCS], cnt)
        for j in range(3):
            sel = rec[which == j]
            wires[j][fill[j] : fill[j] + sel.shape[0]] = sel[:, 0]
            coefs[j][fill[j] : fill[j] + sel.shape[0]] = sel[:, 1:]
            fill[j] += sel.shape[0]
    out = []
    for j in range(3):
        i = first_false(wires[j] < n_wires)
        if i is not None:
            row = int(np.searchsorted(row_ptrs[j], i, side="right")) - 1
            z.fail(f"constraint {row} {_MATRICES[j]}: wire {int(wires[j][i])} >= nWires {n_wires}")
        i = first_false(lt_bound(coefs[j], R))
        if i is not None:
            row = int(np.searchsorted(row_ptrs[j], i, side="right")) - 1
            z.fail(f"constraint {row} {_MATRICES[j]}: coefficient is >= r (not reduced)")
        out.append(CSR(row_ptrs[j], wires[j], coefs[j]))
    return out[0], out[1], out[2]


def _gather_unaligned(z: Container, term_off: np.ndarray) -> np.ndarray:
    """Term records at byte offsets that are not 4-aligned: gather bytes, then view as u32."""
    raw = z.data[term_off[:, None] + np.arange(_TERM)]
    return np.ascontiguousarray(raw).view("<u4")


def _constraint_chunks(A: CSR, B: CSR, C: CSR, n_constraints: int, chunk: int = 1 << 15) -> Iterator[np.ndarray]:
    """Encode section 2 in blocks of constraints, vectorised."""
    mats = (A, B, C)
    for c0 in range(0, n_constraints, chunk):
        c1 = min(c0 + chunk, n_constraints)
        cnt = np.stack([np.diff(m.row_ptr[c0 : c1 + 1]) for m in mats], axis=1).reshape(-1)
        words = 1 + 9 * cnt
        woff = np.cumsum(words) - words
        out = np.zeros(int(words.sum()), dtype="<u4")
        out[woff] = cnt
        woff3 = woff.reshape(-1, 3)
        for j, m in enumerate(mats):
            lo, hi = int(m.row_ptr[c0]), int(m.row_ptr[c1])
            if hi == lo:
                continue
            cj = cnt.reshape(-1, 3)[:, j]
            first = np.cumsum(cj) - cj
            dest = np.repeat(woff3[:, j] + 1 - 9 * first, cj) + 9 * np.arange(hi - lo)
            rec = np.empty((hi - lo, 9), dtype="<u4")
            rec[:, 0] = m.wire[lo:hi]
            rec[:, 1:] = m.coef[lo:hi]
            out[dest[:, None] + np.arange(9)] = rec
        yield out


def write_r1cs(
    path: str | os.PathLike[str],
    n_wires: int,
    n_pub_out: int,
    n_pub_in: int,
    n_prv_in: int,
    n_labels: int,
    A: CSR,
    B: CSR,
    C: CSR,
    labels: np.ndarray | None = None,
) -> None:
    """Write a BN254 .r1cs atomically in circom's layout: sections 2 (constraints), 1 (header),
    3 (wire-to-label map; ``labels`` defaults to 0 … nWires-1). snarkjs reads the result."""
    n_constraints = len(A.row_ptr) - 1
    if not len(B.row_ptr) - 1 == len(C.row_ptr) - 1 == n_constraints:
        raise ValueError("A, B and C must have the same number of rows")
    header = (
        struct.pack("<I", _N8)
        + R.to_bytes(_N8, "little")
        + struct.pack("<4IQI", n_wires, n_pub_out, n_pub_in, n_prv_in, n_labels, n_constraints)
    )
    lab = np.arange(n_wires, dtype="<u8") if labels is None else np.asarray(labels, dtype="<u8")
    if lab.shape != (n_wires,):
        raise ValueError(f"labels must have nWires = {n_wires} entries")
    write_container(path, "r1cs", 1, [(2, _constraint_chunks(A, B, C, n_constraints)), (1, header), (3, lab)])
