"""How much memory a key needs on one worker, and how much a worker has: the planner's test of
whether a key fits (:func:`distprove.cluster.planner.choose_mode` proves a key that does not in
points mode).

A key's resident footprint (:func:`resident_footprint`) is its arrays, as a worker keeps them
(the point arrays A, B1, B2, C, H, IC and the two coefficient CSRs: ``ResidentKey.nbytes``),
plus :func:`msm_scratch_bytes`, an estimate of one proof's working memory beside them. A
worker's budget (:func:`worker_budget`, resolved on the worker) is ``distprove.gpu.memory-limit``
on a GPU worker and ``distprove.planner.worker-memory`` on a CPU worker.
"""

from __future__ import annotations

from typing import Any

from distprove import config
from distprove.keyrange import G1_BYTES, G2_BYTES, SCALAR_BYTES, msm_lengths

SORT_BYTES_PER_POINT = 128
"""MSM scratch per base of the largest MSM: a sort-based bucket MSM keeps a digit key and a point
index (8 bytes) for each of ~16 windows (c = 16 over 256-bit scalars)."""


def point_bytes(n_vars: int, n_public: int, domain_size: int) -> int:
    """Bytes of a key's point arrays: A, B1, C, H and IC of G1, B2 of G2."""
    lengths = msm_lengths(n_vars, n_public, domain_size)
    g2 = lengths.pop("B2") * G2_BYTES
    return g2 + sum(lengths.values()) * G1_BYTES + (n_public + 1) * G1_BYTES


def msm_scratch_bytes(n_vars: int, domain_size: int) -> int:
    """One proof's working memory beside the key, an estimate:

    ``32 * (n_vars + 4 * domain_size)`` (the witness, the evaluations a, b, c and the H scalars)
    ``+ 128 * max(n_vars, domain_size)`` (the largest MSM's sort scratch,
    :data:`SORT_BYTES_PER_POINT`)."""
    return SCALAR_BYTES * (n_vars + 4 * domain_size) + SORT_BYTES_PER_POINT * max(n_vars, domain_size)


def resident_footprint(n_vars: int, n_public: int, domain_size: int, array_bytes: int = 0) -> int:
    """A key's footprint on one worker proving it whole: ``array_bytes`` (its point and CSR
    arrays as stored, ``KeyInfo.nbytes``; 0: the point arrays' size, the CSRs left out) plus
    :func:`msm_scratch_bytes`."""
    arrays = array_bytes or point_bytes(n_vars, n_public, domain_size)
    return arrays + msm_scratch_bytes(n_vars, domain_size)


def gpu_budget(limit: int | float | None, free: int, total: int, reclaimable: int = 0) -> int:
    """A GPU worker's budget from ``distprove.gpu.memory-limit`` (:func:`distprove.config.gpu_memory_limit`):
    a size as it is, a fraction of the card's ``total`` bytes, or (None) the ``free`` bytes plus
    ``reclaimable`` ones (what resident keys hold, which the worker would evict)."""
    if limit is None:
        return free + reclaimable
    if isinstance(limit, float):
        return int(limit * total)
    return int(limit)


def worker_budget(backend: Any) -> int | None:
    """This worker's memory budget for one key in bytes, or None (unbounded): on a GPU backend
    :func:`gpu_budget` of the current device, else ``distprove.planner.worker-memory``. Runs on
    the worker (it reads the worker's configuration and card)."""
    if getattr(backend, "name", "") != "gpu":
        return config.get_bytes("planner.worker-memory")
    import cupy

    free, total = cupy.cuda.runtime.memGetInfo()
    held = getattr(backend, "resident_bytes", None)
    return gpu_budget(config.gpu_memory_limit(), int(free), int(total), int(held()) if held is not None else 0)
