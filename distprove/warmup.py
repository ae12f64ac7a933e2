"""The on-disk JIT caches a first proof or batch would fill, filled ahead by ``distprove compile``
(beside the cubins of :mod:`distprove.backends.gpu.compile`), so the first batch after an install
runs at the pace of the next one.

* numba (``NUMBA_CACHE_DIR``, else ``__pycache__`` beside the package): the CPU's point checks
  (:mod:`distprove.formats.pointcheck`), which a ``.zkey`` opened or imported on the CPU runs
  (``import-key`` and ``prove`` of a ``.zkey`` without a GPU, a batch of a ``.zkey`` on CPU
  workers): seconds of compiling in the first process. A read-only array and a writable one are
  different numba signatures, so they are warmed the way the key readers run them, on the bundled
  example key's mapping.
* CuPy (``CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``): the kernels of CuPy's own (fills,
  scans, copies, elementwise operations) that the GPU backend launches beside distprove's, each
  compiled by NVRTC in the first process that finds it missing from that cache. Warmed by proving
  the bundled example's witnesses as one group on the GPU (a batch's per-group path at a small
  domain: witness upload and range check, gather, NTTs, grouped MSMs, assembly on the device) and
  checking the proofs with the batch's device check.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass


@dataclass
class Warmed:
    """One cache filled: what ran, where its cache lives, and the seconds it took."""

    name: str
    cache: str
    seconds: float


def warm_numba() -> Warmed:
    """Run the CPU point checks on the bundled example key, as :class:`distprove.keystore.ZkeyKey`
    runs them (every point array of the mapped ``.zkey``), so numba compiles and caches them."""
    from .example import ZKEY
    from .formats import pointcheck
    from .keystore import open_key

    t0 = time.perf_counter()
    open_key(ZKEY, device="cpu")
    return Warmed("numba point checks", pointcheck._status_g1.stats.cache_path, time.perf_counter() - t0)


def warm_gpu() -> Warmed:
    """Prove the bundled example's witnesses as one group on the GPU backend and check them with
    :func:`distprove.verifier.verify_many` on the device, then sample the live shares of witness
    stacks longer than the example's, so CuPy compiles and caches every kernel of its own on a
    batch's path. Raises RuntimeError if a proof does not verify."""
    import cupy

    from .example import WITNESS_DIR, ZKEY
    from .keystore import open_key
    from .prover import prove_many
    from .stages.msm import live_fractions
    from .verifier import verify_many

    t0 = time.perf_counter()
    key = open_key(ZKEY, device="gpu")
    witnesses = sorted(WITNESS_DIR.glob("*.wtns"))
    proofs = list(prove_many(key, witnesses, backend="gpu", group=len(witnesses)))
    vk = key.vk_json()
    if not all(verify_many([(vk, p.public_json(), p.to_json()) for p in proofs], device="gpu")):
        raise RuntimeError("compile: a proof of the bundled example does not verify on this GPU")
    # CuPy compiles an elementwise or reduction kernel per number of dimensions its operands
    # reduce to: the live-share sample of a witness stack is a 1-, 2- or 3-dimensional view by the
    # witness length (every row below 4,096 values, else every k-th), the example's only the first
    for g, n in ((1, 8192), (2, 8192), (1, 8194), (2, 8194)):
        live_fractions(cupy.zeros((g, n, 8), dtype=cupy.uint32)).get()
    # CuPy's documented cache folder (its compiler module has no public accessor for it)
    cache = os.environ.get("CUPY_CACHE_DIR") or os.path.expanduser("~/.cupy/kernel_cache")
    return Warmed("CuPy kernels (the example proved as one group on the GPU)", cache,
                  time.perf_counter() - t0)

