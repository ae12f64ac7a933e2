"""The zarr key store: a snarkjs Groth16 key imported once, read lazily by chunk range.

Layout (zarr v3 group; ``docs/KEYSTORE.md`` is the user-facing description):

* ``a``, ``b1``, ``c``, ``h``, ``ic``: G1 affine points, ``(n, 16)`` uint32; ``b2``: G2, ``(n, 32)``.
  Montgomery form, little-endian 32-bit limbs, G2 as x.c0, x.c1, y.c0, y.c1; infinity = zeros.
  These are the zkey's bytes unchanged, so the GPU uploads them without conversion.
* ``a_row_ptr``/``a_signal``/``a_value`` and the same for ``b``: the coefficients as CSR by
  constraint row over the whole domain; values kept as the zkey stores them (coef·R² mod r).
* Attributes: ``distprove`` (layout version), ``header`` (sizes), ``points`` (alpha1, beta1,
  beta2, gamma2, delta1, delta2 as decimal strings), ``vk`` (verification_key.json), ``source``
  (file name, size and SHA-256 of the imported .zkey).

Every array is chunked along its element axis and every chunk carries a CRC32C checksum.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import mmap
import os
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from dask.system import CPU_COUNT

from . import bn254
from .errors import BackendUnavailable, FormatError, OutputExists
from .priority import nicer

LAYOUT_VERSION = 1
CHUNK_BYTES = 4 << 20
POINT_ARRAYS = {"a": bn254.G1, "b1": bn254.G1, "b2": bn254.G2, "c": bn254.G1, "h": bn254.G1, "ic": bn254.G1}
CSR_ARRAYS = tuple(f"{m}_{part}" for m in ("a", "b") for part in ("row_ptr", "signal", "value"))

_log = logging.getLogger(__name__)


@contextmanager
def _stage(name: str) -> Iterator[None]:
    """Time one stage of an import or store write and log it at DEBUG, the record carrying
    ``span = (name, start, end)`` in ``time.perf_counter`` seconds and its thread: with DEBUG on
    for this logger, the log is the import's timeline (``pipelines/bench_import.py`` records it)."""
    if not _log.isEnabledFor(logging.DEBUG):
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        t1 = time.perf_counter()
        _log.debug("stage %s: %.2f ms", name, (t1 - t0) * 1e3, extra={"span": (name, t0, t1)})


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file, hashed from a read-only mapping in 16 MiB blocks (no copy; hashlib
    releases the GIL on each block, so it runs beside other work)."""
    h = hashlib.sha256()
    with _stage("hash"), open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return h.hexdigest()
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m, memoryview(m) as view:
            for lo in range(0, size, 16 << 20):
                h.update(view[lo : lo + (16 << 20)])
    return h.hexdigest()


def point_checker(device: str) -> Any:
    """The scan of a limb array for its first bad point on ``device`` ("cpu": compiled, on all
    cores, :mod:`distprove.formats.pointcheck`; "gpu": :mod:`distprove.backends.gpu.validate`),
    for :func:`distprove.formats.zkey.check_zkey_points`."""
    if device == "gpu":
        from .backends.gpu.validate import first_bad_point
    elif device == "cpu":
        from .formats.pointcheck import first_bad_point
    else:
        raise ValueError(f"device must be 'cpu' or 'gpu', not {device!r}")
    return first_bad_point


def validation_device(device: str) -> str:
    """Where a key's point checks run: "cpu" or "gpu"; "auto" is the GPU when one is available."""
    if device not in ("auto", "cpu", "gpu"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'gpu', not {device!r}")
    if device == "cpu":
        return device
    from .backends.gpu import available

    if available():
        return "gpu"
    if device == "gpu":
        raise BackendUnavailable("backend 'gpu' requested but CuPy sees no CUDA device")
    return "cpu"


def _decimal_affine(g: bn254.Group, p: bn254.Affine) -> Any:
    if p is None:
        return None
    if g is bn254.G1:
        return [str(p[0]), str(p[1])]
    return [[str(p[0][0]), str(p[0][1])], [str(p[1][0]), str(p[1][1])]]


def _coordinate(x: Any) -> int:
    """One coordinate written by _decimal_affine: a decimal string (or an int). Anything else, a
    float included (JSON's 1e400 is infinity; 1.5 would truncate), raises ValueError."""
    if isinstance(x, bool) or not isinstance(x, (str, int)):
        raise ValueError(f"coordinate {x!r} is not a decimal string")
    return int(x)


def _point_from_decimal(g: bn254.Group, v: Any) -> bn254.Affine:
    if v is None:
        return None
    if g is bn254.G1:
        return (_coordinate(v[0]), _coordinate(v[1]))
    return ((_coordinate(v[0][0]), _coordinate(v[0][1])), (_coordinate(v[1][0]), _coordinate(v[1][1])))


@dataclass(frozen=True)
class KeyShape:
    """A key's circuit in numbers: its R1CS constraints (the circuit's own, without the rows the
    setup adds for the public signals), signals (nVars, the constant one included), public
    signals (outputs and public inputs) and domain size."""

    n_constraints: int
    n_vars: int
    n_public: int
    domain_size: int

    def __str__(self) -> str:
        return (f"{self.n_constraints} constraints, {self.n_vars} signals, {self.n_public} public, "
                f"domain 2^{self.domain_size.bit_length() - 1}")


def circuit_constraints(path: str, last_row: int, tail: np.ndarray, n_public: int) -> int:
    """The circuit's R1CS constraint count from a key's A matrix. snarkjs's setup (and
    :mod:`distprove.devsetup`) append to the circuit's nConstraints rows one A row per public
    signal and the constant one: row nConstraints + s holds signal s alone (s = 0 .. nPublic), so
    nConstraints is the last A row with terms minus nPublic. ``last_row``: that row (-1 when A is
    empty); ``tail``: the signals of the A terms of rows ``last_row - n_public`` .. ``last_row``,
    in row order, which must be 0 .. nPublic. Raises FormatError(path, problem) otherwise."""
    n = last_row - n_public
    if n < 0 or not np.array_equal(tail, np.arange(n_public + 1)):
        raise FormatError(
            path, f"the A matrix does not end with the {n_public + 1} rows of the public signals 0..{n_public} "
            "(one term each) that a Groth16 setup appends: cannot tell the circuit's constraints"
        )
    return n


class _KeyBase:
    """What both key kinds share: header values, the prover's points and the vk."""

    n_vars: int
    n_public: int
    domain_size: int
    content_hash: str
    path: str

    @property
    def power(self) -> int:
        return self.domain_size.bit_length() - 1

    @property
    def n_constraints(self) -> int:
        """The circuit's R1CS constraints (:func:`circuit_constraints`)."""
        raise NotImplementedError

    @property
    def shape(self) -> KeyShape:
        """Constraints, signals, public signals and domain (:class:`KeyShape`)."""
        return KeyShape(self.n_constraints, self.n_vars, self.n_public, self.domain_size)

    @property
    def points(self) -> dict[str, bn254.Affine]:
        """alpha1, beta1, delta1 (G1) and beta2, gamma2, delta2 (G2) as affine Python ints."""
        raise NotImplementedError

    def vk_json(self) -> dict:
        """The verification key in snarkjs's verification_key.json layout."""
        raise NotImplementedError


class KeyStore(_KeyBase):
    """A key imported into zarr. Arrays are opened lazily; slicing reads only the chunks it needs."""

    def __init__(self, path: str | os.PathLike[str], *, check_arrays: bool = True) -> None:
        """Open a store and run the cheap checks: attributes present and consistent, every array
        present with the dtype and shape the header implies, each CSR's ``row_ptr`` starting at 0,
        non-decreasing and ending at its term count (reads the row pointers only, in chunks).
        :meth:`validate` checks the rest. Raises a one-line FormatError naming the store or array.

        ``check_arrays=False`` leaves out the array checks, for a store whose arrays
        :func:`check_store_arrays` has just checked under its temporary name (as
        :func:`import_key` does beside the hash)."""
        import zarr

        self.path = os.fspath(path)
        try:
            self._group = zarr.open_group(self.path, mode="r")
        except Exception as exc:  # zarr raises several types for a missing or broken store
            raise FormatError(self.path, f"not a distprove key store ({exc.__class__.__name__}: {exc})") from None
        attrs = self._group.attrs.asdict()
        meta = attrs.get("distprove", {})
        if not isinstance(meta, dict) or meta.get("layout") != LAYOUT_VERSION:
            raise FormatError(self.path, f"not a distprove key store of layout {LAYOUT_VERSION} (found {meta or 'none'})")
        self.attrs = attrs
        for name in ("header", "points", "vk", "source"):
            if not isinstance(attrs.get(name), dict):
                raise FormatError(self.path, f"attribute {name!r} is missing or not a mapping (damaged zarr.json?)")
        header = attrs["header"]
        values = {}
        for name in ("n_vars", "n_public", "domain_size", "n_coefs"):
            v = header.get(name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise FormatError(self.path, f"attribute header.{name} is {v!r}, expected a non-negative integer")
            values[name] = v
        self.n_vars = values["n_vars"]
        self.n_public = values["n_public"]
        self.domain_size = values["domain_size"]
        if self.n_public + 1 > self.n_vars:
            raise FormatError(self.path, f"header n_vars {self.n_vars} must be >= n_public + 1 = {self.n_public + 1}")
        d = self.domain_size
        if d == 0 or d & (d - 1) or d.bit_length() - 1 > bn254.FR_S:
            raise FormatError(self.path, f"header domain_size {d} is not a power of two <= 2^{bn254.FR_S}")
        sha = attrs["source"].get("sha256")
        if not isinstance(sha, str) or not sha:
            raise FormatError(self.path, "attribute source.sha256 (the key's content hash) is missing")
        self.content_hash = sha
        self._check_point_attrs()
        if check_arrays:
            check_store_arrays(self.path, self._group, self.n_vars, self.n_public, self.domain_size, values["n_coefs"])

    def _check_point_attrs(self) -> None:
        """The ``points`` attribute: six affine points as decimal strings, on their curves."""
        pts = self.attrs["points"]
        for name in ("alpha1", "beta1", "delta1", "beta2", "gamma2", "delta2"):
            group = bn254.G2 if name.endswith("2") else bn254.G1
            try:
                p = _point_from_decimal(group, pts[name])
                ok = p is not None and all(0 <= c < bn254.Q for c in np.ravel(np.array(p, dtype=object)))
                ok = ok and bn254.is_on_curve(group, p)
            except (KeyError, TypeError, ValueError, IndexError):
                ok = False
            if not ok:
                raise FormatError(self.path, f"attribute points.{name} is not a {group.name} point")

    def _array_path(self, name: str) -> str:
        return os.path.join(self.path, name)

    def validate(self, points: bool = True) -> None:
        """The full check, reading every array once (chunk by chunk; checksums verified by zarr).

        Beyond the open-time checks: every signal index < n_vars, every coefficient value < r and
        non-zero, no chunk of a CSR term array missing, the ``points`` and ``vk`` attributes
        agreeing with each other and with ``ic``; with ``points`` (default) also every point's
        coordinates < q and on its curve, and no point at infinity where the key needs one (H and IC
        points never are; an A/B1/B2 point is not when its signal has terms in that matrix, a C
        point not when its signal has A or B terms). A deleted point chunk reads as zeros
        (infinity), so this is what finds it. Raises the first problem as a one-line FormatError.
        """
        from .formats.container import check_points, first_false, lt_bound
        from .formats.jsonio import read_vk

        used: dict[str, np.ndarray] = {}
        for m in ("a", "b"):
            for part in ("signal", "value"):
                arr = self.__getattr__(f"{m}_{part}")._array
                missing = arr.nchunks - arr.nchunks_initialized
                if missing:
                    raise FormatError(self._array_path(f"{m}_{part}"), f"{missing} of {arr.nchunks} chunks are missing")
            seen = np.zeros(self.n_vars, dtype=bool)
            sig, val = self.__getattr__(f"{m}_signal"), self.__getattr__(f"{m}_value")
            step = max(1, sig.chunks[0])
            for lo in range(0, sig.shape[0], step):
                s = sig[lo : lo + step]
                i = first_false(s < self.n_vars)
                if i is not None:
                    raise FormatError(self._array_path(sig.name), f"term {lo + i} has signal {int(s[i])} >= n_vars {self.n_vars}")
                seen[s] = True
            step = max(1, val.chunks[0])
            for lo in range(0, val.shape[0], step):
                v = val[lo : lo + step]
                i = first_false(lt_bound(v, bn254.R))
                if i is not None:
                    raise FormatError(self._array_path(val.name), f"term {lo + i} has a coefficient value >= r")
                i = first_false(v.any(axis=1))
                if i is not None:
                    raise FormatError(self._array_path(val.name), f"term {lo + i} has coefficient 0 (a zeroed or missing chunk?)")
            used[m] = seen
        try:
            vk = read_vk(self.vk_json())
        except FormatError as exc:
            raise FormatError(self.path, f"attribute vk: {exc.problem}") from None
        if vk.n_public != self.n_public:
            raise FormatError(self.path, f"attribute vk has nPublic {vk.n_public}, header n_public is {self.n_public}")
        pts = self.points
        for name, vk_value in (("alpha1", vk.alpha1), ("beta2", vk.beta2), ("gamma2", vk.gamma2), ("delta2", vk.delta2)):
            if pts[name] != vk_value:
                raise FormatError(self.path, f"attribute points.{name} differs from the vk's")
        if bn254.points_from_limbs(bn254.G1, self.ic[:]) != vk.ic:
            raise FormatError(self._array_path("ic"), "the IC points differ from the vk's IC")
        if not points:
            return
        need = {
            "a": used["a"], "b1": used["b"], "b2": used["b"], "c": (used["a"] | used["b"])[self.n_public + 1 :],
            "h": None, "ic": None,
        }
        for name, group in POINT_ARRAYS.items():
            arr = self.__getattr__(name)
            step = max(1, arr.chunks[0])
            for lo in range(0, arr.shape[0], step):
                block = arr[lo : lo + step]
                check_points(self._array_path(name), name, block, group)
                inf = ~block.any(axis=1)
                mask = inf if need[name] is None else inf & need[name][lo : lo + block.shape[0]]
                bad = np.flatnonzero(mask)
                if bad.size:
                    i = lo + int(bad[0])
                    why = "" if need[name] is None else " but its signal has terms in the key's matrices"
                    raise FormatError(
                        self._array_path(name), f"point {i} is infinity (all zero){why} (a zeroed or missing chunk?)"
                    )

    def __getattr__(self, name: str) -> Any:
        if name in POINT_ARRAYS or name in CSR_ARRAYS:
            try:
                arr = _StoredArray(self.path, name, self._group[name])
            except KeyError:
                raise FormatError(self.path, f"array {name!r} is missing from the key store") from None
            self.__dict__[name] = arr
            return arr
        raise AttributeError(name)

    @cached_property
    def n_constraints(self) -> int:  # type: ignore[override]
        """The circuit's R1CS constraints, from ``a_row_ptr`` and the last rows' ``a_signal``."""
        row_ptr = self.a_row_ptr[:].astype(np.int64)
        filled = np.flatnonzero(np.diff(row_ptr))
        last = int(filled[-1]) if filled.size else -1
        first = max(0, last - self.n_public)
        tail = self.a_signal[int(row_ptr[first]) : int(row_ptr[last + 1])] if filled.size else np.zeros(0)
        return circuit_constraints(self.path, last, tail, self.n_public)

    @cached_property
    def points(self) -> dict[str, bn254.Affine]:
        pts = self.attrs["points"]
        out = {}
        for name in ("alpha1", "beta1", "delta1"):
            out[name] = _point_from_decimal(bn254.G1, pts[name])
        for name in ("beta2", "gamma2", "delta2"):
            out[name] = _point_from_decimal(bn254.G2, pts[name])
        return out

    def vk_json(self) -> dict:
        return dict(self.attrs["vk"])

    def csr_nbytes(self) -> int:
        """Bytes of the coefficient CSRs, from the store's metadata (nothing read)."""
        return sum(int(np.prod(getattr(self, n).shape, dtype=np.int64)) * np.dtype(getattr(self, n).dtype).itemsize
                   for n in CSR_ARRAYS)

    def __repr__(self) -> str:
        return f"KeyStore({self.path!r}, n_vars={self.n_vars}, domain=2^{self.power})"


def check_store_arrays(path: str, group: Any, n_vars: int, n_public: int, domain_size: int, n_coefs: int) -> None:
    """Every array of the zarr ``group`` (the store at ``path``) present, uint32 and shaped as the
    header says, the CSRs holding ``n_coefs`` terms together, each ``row_ptr`` sound (read
    chunk by chunk). Raises a one-line FormatError naming the store or array."""

    def array(name: str) -> Any:
        try:
            return group[name]
        except KeyError:
            raise FormatError(path, f"array {name!r} is missing from the key store") from None

    nnz = {}
    for m in ("a", "b"):
        sig = array(f"{m}_signal")
        if len(sig.shape) != 1:
            raise FormatError(os.path.join(path, f"{m}_signal"), f"shape {sig.shape}, expected (nnz,)")
        nnz[m] = sig.shape[0]
    expected = {
        "a": (n_vars, 16), "b1": (n_vars, 16), "b2": (n_vars, 32),
        "c": (n_vars - n_public - 1, 16), "h": (domain_size, 16), "ic": (n_public + 1, 16),
    }
    for m in ("a", "b"):
        expected[f"{m}_row_ptr"] = (domain_size + 1,)
        expected[f"{m}_signal"] = (nnz[m],)
        expected[f"{m}_value"] = (nnz[m], 8)
    for name, shape in expected.items():
        arr = array(name)
        if arr.dtype != np.uint32:
            raise FormatError(os.path.join(path, name), f"dtype {arr.dtype}, expected uint32")
        if arr.shape != shape:
            raise FormatError(os.path.join(path, name), f"shape {arr.shape}, the header implies {shape}")
    if nnz["a"] + nnz["b"] != n_coefs:
        raise FormatError(path, f"the CSRs hold {nnz['a']} + {nnz['b']} terms but header n_coefs is {n_coefs}")
    for m in ("a", "b"):
        _check_row_ptr(os.path.join(path, f"{m}_row_ptr"), array(f"{m}_row_ptr"), m, nnz[m])


def _check_row_ptr(where: str, arr: Any, m: str, nnz: int) -> None:
    """row_ptr[0] = 0, non-decreasing, row_ptr[-1] = nnz; read chunk by chunk."""
    step = max(1, arr.chunks[0])
    prev = 0
    for lo in range(0, arr.shape[0], step):
        block = arr[lo : lo + step].astype(np.int64)
        if lo == 0 and block[0] != 0:
            raise FormatError(where, f"row_ptr[0] is {int(block[0])}, expected 0")
        diffs = np.diff(np.concatenate(([prev], block)))
        bad = np.flatnonzero(diffs < 0)
        if bad.size:
            i = lo + int(bad[0])
            raise FormatError(
                where, f"row_ptr is not monotone: row_ptr[{i}] = {int(block[bad[0]])} < row_ptr[{i - 1}] (a damaged or missing chunk?)"
            )
        past = np.flatnonzero(block > nnz)
        if past.size:
            i = lo + int(past[0])
            raise FormatError(where, f"row_ptr[{i}] = {int(block[past[0]])} runs past the {nnz} terms of {m}_signal")
        prev = int(block[-1])
    if prev != nnz:
        raise FormatError(where, f"row_ptr ends at {prev}, but {m}_signal holds {nnz} terms")


class _StoredArray:
    """A zarr array whose reads turn storage and checksum failures into a one-line FormatError."""

    def __init__(self, store: str, name: str, array: Any) -> None:
        self._store, self.name, self._array = store, name, array
        self.shape: tuple[int, ...] = tuple(array.shape)
        self.dtype = array.dtype
        self.chunks: tuple[int, ...] = tuple(array.chunks)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, sel: Any) -> np.ndarray:
        try:
            return np.asarray(self._array[sel])
        except Exception as exc:  # checksum mismatch, missing or truncated chunk, I/O error
            raise FormatError(
                os.path.join(self._store, self.name), f"cannot read {sel!r}: {exc.__class__.__name__}: {exc}"
            ) from None

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[...]
        return out if dtype is None else out.astype(dtype)


class ZkeyKey(_KeyBase):
    """A .zkey used directly (memory-mapped), with its CSRs built in memory on first use.

    Convenient for one-off proofs; a batch should import the key once with :func:`import_key`.
    """

    def __init__(self, path: str | os.PathLike[str], device: str = "cpu", *, check: bool = True) -> None:
        """Map and validate ``path`` (every check of :func:`~distprove.formats.zkey.read_zkey`, the
        point checks on ``device``: "cpu", "gpu" or "auto"); the CSRs are built on first use. The
        file's SHA-256 is computed in a thread started first (hashlib releases the GIL). With
        ``check=False`` only the header checks run here (:func:`~distprove.formats.zkey.open_zkey`)
        and the caller runs :meth:`check_coefficients` and :meth:`check_points` before trusting the key."""
        from .formats.zkey import open_zkey

        self.path = os.fspath(path)
        # The hash starts first and is awaited only where content_hash is read: an import writes
        # its chunks meanwhile, a one-off proof proves meanwhile.
        pool = ThreadPoolExecutor(1, thread_name_prefix="zkey-sha256")
        self._sha = pool.submit(file_sha256, self.path)
        pool.shutdown(wait=False)
        if device not in ("auto", "cpu", "gpu"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'gpu', not {device!r}")
        self.device = device
        with _stage("open"):
            z = open_zkey(self.path)
        self.zkey = z
        self.n_vars, self.n_public, self.domain_size = z.n_vars, z.n_public, z.domain_size
        for name in POINT_ARRAYS:
            setattr(self, name, getattr(z, name))
        if check:
            self.check_coefficients()
            self.check_points()

    def check_coefficients(self) -> None:
        """Every coefficient record in range (:func:`~distprove.formats.zkey.check_coefficients`)."""
        from .formats.zkey import check_coefficients

        with _stage("check coefficients"):
            check_coefficients(self.zkey)

    def check_points(self) -> None:
        """Every point of IC, A, B1, B2, C, H < q and on its curve, on the key's device
        (:func:`~distprove.formats.zkey.check_zkey_points`; "auto" resolved here, so an import
        loads CuPy on the thread that checks, beside the rest)."""
        from .formats.zkey import ZKEY_POINT_ARRAYS, check_zkey_points

        first_bad = point_checker(validation_device(self.device))
        for name in ZKEY_POINT_ARRAYS:
            with _stage(f"validate {name}"):
                check_zkey_points(self.zkey, first_bad, (name,))

    def _csr(self, m: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Matrix ``m``'s ("a" or "b") CSR (row_ptr, signal, value), built on first use (an import
        writes the point arrays meanwhile) and kept."""
        from .stages.gather import csr_from_coefficients

        built = self.__dict__.setdefault("_csrs", {})
        if m not in built:
            z = self.zkey
            with _stage(f"csr {m}"):
                built[m] = csr_from_coefficients(
                    z.coef_matrix, z.coef_row, z.coef_signal, z.coef_value, ("a", "b").index(m), z.domain_size
                )
        return built[m]

    a_row_ptr = property(lambda self: self._csr("a")[0])
    a_signal = property(lambda self: self._csr("a")[1])
    a_value = property(lambda self: self._csr("a")[2])
    b_row_ptr = property(lambda self: self._csr("b")[0])
    b_signal = property(lambda self: self._csr("b")[1])
    b_value = property(lambda self: self._csr("b")[2])

    @cached_property
    def n_constraints(self) -> int:  # type: ignore[override]
        """The circuit's R1CS constraints (:func:`zkey_constraints`)."""
        return zkey_constraints(self.zkey)

    @cached_property
    def content_hash(self) -> str:  # type: ignore[override]
        """The .zkey's SHA-256 (hex), from the thread started at open."""
        return self._sha.result()

    @cached_property
    def points(self) -> dict[str, bn254.Affine]:
        z = self.zkey
        out = {}
        for name in ("alpha1", "beta1", "delta1"):
            out[name] = bn254.points_from_limbs(bn254.G1, getattr(z, name))[0]
        for name in ("beta2", "gamma2", "delta2"):
            out[name] = bn254.points_from_limbs(bn254.G2, getattr(z, name))[0]
        return out

    def vk_json(self) -> dict:
        from .verifier import vk_json

        return vk_json(self.n_public, self.points, self.ic)

    def __repr__(self) -> str:
        return f"ZkeyKey({self.path!r}, n_vars={self.n_vars}, domain=2^{self.power})"


def import_key(
    zkey_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    chunk_bytes: int = CHUNK_BYTES,
    device: str = "auto",
) -> KeyStore:
    """Import a snarkjs Groth16 ``.zkey`` into a zarr v3 key store at ``out_path`` and open it.

    Every check of :func:`~distprove.formats.zkey.read_zkey` runs, the point checks on ``device``
    ("auto": the GPU when there is one), and the file's SHA-256 is recorded. Arrays are chunked
    along the element axis in chunks of about ``chunk_bytes``.

    The store is written to a temporary sibling directory and renamed into place only once every
    check has passed and every chunk is written, so a bad key or an interrupted import never
    leaves a store under the final name, and a store already there (``overwrite``) stays whole
    until the new one replaces it. Raises a one-line FormatError naming the file for a bad key.
    """
    out = Path(out_path)
    if out.exists() and not overwrite:
        raise OutputExists(out)
    # The file's SHA-256 (one stream, the floor of the import's time) starts first; everything
    # else runs beside it: the point arrays' chunk writes start as soon as the header is read,
    # the record checks, point checks and both CSR builds run on their own threads (numpy,
    # numba, hashlib, CRC32C and file writes release the GIL), the CSRs' writes start when each
    # is built, and the written arrays are read back and checked as the store's open would.
    # What is left once the hash ends is the attributes, the rename (a store being replaced is
    # renamed aside, then removed beside the reopen) and the reopen of the group.
    with _stage("import"):
        key = ZkeyKey(zkey_path, device=device, check=False)
        with ThreadPoolExecutor(5, thread_name_prefix="import") as work, _StoreWriter(out, chunk_bytes) as store:
            zarr_loaded = work.submit(importlib.import_module, "zarr")  # ~0.5 s in a fresh process
            for name in POINT_ARRAYS:
                store.add(name, getattr(key, name))
            coefs = work.submit(key.check_coefficients)
            points = work.submit(key.check_points)
            csrs = [work.submit(key._csr, m) for m in ("a", "b")]
            coefs.result()  # first: a bad record would also break a CSR build, less clearly
            for m, built in zip(("a", "b"), csrs):
                for part, arr in zip(("row_ptr", "signal", "value"), built.result()):
                    store.add(f"{m}_{part}", arr)
            zarr_loaded.result()
            store.write_metadata()
            n_coefs = int(key.zkey.coef_matrix.shape[0])
            written = work.submit(store.check_arrays, key.n_vars, key.n_public, key.domain_size, n_coefs)
            with _stage("wait checks"):
                points.result()
                written.result()
            attrs = _attributes(key, n_coefs, {})
            source = {"file": os.path.basename(os.fspath(zkey_path)), "size": os.path.getsize(zkey_path)}
            store.commit(lambda: {**attrs, "source": {**source, "sha256": key.content_hash}}, overwrite)
            with _stage("reopen"):
                return KeyStore(out, check_arrays=False)  # checked under the temporary name


def write_store(
    out_path: str | os.PathLike[str],
    key: Any,
    source: dict[str, Any] | Callable[[], dict[str, Any]],
    n_coefs: int,
    *,
    overwrite: bool = False,
    chunk_bytes: int = CHUNK_BYTES,
    extra_attrs: dict[str, Any] | None = None,
) -> KeyStore:
    """Write a key store from any key object and open it (used by the dev setup; :func:`import_key`
    writes the same layout).

    ``key`` has ``n_vars``, ``n_public``, ``domain_size``, ``power``, ``points`` (affine Python
    ints), ``vk_json()`` and the arrays named in POINT_ARRAYS and CSR_ARRAYS as attributes.
    ``source`` becomes the ``source`` attribute (its ``sha256`` is the key's content hash); a
    callable is called once every chunk is written, so a hash still running overlaps the writes.
    ``extra_attrs`` are added to the group attributes. Written to a temporary sibling and renamed
    into place.
    """
    out = Path(out_path)
    if out.exists() and not overwrite:
        raise OutputExists(out)
    with _StoreWriter(out, chunk_bytes) as store:
        for name in (*POINT_ARRAYS, *CSR_ARRAYS):
            store.add(name, getattr(key, name))
        store.commit(
            lambda: _attributes(key, n_coefs, source() if callable(source) else source, extra_attrs), overwrite
        )
        return KeyStore(out)  # beside the removal of a store it replaced


def _attributes(key: Any, n_coefs: int, source: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A key store's group attributes (the layout in this module's docstring)."""
    points = key.points
    return {
        "distprove": {"layout": LAYOUT_VERSION, "kind": "groth16-bn254"},
        "header": {
            "n_vars": key.n_vars,
            "n_public": key.n_public,
            "domain_size": key.domain_size,
            "power": key.power,
            "n_coefs": n_coefs,
            "q": str(bn254.Q),
            "r": str(bn254.R),
        },
        "points": {
            **{n: _decimal_affine(bn254.G1, points[n]) for n in ("alpha1", "beta1", "delta1")},
            **{n: _decimal_affine(bn254.G2, points[n]) for n in ("beta2", "gamma2", "delta2")},
        },
        "vk": key.vk_json(),
        "source": source,
        **(extra or {}),
    }


class _StoreWriter:
    """A key store being written into a temporary sibling of its final path.

    Each array's chunk files are queued on a thread pool as soon as :meth:`add` is given it, each
    one the array's little-endian bytes then their CRC32C, as the arrays' codecs (bytes, crc32c)
    say, under the chunk key zarr's default encoding gives (``c/<i>/0``). Through zarr every chunk
    write passes its one event loop thread (about 1.2 GB/s on 16 cores); as plain file writes
    they take the cores there are, and need no zarr: zarr writes the metadata (``zarr.json``) at
    :meth:`write_metadata`, and :meth:`commit` renames the directory into place. Leaving the
    ``with`` block on an exception cancels the writes not started and removes the directory;
    leaving it waits for the removal of the store that :meth:`commit` replaced.
    """

    def __init__(self, out: Path, chunk_bytes: int) -> None:
        self.out, self.chunk_bytes = out, chunk_bytes
        self.tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        self.tmp.mkdir(parents=True)
        self._arrays: dict[str, tuple[tuple[int, ...], int]] = {}
        self._writes: list[Future[None]] = []
        self._pool = ThreadPoolExecutor(
            max(2, min(16, CPU_COUNT)), thread_name_prefix="keystore-write", initializer=nicer,
            initargs=(WRITER_NICENESS,),
        )
        self._side = ThreadPoolExecutor(1, thread_name_prefix="keystore-remove", initializer=nicer,
                                        initargs=(WRITER_NICENESS,))
        self._group: Any = None

    def __enter__(self) -> _StoreWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._side.shutdown(wait=True)
        self._pool.shutdown(wait=True, cancel_futures=exc_type is not None)
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def add(self, name: str, array: Any) -> None:
        """Queue the chunk writes of array ``name`` (kept by reference until written: not to be changed)."""
        data = np.ascontiguousarray(np.asarray(array, dtype="<u4"))
        row_bytes = data.itemsize * (int(np.prod(data.shape[1:])) if data.ndim > 1 else 1)
        rows = min(max(1, data.shape[0]), max(1, self.chunk_bytes // row_bytes))
        self._arrays[name] = (data.shape, rows)
        tail = ("0",) * (data.ndim - 1)
        for i, lo in enumerate(range(0, data.shape[0], rows)):
            path = self.tmp.joinpath(name, "c", str(i), *tail)
            block = data[lo : lo + rows]
            self._writes.append(self._pool.submit(_write_chunk, f"write {name}", path, block, rows * row_bytes))

    def write_metadata(self) -> None:
        """Have zarr write the group's and every array's metadata (``zarr.json``); call once every
        array is added (:meth:`commit` calls it if not called before)."""
        import zarr
        from zarr.codecs import Crc32cCodec

        with _stage("metadata"):
            self._group = zarr.create_group(store=str(self.tmp), zarr_format=3, overwrite=False)
            for name, (shape, rows) in self._arrays.items():
                self._group.create_array(
                    name, shape=shape, chunks=(rows,) + shape[1:], dtype="<u4", compressors=[Crc32cCodec()],
                    fill_value=0, chunk_key_encoding={"name": "default", "separator": "/"},
                )

    def check_arrays(self, n_vars: int, n_public: int, domain_size: int, n_coefs: int) -> None:
        """Once every chunk is written, check the arrays as :class:`KeyStore` would on open
        (:func:`check_store_arrays`), under the temporary name."""
        if self._group is None:
            self.write_metadata()
        self._wait_writes()
        with _stage("check arrays"):
            check_store_arrays(str(self.tmp), self._group, n_vars, n_public, domain_size, n_coefs)

    def _wait_writes(self) -> None:
        with _stage("wait writes"):
            for done in self._writes:
                done.result()

    def commit(self, attributes: Callable[[], dict[str, Any]], overwrite: bool) -> None:
        """Wait for every chunk, write ``attributes()`` (called then) as the group's attributes
        and rename the store into place. The caller has run every check before. A store already
        at the final path raises OutputExists, or with ``overwrite`` is renamed aside first (put
        back if the new one cannot take its place) and removed on a thread of its own (unlinking
        its chunk files takes a while), which leaving the ``with`` block waits for."""
        if self._group is None:
            self.write_metadata()
        self._wait_writes()
        with _stage("wait attributes"):
            attrs = attributes()
        with _stage("attributes"):
            self._group.update_attributes(attrs)
        with _stage("rename"):
            if not self.out.exists():
                os.replace(self.tmp, self.out)
                return
            if not overwrite:  # there from the start, or made by someone else meanwhile
                raise OutputExists(self.out)
            aside = self.out.with_name(f".{self.out.name}.old-{os.getpid()}")
            shutil.rmtree(aside, ignore_errors=True)
            os.rename(self.out, aside)
            try:
                os.replace(self.tmp, self.out)
            except BaseException:
                os.rename(aside, self.out)
                raise
        self._side.submit(_remove_old, aside)


def _remove_old(path: Path) -> None:
    """Remove a replaced store (renamed aside by :meth:`_StoreWriter.commit`)."""
    with _stage("remove old"):
        shutil.rmtree(path, ignore_errors=True)


WRITER_NICENESS = 5
"""How much nicer than the rest of the process the store's writer threads run (Linux): a thread
at +5 weighs about a third of one at 0, so with every core busy an import's SHA-256 thread (its
floor, one stream) keeps a core while the writers share the others."""


def _write_chunk(stage: str, path: Path, block: np.ndarray, nbytes: int) -> None:
    """One zarr chunk file: ``block``'s bytes, zero-padded to the chunk's ``nbytes`` (an edge
    chunk is stored whole), then their CRC32C as 4 little-endian bytes; timed as ``stage``."""
    import google_crc32c

    with _stage(stage):
        data = block.reshape(-1).view(np.uint8)
        pad = bytes(nbytes - data.size)
        crc = google_crc32c.extend(google_crc32c.value(data), pad) if pad else google_crc32c.value(data)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
            if pad:
                f.write(pad)
            f.write(int(crc).to_bytes(4, "little"))


def zkey_constraints(z: Any) -> int:
    """The circuit's R1CS constraints of a mapped .zkey (a
    :class:`~distprove.formats.zkey.ZKey`), from the rows of its A coefficient records
    (:func:`circuit_constraints`)."""
    in_a = z.coef_matrix == 0
    rows, signals = z.coef_row[in_a].astype(np.int64), z.coef_signal[in_a]
    last = int(rows.max()) if rows.size else -1
    at_end = rows >= last - z.n_public
    order = np.argsort(rows[at_end], kind="stable")
    return circuit_constraints(z.path, last, signals[at_end][order], z.n_public)


def key_shape(path: str | os.PathLike[str]) -> KeyShape:
    """A key's :class:`KeyShape`, reading its header and coefficients but no point
    (:func:`open_header` with ``coefficients``). FormatError as :func:`open_key`."""
    key = open_header(path, coefficients=True)
    if isinstance(key, KeyStore):
        return key.shape
    return KeyShape(zkey_constraints(key), key.n_vars, key.n_public, key.domain_size)


def open_header(path: str | os.PathLike[str], *, coefficients: bool = False) -> Any:
    """A key opened reading no arrays, for its ``n_vars``, ``n_public`` and ``domain_size``: a
    :class:`KeyStore` with its attributes checked, a ``.zkey``'s
    :class:`~distprove.formats.zkey.ZKey` with its header checked
    (:func:`~distprove.formats.zkey.open_zkey`). With ``coefficients`` the coefficient arrays
    are checked too (a store's open-time array checks, a .zkey's
    :func:`~distprove.formats.zkey.check_coefficients`), before one reads them. FormatError as
    :func:`open_key`."""
    p = Path(path)
    if not p.exists():
        raise FormatError(p, "no such key store or .zkey file")
    if p.is_dir():
        return KeyStore(p, check_arrays=coefficients)
    from .formats.zkey import check_coefficients, open_zkey

    z = open_zkey(p)
    if coefficients:
        check_coefficients(z)
    return z


def key_domain_size(path: str | os.PathLike[str]) -> int:
    """The domain size a key's header states (:func:`open_header`)."""
    return int(open_header(path).domain_size)


def open_key(path: str | os.PathLike[str], device: str = "cpu") -> KeyStore | ZkeyKey:
    """Open a key: a zarr key store directory, or a ``.zkey`` file used directly (validated, its
    point checks on ``device``: "cpu", "gpu" or "auto")."""
    p = Path(path)
    if not p.exists():
        raise FormatError(p, "no such key store or .zkey file")
    if p.is_dir():
        return KeyStore(p)
    return ZkeyKey(p, device=device)
