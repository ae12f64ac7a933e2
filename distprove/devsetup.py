"""An insecure Groth16 setup straight from an R1CS, for benchmarks and tests only.

The toxic waste (τ, α, β, δ) is drawn from a seed and therefore KNOWN: anyone can forge proofs
for a key made here. It exists because a real snarkjs ceremony for 2^20+ constraints takes days
here; the key it writes is the one snarkjs 0.7.6 would write for the same τ, α, β, δ
(SNARKJS_FORMATS.md §6.3), with γ = the G2 generator:

* domainSize n = 2^(floor(log2(nConstraints + nPublic)) + 1), ω = Fr.w[log2 n];
* extra A rows (nConstraints + i, signal i, coefficient 1) for i = 0 … nPublic;
* L_i(τ) = (τ^n − 1)/n · ω^i/(τ − ω^i) with one batch inversion a slice;
* A_s, B_s, C_s (τ) by sparse accumulation; K_s = β·A_s + α·B_s + C_s;
* IC[s] = [K_s]₁ (s ≤ nPublic), C[s] = [K_s/δ]₁ (s > nPublic), A = [A_s]₁, B1 = [B_s]₁,
  B2 = [B_s]₂, H[i] = [L^D_{g·ω^i}(τ)/δ]₁ where D = ⟨ω⟩ ∪ g⟨ω⟩ and g = coset_generator(k)
  (for k < 28, g = Fr.w[k+1] and this is the odd-indexed Lagrange point L^{(2n)}_{2i+1}).

The scalars are computed by the compiled Fr kernels of :mod:`distprove.frlimbs` on a thread pool
(:func:`key_scalars`); :func:`lagrange_at`, :func:`lagrange_odd_coset` and :func:`batch_inverse`
are the same formulas on Python ints, for checks. The points come from fixed-base scalar
multiplication of the generators with 8-bit window tables: on the GPU (distprove/kernels/fixedbase.cu) when CuPy sees one, else on the CPU.
Outputs: the zarr key store (keystore.write_store, same layout as import_key), optionally a
.zkey that snarkjs reads (sections 1-10, no contributions, csHash zero) and verification_key.json.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import multiprocessing
import os
import random
import secrets
import signal
import struct
import sys
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

import numpy as np

from . import bn254
from .backends import BACKEND_NAMES
from .bn254 import G1, G2, R, Affine, Group
from .curve import fast_int
from .formats.r1cs import R1CS
from .keystore import CHUNK_BYTES, KeyStore, write_store
from .stages.fixedbase import window_table
from .stages.gather import csr_from_coefficients
from .synth import field_ints, small_values, take_rows
from .verifier import vk_json

log = logging.getLogger(__name__)

WARNING = (
    "distprove dev setup: INSECURE key for testing and benchmarks only - the toxic waste "
    "(tau, alpha, beta, delta) is known, anyone can forge proofs for it"
)
_COEF_DTYPE = np.dtype([("matrix", "<u4"), ("row", "<u4"), ("signal", "<u4"), ("value", "<u4", (8,))])


@dataclass(frozen=True)
class Toxic:
    """The setup secrets (nonzero elements of Fr)."""

    tau: int
    alpha: int
    beta: int
    delta: int

    @classmethod
    def from_seed(cls, seed: int | None) -> "Toxic":
        """Secrets drawn from ``seed`` (reproducible), or from :mod:`secrets` when ``seed`` is None."""
        draw: Callable[[], int]
        if seed is None:
            draw = lambda: 1 + secrets.randbelow(R - 1)  # noqa: E731
        else:
            rng = random.Random(f"distprove-devsetup-{seed}")
            draw = lambda: rng.randrange(1, R)  # noqa: E731
        return cls(draw(), draw(), draw(), draw())


def domain_power(n_constraints: int, n_public: int) -> int:
    """cirPower = floor(log2(nConstraints + nPublic)) + 1, as snarkjs's setup computes it."""
    return (n_constraints + n_public).bit_length()


# --- field vectors ---------------------------------------------------------------------


