"""circom witness files (.wtns, SNARKJS_FORMATS.md §4): values in standard form, read whole or
memory-mapped (:data:`distprove.formats.container.READ_WHOLE_BYTES`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from distprove import bn254
from distprove.bn254 import Q, R
from distprove.errors import FormatError
from distprove.formats.container import first_false, lt_bound, open_container, write_container

WTNS_MAX_VERSION = 2
_N8 = 32


@dataclass(frozen=True)
class Wtns:
    """A witness: ``values`` is an (n_witness, 8) uint32 standard-form read-only view of the file's
    data, in memory or, for a large file, mapped (``mapped``)."""

    path: str
    n_witness: int
    values: np.ndarray
    offset: int = 0
    """File offset of the first value (section 2's data), for readers that bypass the map."""
    mapped: bool = False
    """Whether ``values`` map the file (read on first touch) rather than hold it in memory."""


def value_error(path: str, index: int) -> FormatError:
    """The error of a witness whose value ``index`` is >= r (every reader raises this one)."""
    return FormatError(path, f"witness value {index} is >= r (not reduced)")


def count_error(path: str, n_witness: int, key: Any) -> FormatError:
    """The error of a witness of ``n_witness`` values for a key of another ``n_vars``."""
    return FormatError(
        path, f"witness has {n_witness} values but the key {os.path.basename(key.path)} expects {key.n_vars} (nVars)"
    )


def read_wtns(path: str | os.PathLike[str], *, check_values: bool = True) -> Wtns:
    """Map and validate a .wtns file: prime r, n8 32, nWitness·32 data bytes, every value < r.

    ``check_values=False`` skips the scan of every value (the caller reads a few values of a file
    already checked, and checks those itself); the header and sizes are always checked.

    The data length is computed as nWitness·32: circom_runtime writes the section-size field
    wrongly for data of 4 GiB or more, so a wrong stated size is accepted in that case only.
    Raises FormatError(path, problem).
    """
    w = open_container(path, "wtns", WTNS_MAX_VERSION, loose_last=2)
    s1 = w.section(1, "header")
    if s1.size < 4:
        w.fail(f"section 1 (header) has {s1.size} bytes, expected 40")
    n8 = w.u32(s1.offset)
    if n8 != _N8:
        w.fail(f"witness n8 is {n8}, expected 32 (BN254)")
    w.expect_size(1, "header", 4 + _N8 + 4)
    prime = w.uint(s1.offset + 4, _N8)
    if prime == Q:
        w.fail("witness prime is q (the base field), expected r (the BN254 scalar field)")
    if prime != R:
        w.fail(f"witness prime is {prime}, expected r (the BN254 scalar field)")
    n = w.u32(s1.offset + 4 + _N8)
    s2 = w.section(2, "witness values")
    need = n * _N8
    if s2.size < need:
        w.fail(f"truncated: section 2 holds {s2.size} bytes but nWitness {n} needs {need}")
    if s2.stated_size != need and need < 1 << 32:
        w.fail(f"section 2 states {s2.stated_size} bytes, expected nWitness * 32 = {need}")
    if s2.size > need:
        w.fail(f"{s2.size - need} bytes of trailing garbage after the {n} witness values")
    values = w.limbs(s2.offset, n, 8)
    i = first_false(lt_bound(values, R)) if check_values else None
    if i is not None:
        raise value_error(w.path, i)
    return Wtns(path=w.path, n_witness=n, values=values, offset=s2.offset, mapped=w.mapped)


def write_wtns(path: str | os.PathLike[str], values: np.ndarray | Sequence[int], *, durable: bool = True) -> None:
    """Write a version-2 .wtns atomically from an (n, 8) uint32 standard-form array or Python ints
    (``durable=False``: without fsync, for a scratch witness that a crash may lose).

    Raises ValueError when a value is not in [0, r).
    """
    if isinstance(values, np.ndarray):
        arr = np.ascontiguousarray(values, dtype="<u4").reshape(-1, 8)
    else:
        ints = [int(v) for v in values]
        if any(v < 0 or v >= R for v in ints):
            raise ValueError("witness values must be in [0, r)")
        arr = bn254.limbs_from_ints(ints).reshape(-1, 8)
    i = first_false(lt_bound(arr, R))
    if i is not None:
        raise ValueError(f"witness value {i} is >= r")
    header = np.array([_N8], "<u4").tobytes() + R.to_bytes(_N8, "little") + np.array([arr.shape[0]], "<u4").tobytes()
    write_container(path, "wtns", 2, [(1, header), (2, arr)], durable=durable)
