"""Double-buffered host-to-device copies of a streamed MSM's chunks of bases.

A streamed MSM (:func:`distprove.stages.stream.chunked_msm_start`) takes its bases chunk by chunk
from the key's host array. :class:`ChunkStager` holds two slots, each a pinned host buffer and a
device buffer: staging chunk i into slot i % 2 reads its rows from the key (a zarr store reads
only the chunks the range touches) into the slot's pinned buffer, then queues the copy to the
slot's device buffer on the stager's own copy stream and records an event the MSM's stream waits
for. So chunk i + 1's read and copy run while chunk i's MSM runs on its lane. Two events guard the
reuse of a slot: the host waits for the slot's last copy before overwriting its pinned buffer, and
the copy stream waits for the MSM that last read the slot's device buffer (:meth:`release`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .witness import pinned_bytes


class StagedChunk(NamedTuple):
    """A chunk's bases in a slot's device buffer: ``data`` ((rows, limbs) uint32, a view of the
    buffer) is valid on a stream once it waits for ``ready``."""

    data: Any
    ready: Any
    slot: int


class ChunkStager:
    """Two slots of pinned host and device buffers and a copy stream (the module docstring)."""

    SLOTS = 2

    def __init__(self, cp: Any) -> None:
        self.cp = cp
        self.stream = cp.cuda.Stream(non_blocking=True)
        self._host: list[Any] = [None] * self.SLOTS
        self._dev: list[Any] = [None] * self.SLOTS
        self._copied: list[Any] = [None] * self.SLOTS  # the slot's last copy out of its pinned buffer
        self._read: list[Any] = [None] * self.SLOTS  # the last MSM queued over the slot's device buffer

    def _buffers(self, slot: int, nbytes: int) -> tuple[Any, Any]:
        """The slot's pinned host and device byte buffers, grown to ``nbytes`` (after the work that
        used the old ones is done: nothing queued still reads a buffer given back)."""
        host, dev = self._host[slot], self._dev[slot]
        if host is None or host.nbytes < nbytes:
            if self._copied[slot] is not None:
                self._copied[slot].synchronize()
            host = self._host[slot] = pinned_bytes(nbytes)  # CuPy's pinned pool (cupyx would load SciPy)
        if dev is None or dev.nbytes < nbytes:
            if self._read[slot] is not None:
                self._read[slot].synchronize()
            self._dev[slot] = None
            dev = self._dev[slot] = self.cp.empty((nbytes,), dtype=self.cp.uint8)
        return host, dev

    def stage(self, source: Any, lo: int, hi: int, slot: int) -> StagedChunk:
        """Rows [lo, hi) of ``source`` (a host array-like of (n, limbs) uint32: a zarr array, a
        memory map, a :class:`~distprove.keyrange.RangedArray`) read into slot ``slot``'s pinned
        buffer and queued for the copy to its device buffer."""
        rows = hi - lo
        limbs = int(np.prod(source.shape[1:], dtype=np.int64))
        nbytes = max(4, rows * limbs * 4)
        if self._copied[slot] is not None:
            self._copied[slot].synchronize()  # the pinned buffer's previous copy has left it
        host, dev = self._buffers(slot, nbytes)
        host_rows = host[: rows * limbs * 4].view(np.uint32).reshape(rows, limbs)
        host_rows[...] = np.asarray(source[lo:hi], dtype=np.uint32)
        if self._read[slot] is not None:
            self.stream.wait_event(self._read[slot])  # the MSM two chunks back has read the device buffer
        dev_rows = dev[: rows * limbs * 4].view(self.cp.uint32).reshape(rows, limbs)
        dev_rows.set(host_rows, stream=self.stream)
        ready = self.cp.cuda.Event()
        ready.record(self.stream)
        self._copied[slot] = ready
        return StagedChunk(dev_rows, ready, slot)

    def release(self, slot: int, stream: Any) -> None:
        """The MSM over slot ``slot``'s chunk is queued on ``stream``: the slot's next copy waits
        for it."""
        done = self.cp.cuda.Event()
        done.record(stream)
        self._read[slot] = done
