"""GPU witness load: a .wtns's values read straight into pinned host memory, uploaded in
asynchronous chunks and range-checked on the device (the host side of ``kernels/witness.cu``).

The host reader maps the file, scans every value against r and then uploads from pageable memory
(which the driver stages through its own pinned buffer, synchronously). Here the value bytes go
from the page cache into one reusable pinned buffer by ``os.preadv`` (several reader threads: the
call releases the GIL), each chunk's host-to-device copy is queued as soon as that chunk has
landed, so reading chunk k+1 overlaps uploading chunk k, and the range check is one kernel over
the device copy. Only the 4-byte index of the first bad value comes back.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Callable

import numpy as np
from dask.system import CPU_COUNT

from .compile import get_module

if TYPE_CHECKING:  # pragma: no cover
    import cupy

READ_CHUNK_BYTES = 4 << 20
"""Bytes per read (and per queued upload) of the witness values."""
READ_THREADS = min(8, CPU_COUNT)
"""Reader threads (at most 8, at most the CPUs this process may use); chunks are still uploaded
in file order. One thread copies about 5 GB/s out of the page cache on an H200 host: a 134 MB
witness (2^22 values) uploads in ~4.2 ms with 8 threads of 4 MiB chunks against 7.5 with 4 of 8
MiB and 5.0 with 16; the host-to-device copy alone is 2.5 ms."""
BLOCK = 256
"""Threads per block of the range check (one value each)."""
_NONE_BAD = 0xFFFFFFFF


def read_chunks(
    fd: int,
    offset: int,
    dest: np.ndarray,
    on_chunk: Callable[[int, int], None],
    *,
    chunk_bytes: int = READ_CHUNK_BYTES,
    pool: ThreadPoolExecutor | None = None,
) -> None:
    """Fill the contiguous buffer ``dest`` with the bytes of file ``fd`` from ``offset`` on.

    Reads chunks of ``chunk_bytes`` (in ``pool``'s threads when given, else in this one) and
    calls ``on_chunk(lo, hi)`` with each chunk's byte range of ``dest``, in order, as soon as it
    and every chunk before it have landed. Raises EOFError when the file ends first.
    """
    if not dest.flags.c_contiguous:
        raise ValueError("read_chunks needs a contiguous destination buffer")
    buf = dest.reshape(-1).view(np.uint8)
    total = buf.nbytes
    bounds = [(lo, min(total, lo + chunk_bytes)) for lo in range(0, total, chunk_bytes)]

    def read(lo: int, hi: int) -> None:
        view = memoryview(buf[lo:hi])
        pos = lo
        while pos < hi:
            got = os.preadv(fd, [view[pos - lo :]], offset + pos)
            if got == 0:
                raise EOFError(f"file ends {hi - pos} bytes short of {total} at offset {offset + pos}")
            pos += got

    if pool is None or len(bounds) < 2:
        for lo, hi in bounds:
            read(lo, hi)
            on_chunk(lo, hi)
        return
    futures = [pool.submit(read, lo, hi) for lo, hi in bounds]
    try:
        for (lo, hi), fut in zip(bounds, futures):
            fut.result()
            on_chunk(lo, hi)
    finally:
        for fut in futures:
            fut.cancel()
        wait(futures)  # no reader may still write into dest once this returns


def first_bad(values: "cupy.ndarray") -> int | None:
    """Index of the first row of the device (n, 8) uint32 standard-form array that is >= r, or None.

    Queued on the current stream; reading the result back waits for it (and for what came before).
    """
    import cupy

    n = values.shape[0]
    if n == 0:
        return None
    flag = cupy.full((1,), _NONE_BAD, dtype=cupy.uint32)
    fn = get_module("witness").get_function("dp_witness_first_bad")
    fn(((n + BLOCK - 1) // BLOCK,), (BLOCK,), (values, np.uint32(n), flag))
    i = int(flag.get()[0])
    return None if i == _NONE_BAD else i


def first_bad_group(stack: "cupy.ndarray") -> "cupy.ndarray":
    """Per witness of the device (G, n, 8) uint32 stack, the index of its first value >= r, or
    0xffffffff (none): a (G,) uint32 device array, queued on the current stream in one launch
    (``dp_witness_first_bad_group``); nothing is read back here."""
    import cupy

    from .gather import MAX_GRID_Y

    g, n = stack.shape[0], stack.shape[1]
    flags = cupy.full((g,), _NONE_BAD, dtype=cupy.uint32)
    if n and g:
        fn = get_module("witness").get_function("dp_witness_first_bad_group")
        for lo in range(0, g, MAX_GRID_Y):
            hi = min(g, lo + MAX_GRID_Y)
            fn(((n + BLOCK - 1) // BLOCK, hi - lo), (BLOCK,), (stack[lo:hi], np.uint32(n), flags[lo:hi]))
    return flags


def bad_indices(flags: np.ndarray) -> list[int | None]:
    """:func:`first_bad_group`'s flags read back: per witness its first bad index, or None."""
    return [None if int(f) == _NONE_BAD else int(f) for f in flags]


def pinned_bytes(nbytes: int) -> np.ndarray:
    """A page-locked host buffer of ``nbytes`` from CuPy's pinned memory pool, alive as long as the
    array. (``cupyx.empty_pinned`` does the same, but importing cupyx pulls in cupyx.scipy and
    SciPy: ~0.3 s of a fresh ``distprove prove`` process.)"""
    import cupy

    return np.frombuffer(cupy.cuda.alloc_pinned_memory(nbytes), np.uint8, nbytes)


class WitnessUploader:
    """Uploads witness values from a file through one reusable pinned staging buffer.

    The buffer grows to the largest witness seen and is kept (a witness of n values holds n*32
    bytes of pinned host memory). Calls are serialised: the buffer is reused only after the
    copies out of it have finished.
    """

    def __init__(self, chunk_bytes: int = READ_CHUNK_BYTES, threads: int = READ_THREADS) -> None:
        self.chunk_bytes = chunk_bytes
        self.threads = threads
        self._staging: np.ndarray | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _buffer(self, nbytes: int) -> np.ndarray:
        if self._staging is None or self._staging.nbytes < nbytes:
            self._staging = None  # back to CuPy's pinned pool before the larger one is taken
            self._staging = pinned_bytes(nbytes)
        return self._staging[:nbytes]

    def _readers(self) -> ThreadPoolExecutor | None:
        if self.threads > 1 and self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="distprove-wtns")
        return self._pool

    def upload(self, path: str, offset: int, dest: "cupy.ndarray") -> int | None:
        """Read ``dest.nbytes`` bytes of ``path`` from ``offset`` into the device array ``dest``
        ((n, 8) uint32, contiguous) and return :func:`first_bad` of it.

        Copies and the check are queued on the current stream; this returns once they are done.
        Raises EOFError when the file is shorter than that, OSError when it cannot be read.
        """
        import cupy

        stream = cupy.cuda.get_current_stream()
        with self._lock:
            host = self._buffer(dest.nbytes)
            src = host.ctypes.data

            def queue(lo: int, hi: int) -> None:
                (dest.data + lo).copy_from_host_async(src + lo, hi - lo, stream)

            try:
                with open(path, "rb", buffering=0) as f:
                    read_chunks(f.fileno(), offset, host, queue, chunk_bytes=self.chunk_bytes, pool=self._readers())
                return first_bad(dest)
            finally:
                stream.synchronize()  # the staging buffer is free for the next call