def batch_inverse(values: np.ndarray) -> np.ndarray:
    """Element-wise inverses mod r of an object array of nonzero ints, via a product tree (vectorised)."""
    levels = [np.asarray(values, dtype=object)]
    if levels[0].shape[0] == 0:
        return levels[0].copy()
    while levels[-1].shape[0] > 1:
        cur = levels[-1]
        if cur.shape[0] % 2:
            cur = np.append(cur, np.array([1], dtype=object))
        levels.append(cur[0::2] * cur[1::2] % R)
    top = int(levels[-1][0])
    if top % R == 0:
        raise ZeroDivisionError("batch_inverse: a value is 0 mod r")
    inv = np.array([fast_int(pow(top, -1, R))], dtype=object)
    for lvl in reversed(levels[:-1]):
        size = lvl.shape[0]
        if size % 2:
            lvl = np.append(lvl, np.array([1], dtype=object))
        out = np.empty(lvl.shape[0], dtype=object)
        out[0::2] = inv * lvl[1::2] % R
        out[1::2] = inv * lvl[0::2] % R
        inv = out[:size]
    return inv


def _lagrange_scale(tau: int, k: int, coset: bool) -> int:
    """The factor of L_x(τ) = scale · x/(τ − x) common to every point x of the size-2^k domain,
    (τ^n − 1)/n, or of its odd coset g⟨ω⟩, (τ^n − 1)(τ^n − g^n)/(n·g^n·(g^n − 1))."""
    n = 1 << k
    tn = pow(tau, n, R)
    if not coset:
        return (tn - 1) * pow(n, -1, R) % R
    gn = pow(bn254.coset_generator(k), n, R)
    return (tn - 1) * (tn - gn) % R * pow(n * gn % R * (gn - 1) % R, -1, R) % R


def _lagrange_range(tau: int, k: int, lo: int, hi: int, coset: bool) -> np.ndarray:
    """L_x(τ) for the points x_i, i in [lo, hi): x_i = ω^i (the size-n domain) or g·ω^i (the odd coset)."""
    om = bn254.root_of_unity(k)
    x = bn254.powers(fast_int(om), hi - lo) * pow(om, lo, R) % R
    if coset:
        x = x * bn254.coset_generator(k) % R
    return x * batch_inverse((fast_int(tau) - x) % R) % R * _lagrange_scale(tau, k, coset) % R


def lagrange_at(tau: int, k: int) -> np.ndarray:
    """L_i(τ) = (τ^n − 1)/n · ω^i/(τ − ω^i) for the size-2^k domain ⟨Fr.w[k]⟩, i = 0 … 2^k − 1."""
    return _lagrange_range(tau, k, 0, 1 << k, coset=False)


def lagrange_odd_coset(tau: int, k: int) -> np.ndarray:
    """Lagrange basis of D = ⟨ω⟩ ∪ g⟨ω⟩ (g = coset_generator(k), |D| = 2^(k+1)) at τ, for the points g·ω^i.

    L_x(τ) = (τ^n − 1)(τ^n − g^n)·x / (n·g^n·(g^n − 1)·(τ − x)), x = g·ω^i. For k < 28 this is
    L^{(2n)}_{2i+1}(τ) (g^n = −1), the zkey's H section before the division by δ.
    """
    return _lagrange_range(tau, k, 0, 1 << k, coset=True)


# --- parallel stages ---------------------------------------------------------------------
#
# The key scalars are computed by the compiled Fr kernels of distprove.frlimbs on slices of the
# rows, on a thread pool (the kernels release the GIL). The coefficient records and the CPU
# fixed-base multiplications are Python-int work, one core per process: they split into
# independent tasks whose inputs are module state inherited by forked workers (_JOB) and whose
# outputs go into shared anonymous memory maps, so nothing big is pickled.

_JOB: dict[str, Any] = {}
_TASK_SIZE = 1 << 20


def _shared(shape: tuple[int, ...], dtype: Any = "<u4") -> np.ndarray:
    """A zeroed array in an anonymous shared mapping (visible to forked workers and the parent)."""
    dt = np.dtype(dtype)
    count = int(np.prod(shape))
    buf = mmap.mmap(-1, max(1, count * dt.itemsize))
    return np.frombuffer(buf, dtype=dt, count=count).reshape(shape)


