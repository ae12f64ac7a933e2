"""Enumerated values that the command line and :mod:`distprove.config` both accept.

Dask-free on purpose: :mod:`distprove.cli` builds its options from these when it is imported,
before its ``main`` puts the logging level into the environment that dask reads once, on its
own first import (importing :mod:`distprove.config` here would load dask too early).
"""

from __future__ import annotations

PLANNER_MODES = ("auto", "data", "split", "points")
"""``distprove.planner.mode`` and ``batch --mode``: auto (the planner picks), data (whole proofs
per worker), split (one proof's MSMs spread over workers by window range) or points (each worker
holds a range of the key's points and computes every proof's partial MSMs over it)."""
