"""A key's points cut into contiguous ranges, one per worker, and a key restricted to one range.

Points mode (:mod:`distprove.cluster.planner`) proves a key larger than one worker: each of N
workers holds a share of every MSM's bases, the same index range of A, B1 and B2 (the witness
indices 0 .. n_vars), a range of C (its n_vars - n_public - 1 rows) and a range of H (the domain),
and computes the proof's partial MSMs over it; the partial points add up to the whole MSMs
(sum over ranges of sum_{i in range} s_i P_i).

:func:`point_ranges` cuts one array; :func:`key_shares` cuts a key for N workers;
:class:`KeyShareView` is a key (duck-typed as :mod:`distprove.backends.base` wants one) whose
point arrays are its share's ranges, read lazily through :class:`RangedArray` (a zarr store reads
only the chunks a range touches). A backend proves MSMs over it unchanged: the CPU converts only
the range's bases, the GPU uploads only the range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from distprove.backends.base import BASE_ATTR
from distprove.groth16 import MSM_NAMES

G1_BYTES = 64
"""A G1 affine point as the key stores it: two 8-limb coordinates of uint32."""
G2_BYTES = 128
"""A G2 affine point: four 8-limb coordinates."""
SCALAR_BYTES = 32
"""A scalar (or an evaluation) of Fr: 8 limbs of uint32."""

DEFAULT_ALIGN = 64
"""Range boundaries fall on multiples of this many points (except the array's end): whole
32-row G2 and 64-row G1 blocks of 4 KiB, so no two workers' ranges share a page of the key. A
zarr chunk (4 MiB) holds 32768 G2 or 65536 G1 rows, so a boundary inside a chunk makes the two
neighbouring workers each read that one chunk."""


def point_ranges(n: int, parts: int, align: int = DEFAULT_ALIGN) -> list[tuple[int, int]]:
    """[lo, hi) ranges of ``n`` points for ``parts`` workers: contiguous, in order, covering
    0 .. n exactly once, their boundaries multiples of ``align``; as even as the alignment
    allows (the ranges differ by at most one block of ``align``). Ranges beyond the number of
    blocks are empty (lo == hi == n)."""
    if parts < 1:
        raise ValueError(f"parts must be at least 1 (got {parts})")
    if n < 0 or align < 1:
        raise ValueError(f"need n >= 0 and align >= 1 (got n={n}, align={align})")
    blocks = -(-n // align)
    base, extra = divmod(blocks, parts)
    out: list[tuple[int, int]] = []
    lo_block = 0
    for i in range(parts):
        hi_block = lo_block + base + (1 if i < extra else 0)
        out.append((min(n, lo_block * align), min(n, hi_block * align)))
        lo_block = hi_block
    return out


def msm_lengths(n_vars: int, n_public: int, domain_size: int) -> dict[str, int]:
    """The number of bases of each MSM: A, B1, B2 over the witness, C over its private part
    (signals n_public + 1 .. n_vars - 1), H over the domain."""
    witness = {"A": n_vars, "B1": n_vars, "B2": n_vars, "C": n_vars - n_public - 1}
    return {which: witness.get(which, domain_size) for which in MSM_NAMES}


@dataclass(frozen=True)
class KeyShare:
    """One worker's share of a key's points: the [lo, hi) range of each MSM's bases (indices
    into that MSM's base array: C's row 0 is signal n_public + 1)."""

    index: int
    parts: int
    ranges: tuple[tuple[str, int, int], ...]
    """(MSM, lo, hi) for each of :data:`~distprove.groth16.MSM_NAMES`, in that order."""

    def range(self, which: str) -> tuple[int, int]:
        """The [lo, hi) range of MSM ``which``."""
        for name, lo, hi in self.ranges:
            if name == which:
                return lo, hi
        raise KeyError(which)

    @property
    def empty(self) -> bool:
        """Whether the share holds no point at all (more workers than blocks of points)."""
        return all(lo == hi for _, lo, hi in self.ranges)

    @property
    def tag(self) -> str:
        """A short name of the share, e.g. ``1of3``."""
        return f"{self.index + 1}of{self.parts}"


def key_shares(n_vars: int, n_public: int, domain_size: int, parts: int, align: int = DEFAULT_ALIGN) -> list[KeyShare]:
    """The key's points cut for ``parts`` workers: share i holds range i of every MSM
    (:func:`point_ranges` of each MSM's bases), so each holds about 1/parts of the key's point
    bytes. A, B1 and B2 share one cut (the same witness indices)."""
    lengths = msm_lengths(n_vars, n_public, domain_size)
    cuts = {which: point_ranges(n, parts, align) for which, n in lengths.items()}
    return [
        KeyShare(i, parts, tuple((which, *cuts[which][i]) for which in MSM_NAMES))
        for i in range(parts)
    ]


class RangedArray:
    """Rows [lo, hi) of an array-like (a zarr array, a memory map, an ndarray), read on slicing:
    ``view[a:b]`` reads rows lo + a .. lo + b of the source and nothing else."""

    def __init__(self, source: Any, lo: int, hi: int) -> None:
        if not 0 <= lo <= hi <= int(source.shape[0]):
            raise ValueError(f"range [{lo}, {hi}) is not inside the array's {source.shape[0]} rows")
        self._source, self.lo, self.hi = source, lo, hi
        self.shape: tuple[int, ...] = (hi - lo, *tuple(int(s) for s in source.shape[1:]))
        self.dtype = getattr(source, "dtype", np.dtype("<u4"))

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    def __getitem__(self, sel: Any) -> np.ndarray:
        if sel is Ellipsis:
            sel = slice(None)
        if not isinstance(sel, slice) or sel.step not in (None, 1):
            raise TypeError(f"a ranged array reads contiguous row slices only (got {sel!r})")
        a, b, _ = sel.indices(self.shape[0])
        b = max(a, b)
        return np.asarray(self._source[self.lo + a : self.lo + b])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[:]
        return out if dtype is None else out.astype(dtype)


class KeyShareView:
    """A key restricted to one :class:`KeyShare`: the header values, ``points`` and CSR of the key,
    and for each MSM's base array (``a``, ``b1``, ``b2``, ``c``, ``h``) only the share's range,
    as :class:`RangedArray`. Its ``content_hash`` names the share, so a backend's per-key state
    (converted or uploaded bases) is the share's alone.

    ``keep_host``: each range is read once, on first use, and kept in host memory (the CPU
    backend's arrays); without it every access reads from the key (a GPU backend uploads the
    range once and keeps it on the device).

    An MSM over the view takes that range's scalars: ``w[lo:hi]`` for A, B1, B2, ``h[lo:hi]`` for
    H and, as a backend slices C's scalars after the public signals, ``w[lo : hi + n_public + 1]``
    for C (:meth:`scalars`).
    """

    def __init__(self, key: Any, share: KeyShare, keep_host: bool = True) -> None:
        self._key = key
        self.share = share
        self._keep_host = keep_host
        self.path: str = key.path
        self.content_hash: str = f"{key.content_hash}#{share.tag}"
        self.key_hash: str = key.content_hash
        self.n_vars: int = key.n_vars
        self.n_public: int = key.n_public
        self.domain_size: int = key.domain_size

    @property
    def points(self) -> dict:
        return self._key.points

    def _ranged(self, attr: str) -> RangedArray:
        which = next(w for w, a in BASE_ATTR.items() if a == attr)
        lo, hi = self.share.range(which)
        return RangedArray(getattr(self._key, attr), lo, hi)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in BASE_ATTR.values():
            arr: Any = self._ranged(name)
            if self._keep_host:
                arr = arr[:]
                self.__dict__[name] = arr
            return arr
        return getattr(self._key, name)

    def stored_length(self, name: str) -> int:
        """Rows of base array ``name``'s range (nothing read)."""
        return len(self._ranged(name))

    def stored_rows(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Rows [lo, hi) of base array ``name`` (indices into the share's range): from the range
        kept in host memory when it is, else read from the key without keeping the range."""
        kept = self.__dict__.get(name)
        return np.asarray(kept[lo:hi] if kept is not None else self._ranged(name)[lo:hi])

    @property
    def held_bytes(self) -> int:
        """Host bytes of the ranges read and kept so far."""
        return sum(int(v.nbytes) for k, v in self.__dict__.items() if k in BASE_ATTR.values())

    @property
    def share_bytes(self) -> int:
        """Bytes of the share's point ranges (read or not)."""
        return sum(self._ranged(a).nbytes for a in BASE_ATTR.values())

    def scalars(self, which: str, witness: np.ndarray, hs: np.ndarray) -> np.ndarray:
        """The scalars of MSM ``which`` over this share from the proof's whole witness and H scalars
        (host (n, 8) arrays or device arrays: only sliced)."""
        lo, hi = self.share.range(which)
        if which == "H":
            return hs[lo:hi]
        if which == "C":
            return witness[lo : hi + self.n_public + 1]
        return witness[lo:hi]

    def __repr__(self) -> str:
        return f"KeyShareView({self._key!r}, {self.share.tag})"