def _forked_worker() -> None:
    """Give a forked worker the default SIGTERM and SIGINT actions.

    A fork inherits the parent's Python signal handlers; where the parent installed one (a Dask
    scheduler or worker running in the same process does, for SIGTERM), the worker would run it
    instead of exiting when the pool ends it, and the pool would wait for that worker forever.
    """
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run(task: Callable[..., None], args: list[tuple[int, int]], workers: int) -> None:
    """Run ``task(*a)`` for every ``a``: in this process, or in a pool of forked workers."""
    if workers <= 1 or len(args) <= 1:
        for a in args:
            task(*a)
        return
    pool = multiprocessing.get_context("fork").Pool(min(workers, len(args)), initializer=_forked_worker)
    try:
        pool.starmap(task, args, chunksize=1)
    except BaseException:
        pool.terminate()
        raise
    else:
        pool.close()  # the workers leave on their own once the queue is drained
    finally:
        pool.join()


def _parts(total: int, workers: int) -> int:
    """Task count: 4 per worker for balance, and at least one per _TASK_SIZE elements to bound memory."""
    return max(4 * max(workers, 1), -(-total // _TASK_SIZE))


def _ranges(total: int, parts: int) -> list[tuple[int, int]]:
    edges = sorted({total * i // max(parts, 1) for i in range(parts + 1)})
    return [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:])]


def _matrices(r1cs: R1CS, n_pub: int) -> list[list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]]:
    """Per matrix A, B, C: its CSR blocks as (row_ptr, wire, coef limbs, first row); A has a second
    block, the public rows nConstraints + i (signal i, coefficient 1, i = 0 … nPublic)."""
    out = []
    for which, m in enumerate((r1cs.A, r1cs.B, r1cs.C)):
        blocks = [(np.asarray(m.row_ptr, dtype=np.int64), np.ascontiguousarray(m.wire, dtype="<u4"),
                   np.ascontiguousarray(m.coef, dtype="<u4"), 0)]
        if which == 0:
            pub = np.arange(n_pub + 1, dtype=np.int64)
            blocks.append((np.arange(n_pub + 2, dtype=np.int64), pub.astype("<u4"),
                           bn254.limbs_from_ints([1] * (n_pub + 1)), r1cs.n_constraints))
        out.append(blocks)
    return out


def _balanced_signal_ranges(matrices: list, n_vars: int, parts: int) -> list[tuple[int, int]]:
    """Signal ranges holding about equal numbers of terms (a signal is never split)."""
    per = sum(np.bincount(b[1], minlength=n_vars) for blocks in matrices for b in blocks) + 1
    cum = np.cumsum(per)
    cuts = np.searchsorted(cum, cum[-1] * np.arange(1, parts) / parts)
    edges = sorted({0, n_vars, *(int(c) + 1 for c in cuts if 0 < int(c) + 1 < n_vars)})
    return list(zip(edges[:-1], edges[1:]))


def key_scalars(r1cs: R1CS, toxic: Toxic, workers: int = 1) -> dict[str, np.ndarray]:
    """The scalar of every key point as (n, 8) standard-form limbs: "a" (A_s), "b" (B_s),
    "ic" (K_s, s ≤ nPublic), "c" (K_s/δ, s > nPublic), "h" (odd-coset Lagrange/δ).

    Two passes of the Fr kernels (:mod:`distprove.frlimbs`) on ``workers`` threads: the Lagrange
    bases at τ, L_i(τ) = (τ^n − 1)/n · ω^i/(τ − ω^i) (kept in Montgomery form) and the H scalars,
    slice by slice with one inversion a slice; then per range of signals A_s, B_s, C_s (τ) =
    Σ coef·L_row(τ) over the terms of those signals and K_s = β·A_s + α·B_s + C_s (/δ past the
    public signals).
    """
    from . import frlimbs as fr

    n_pub = r1cs.n_pub_out + r1cs.n_pub_in
    k = domain_power(r1cs.n_constraints, n_pub)
    n, nv = 1 << k, r1cs.n_wires
    parts = _parts(n, workers)  # the Lagrange ranges (n rows); the signal ranges are sized below
    matrices = _matrices(r1cs, n_pub)
    tau, inv_delta = toxic.tau % R, pow(toxic.delta, -1, R)
    om, g = bn254.root_of_unity(k), bn254.coset_generator(k)
    lag_scale = _lagrange_scale(tau, k, coset=False)
    h_scale = _lagrange_scale(tau, k, coset=True) * inv_delta % R
    tau_m, om_m = fr.mont(tau), fr.mont(om)
    lag = np.empty((n, 8), dtype="<u4")  # Montgomery form: the factor of the standard-form coefficients
    h = np.empty((n, 8), dtype="<u4")

    def lagrange_task(lo: int, hi: int) -> None:
        scratch = np.empty((hi - lo, 8), dtype="<u4")
        x0 = pow(om, lo, R)
        ok = fr.lagrange_kernel(tau_m, fr.mont(x0), om_m, fr.mont(lag_scale), lag[lo:hi], scratch)
        ok &= fr.lagrange_kernel(tau_m, fr.mont(x0 * g), om_m, fr.std(h_scale), h[lo:hi], scratch)
        if not ok:
            raise ZeroDivisionError("dev setup: tau is a point of the evaluation domain")

    a, b, kd = (np.zeros((nv, 8), dtype="<u4") for _ in range(3))
    beta_m, alpha_m, inv_delta_m = fr.mont(toxic.beta), fr.mont(toxic.alpha), fr.mont(inv_delta)

    def signal_task(lo: int, hi: int) -> None:
        c = np.zeros((hi - lo, 8), dtype="<u4")
        for blocks, out in zip(matrices, (a[lo:hi], b[lo:hi], c)):
            for row_ptr, wire, coef, row_base in blocks:
                fr.accumulate_kernel(row_ptr, wire, coef, lag, row_base, lo, out)
        fr.combine_kernel(a[lo:hi], b[lo:hi], c, beta_m, alpha_m, inv_delta_m, max(0, n_pub + 1 - lo), kd[lo:hi])

    fr.run_threads(lagrange_task, _ranges(n, parts), workers)
    # every signal task scans all terms: one range a thread (more only to bound the scratch memory)
    signal_parts = max(workers, -(-nv // (8 * _TASK_SIZE)))
    fr.run_threads(signal_task, _balanced_signal_ranges(matrices, nv, signal_parts), workers)
    return {"a": a, "b": b, "ic": kd[: n_pub + 1], "c": kd[n_pub + 1 :], "h": h}


# --- coefficient records (zkey section 4) ------------------------------------------------


def _mont2_limbs(coef: np.ndarray) -> np.ndarray:
    """(m, 8) standard-form coefficients -> (m, 8) limbs of coef·R² mod r (the zkey encoding).

    Small coefficients and their negatives go through a table of their distinct values.
    """
    m2 = bn254.FR_MONT * bn254.FR_MONT % R
    out = np.empty((coef.shape[0], 8), dtype="<u4")
    easy, v = small_values(coef)
    if easy.any():
        uniq, inv = np.unique(v[easy], return_inverse=True)
        table = bn254.limbs_from_ints(np.array([int(u) % R * m2 % R for u in uniq], dtype=object))
        out[easy] = take_rows(table, inv.reshape(-1))
    rest = np.flatnonzero(~easy)
    if rest.size:
        out[rest] = bn254.limbs_from_ints(field_ints(coef[rest]) * m2 % R)
    return out


def coefficient_records(r1cs: R1CS, workers: int = 1) -> np.ndarray:
    """Section 4 records in snarkjs setup order: per constraint its A then its B terms, then the public rows.

    ``workers`` forked processes fill ranges of the records, each deriving its records' constraint
    and term from the two matrices' row pointers (no whole-size index arrays in the parent).
    """
    n_pub = r1cs.n_pub_out + r1cs.n_pub_in
    A, B = r1cs.A, r1cs.B
    total = int(A.row_ptr[-1]) + int(B.row_ptr[-1]) + n_pub + 1
    records = _shared((total,), _COEF_DTYPE)
    _JOB.clear()
    # Row i's A terms start after all A and B terms of the rows before it; its B terms follow them.
    a_ptr, b_ptr = np.asarray(A.row_ptr, dtype=np.int64), np.asarray(B.row_ptr, dtype=np.int64)
    _JOB.update(records=records, A=A, B=B, a_ptr=a_ptr, b_ptr=b_ptr, starts=a_ptr + b_ptr,
                one=_mont2_limbs(bn254.limbs_from_ints([1]))[0], n_constraints=r1cs.n_constraints)
    try:
        _run(_records_task, _ranges(total, _parts(total, workers)), workers)
    finally:
        _JOB.clear()
    return records


def _records_task(lo: int, hi: int) -> None:
    """Records [lo, hi): the constraint terms, then the public rows (matrix 0, row nConstraints + i, signal i, 1)."""
    j = _JOB
    rec = j["records"]
    starts, a_ptr, b_ptr, A, B = j["starts"], j["a_ptr"], j["b_ptr"], j["A"], j["B"]
    terms = int(starts[-1])
    t_hi = min(hi, terms)
    if t_hi > lo:
        i0 = int(np.searchsorted(starts, lo, side="right")) - 1
        i1 = int(np.searchsorted(starts, t_hi - 1, side="right")) - 1
        edges = np.clip(starts[i0 : i1 + 2], lo, t_hi)
        row = np.repeat(np.arange(i0, i1 + 1, dtype=np.int64), np.diff(edges))
        off = np.arange(lo, t_hi, dtype=np.int64) - starts[row]  # position within the row's A then B terms
        n_a = a_ptr[row + 1] - a_ptr[row]
        in_a = off < n_a
        ia, ib = np.flatnonzero(in_a), np.flatnonzero(~in_a)
        src_a, src_b = a_ptr[row[ia]] + off[ia], b_ptr[row[ib]] + off[ib] - n_a[ib]
        part = rec[lo:t_hi]
        part["matrix"] = ~in_a
        part["row"] = row
        signal = np.empty(t_hi - lo, dtype="<u4")
        signal[ia], signal[ib] = A.wire[src_a], B.wire[src_b]
        part["signal"] = signal
        value = np.empty((t_hi - lo, 8), dtype="<u4")
        value[ia], value[ib] = _mont2_limbs(take_rows(A.coef, src_a)), _mont2_limbs(take_rows(B.coef, src_b))
        part["value"] = value
    if hi > terms:
        pub = np.arange(max(lo, terms), hi, dtype=np.int64) - terms
        part = rec[max(lo, terms) : hi]
        part["matrix"] = 0
        part["row"] = j["n_constraints"] + pub
        part["signal"] = pub
        part["value"] = j["one"]


# --- fixed-base scalar multiplication ----------------------------------------------------


def fixed_base_cpu(group: Group, scalars: np.ndarray, chunk: int = 1 << 14, workers: int = 1) -> np.ndarray:
    """[s]·G for each standard-form scalar row of ``scalars`` ((n, 8) uint32, < r): (n, 16|32) limbs.

    One mixed addition per nonzero byte of the scalar, then one batch conversion to affine per
    ``chunk`` points; chunks are shared among ``workers`` forked processes.
    """
    a = np.ascontiguousarray(scalars, dtype="<u4").reshape(-1, 8)
    window_table(group)  # built once here, inherited by forked workers
    _JOB.clear()
    _JOB.update(group=group, digits=a.view(np.uint8).reshape(-1, 32), out=_shared((a.shape[0], group.limbs)))
    try:
        _run(_fixed_base_task, [(lo, min(lo + chunk, a.shape[0])) for lo in range(0, a.shape[0], chunk)], workers)
        return np.array(_JOB["out"])
    finally:
        _JOB.clear()


def _fixed_base_task(lo: int, hi: int) -> None:
    group = _JOB["group"]
    table = window_table(group)
    inf = bn254.to_jacobian(group, None)
    madd = bn254.jac_add_affine
    jac = []
    for row in _JOB["digits"][lo:hi].tolist():
        acc = inf
        for w, d in enumerate(row):
            if d:
                acc = madd(group, acc, table[w][d])
        jac.append(acc)
    _JOB["out"][lo:hi] = bn254.points_to_limbs(group, bn254.batch_to_affine(group, jac))


def fixed_base(group: Group, scalars: np.ndarray, device: str = "auto", workers: int = 1) -> np.ndarray:
    """[s]·G for every scalar row, as Montgomery limbs; ``device`` is "auto", "cpu" or "gpu"
    (``workers`` processes on the CPU)."""
    from .backends.gpu import available

    if device == "gpu" or (device == "auto" and available()):
        from .backends.gpu.fixedbase import fixed_base_gpu

        return fixed_base_gpu(group, scalars)
    if device not in BACKEND_NAMES:
        raise ValueError(f"device must be one of {', '.join(BACKEND_NAMES)}, not {device!r}")
    return fixed_base_cpu(group, scalars, workers=workers)


# --- the key -----------------------------------------------------------------------------


@dataclass
class DevKey:
    """A dev-setup key in memory: the arrays of the key store layout plus header values and points."""

    n_vars: int
    n_public: int
    domain_size: int
    points: dict[str, Affine]
    records: np.ndarray
    a: np.ndarray
    b1: np.ndarray
    b2: np.ndarray
    c: np.ndarray
    h: np.ndarray
    ic: np.ndarray
    toxic: Toxic
    timings: dict[str, float]

    @property
    def power(self) -> int:
        return self.domain_size.bit_length() - 1

    def _csr(self, which: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r = self.records
        return csr_from_coefficients(r["matrix"], r["row"], r["signal"], r["value"], which, self.domain_size)

    @cached_property
    def _csr_a(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self._csr(0)

    @cached_property
    def _csr_b(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self._csr(1)

    def __getattr__(self, name: str) -> Any:
        parts = {"row_ptr": 0, "signal": 1, "value": 2}
        m, _, part = name.partition("_")
        if m in ("a", "b") and part in parts:
            return (self._csr_a if m == "a" else self._csr_b)[parts[part]]
        raise AttributeError(name)

    def vk_json(self) -> dict:
        """verification_key.json content."""
        return vk_json(self.n_public, self.points, self.ic)

    @cached_property
    def content_hash(self) -> str:
        """A hash identifying this key: the secrets and the coefficient records."""
        h = hashlib.sha256(b"distprove-devsetup\0")
        t = self.toxic
        h.update(f"{t.tau},{t.alpha},{t.beta},{t.delta},{self.n_vars},{self.n_public},{self.domain_size}".encode())
        h.update(memoryview(np.ascontiguousarray(self.records)).cast("B"))
        return h.hexdigest()


def default_workers() -> int:
    """Workers for the scalar stages: the usable CPU cores (1 where fork is unavailable)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    from dask.system import CPU_COUNT

    return CPU_COUNT


def build_key(r1cs: R1CS, toxic: Toxic, device: str = "auto", workers: int | None = None) -> DevKey:
    """Compute every point of the Groth16 key of ``r1cs`` for the secrets ``toxic`` (§6.3).

    ``workers`` threads share the key scalars and as many processes the coefficient records
    (default: :func:`default_workers`); the fixed-base multiplications run on ``device``.
    """
    workers = default_workers() if workers is None else workers
    timings: dict[str, float] = {}
    t0 = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t0
        now = time.perf_counter()
        timings[name] = now - t0
        t0 = now

    n_pub = r1cs.n_pub_out + r1cs.n_pub_in
    k = domain_power(r1cs.n_constraints, n_pub)
    if k > bn254.FR_S:
        raise ValueError(f"domain 2^{k} exceeds Fr's 2-adicity 2^{bn254.FR_S}")
    scal = key_scalars(r1cs, toxic, workers)
    lap("scalars")
    records = coefficient_records(r1cs, workers)
    lap("coefficients")
    pts = {
        name: fixed_base(group, scal[src], device, workers)
        for name, group, src in (("a", G1, "a"), ("b1", G1, "b"), ("b2", G2, "b"), ("c", G1, "c"), ("h", G1, "h"), ("ic", G1, "ic"))
    }
    lap("fixed_base")
    log.info("dev setup of %d signals, domain 2^%d: %s", r1cs.n_wires, k, timings)
    gen1, gen2 = G1.generator, G2.generator
    points = {
        "alpha1": bn254.mul(G1, gen1, toxic.alpha),
        "beta1": bn254.mul(G1, gen1, toxic.beta),
        "delta1": bn254.mul(G1, gen1, toxic.delta),
        "beta2": bn254.mul(G2, gen2, toxic.beta),
        "gamma2": gen2,
        "delta2": bn254.mul(G2, gen2, toxic.delta),
    }
    return DevKey(
        n_vars=r1cs.n_wires, n_public=n_pub, domain_size=1 << k, points=points, records=records,
        toxic=toxic, timings=timings, **pts,
    )


def write_zkey(path: str | os.PathLike[str], key: DevKey) -> None:
    """Write ``key`` as a snarkjs Groth16 .zkey (sections 1-10; section 10: csHash zero, no contributions)."""
    from .formats.container import write_container

    def pt(g: Group, p: Affine) -> bytes:
        return bn254.points_to_limbs(g, [p]).tobytes()

    pts = key.points
    header = (
        struct.pack("<I", 32) + bn254.Q.to_bytes(32, "little") + struct.pack("<I", 32) + R.to_bytes(32, "little")
        + struct.pack("<3I", key.n_vars, key.n_public, key.domain_size)
        + pt(G1, pts["alpha1"]) + pt(G1, pts["beta1"]) + pt(G2, pts["beta2"]) + pt(G2, pts["gamma2"])
        + pt(G1, pts["delta1"]) + pt(G2, pts["delta2"])
    )
    assert len(header) == 660
    sections: list[tuple[int, Any]] = [
        (1, struct.pack("<I", 1)),
        (2, header),
        (3, key.ic),
        (4, [struct.pack("<I", key.records.shape[0]), key.records]),
        (5, key.a),
        (6, key.b1),
        (7, key.b2),
        (8, key.c),
        (9, key.h),
        (10, bytes(64) + struct.pack("<I", 0)),
    ]
    write_container(path, "zkey", 1, sections)


def dev_setup(
    circuit: R1CS | str | os.PathLike[str],
    store: str | os.PathLike[str],
    *,
    zkey: str | os.PathLike[str] | None = None,
    vk: str | os.PathLike[str] | None = None,
    seed: int | None = None,
    device: str = "auto",
    workers: int | None = None,
    overwrite: bool = False,
    chunk_bytes: int = CHUNK_BYTES,
    quiet: bool = False,
) -> KeyStore:
    """Run the insecure dev setup for ``circuit`` (a parsed R1CS or a .r1cs path) and write the key store.

    Optionally also a snarkjs ``.zkey`` (``zkey``) and ``verification_key.json`` (``vk``).
    ``device`` and ``workers`` are those of :func:`build_key`.
    Prints a warning to stderr (unless ``quiet``) and records it in the store's ``dev_setup``
    attribute: the secrets are derived from ``seed`` and are known.
    """
    from .formats.jsonio import write_json_atomic
    from .formats.r1cs import read_r1cs
    from .keystore import file_sha256

    r1cs = circuit if isinstance(circuit, R1CS) else read_r1cs(circuit)
    if not quiet:
        print(f"WARNING: {WARNING}", file=sys.stderr)
    key = build_key(r1cs, Toxic.from_seed(seed), device, workers)
    source: dict[str, Any] = {"file": os.path.basename(r1cs.path), "size": 0, "sha256": key.content_hash}
    if os.path.isfile(r1cs.path):
        source.update(size=os.path.getsize(r1cs.path), r1cs_sha256=file_sha256(r1cs.path))
    ks = write_store(
        store, key, source, int(key.records.shape[0]), overwrite=overwrite, chunk_bytes=chunk_bytes,
        extra_attrs={"dev_setup": {"warning": WARNING, "insecure": True, "seed": seed, "timings": key.timings}},
    )
    if zkey is not None:
        write_zkey(zkey, key)
    if vk is not None:
        write_json_atomic(vk, key.vk_json())
    return ks
