"""The host allocator of a worker process: glibc's thresholds for large blocks.

Dask's nanny starts its workers with ``MALLOC_TRIM_THRESHOLD_`` set (65,536), so that freed
memory goes back to the system; setting it also turns off glibc's sliding mmap threshold, and every
block of 128 KiB or more is then a fresh mapping: its pages are faulted in and zeroed at first
touch and unmapped at free. A prover's worker allocates such blocks for every witness it reads
(a 2^12 witness is 128 KiB, a 2^16 one 2 MiB) and every array it brings back from the device: in
a worker on the 2-core VM, allocating and filling a 2 MiB array took 1.03 ms (513 page faults)
against 0.05 ms (12) with the thresholds below, 128 KiB 0.077 against 0.004 ms. The price is the
freed memory a worker keeps for its next blocks, up to the trim threshold.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""mallopt's parameter numbers (malloc.h)."""


def configured() -> tuple[int | None, int | None]:
    """The thresholds ``distprove.cluster.malloc-mmap-threshold`` and ``-trim-threshold`` (None:
    leave that one), for :func:`tune_malloc` in a worker and in its witness processes."""
    from distprove import config

    return config.get_bytes("cluster.malloc-mmap-threshold"), config.get_bytes("cluster.malloc-trim-threshold")


def tune_malloc(mmap_threshold: int | None, trim_threshold: int | None) -> bool:
    """Set this process's glibc mmap and trim thresholds (bytes; None leaves one as it is);
    whether every setting given took (glibc on Linux only; elsewhere nothing, False; a value
    glibc refuses is logged)."""
    if sys.platform != "linux" or (mmap_threshold is None and trim_threshold is None):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    ok = True
    for param, value, name in ((M_MMAP_THRESHOLD, mmap_threshold, "mmap"), (M_TRIM_THRESHOLD, trim_threshold, "trim")):
        if value is not None and mallopt(param, int(value)) != 1:
            log.warning("glibc refused malloc %s threshold %d", name, value)
            ok = False
    return ok
