"""Shared-memory slots through which a worker's witness processes hand witnesses to its proof tasks.

A streamed proof task would otherwise read each witness back from a scratch .wtns: open, read
and copy, with the GIL given up where the file is not in memory. In a worker beside a thread
holding the GIL half the time, a 2^16-value witness cost the taking thread 0.46-0.49 ms from its
file (on tmpfs, read with the GIL held: ``distprove.formats.wholeread``) against 0.23-0.28 ms
copied out of a slot, at mul_chain_1k 0.037-0.039 against 0.010-0.014 ms
(``pipelines/bench_witness_handover.py --circuit``, the 2-core VM). A pool job's result is no way
around the file: its bytes cross the pool's pipe through the worker's one result thread, which
then bounds the pool (half the witnesses a second at 2^16).

Per witness size, the worker process makes one ring of slots: a sparse file in /dev/shm, mapped
and unlinked at once: it lives while the worker's descriptor and the mappings do, so a worker
killed outright leaves nothing behind. The witness processes map the same file through
``/proc/<worker pid>/fd/<fd>`` (:func:`write_slot`). A witness's claim reserves a slot (none free:
the witness goes through a scratch file), its witness process allocates the slot's pages
(``posix_fallocate``, a no-op once done: a full /dev/shm then sends that witness to its file
instead of killing the process with SIGBUS at its first write, and no process pays for a whole
ring up front: 0.24 s a GiB here) and writes the values, and the proof task copies them out
(:meth:`Ring.take`), which frees the slot. A ring lives as long as its worker process; its pages
go back to /dev/shm a few seconds after each batch's end (:func:`trim_rings`). Linux only.
"""

from __future__ import annotations

import logging
import mmap
import os
import sys
import tempfile
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)

SHM = "/dev/shm"
RING_CLAIMS = 4
"""A ring holds up to this many times the slots of the first claim that makes it (a proof task's
group and the witness tasks ahead of it: the four groups an input batch keeps in flight per
worker), within the budget."""
SHM_RESERVE = 1 / 8
"""The share of /dev/shm a slot's allocation leaves free (else that witness goes through a file):
other processes of the host (NCCL, other workers' rings) need room there too. No ring is made
larger than the rest."""
UNCAPPED = 1 << 62
"""A budget with no cap of its own (``shared-memory: auto``): the ring's slots are bounded by its
first claim and /dev/shm's size."""
MAPPED_RINGS = 2
"""Rings a witness process keeps mapped (the least recently used one is unmapped beyond that)."""


@dataclass(frozen=True)
class RingRef:
    """What a witness process needs to write into a ring: its identity, the path that opens its
    file (``/proc/<pid>/fd/<fd>`` of the worker process) and its shape."""

    ident: str
    where: str
    n_vars: int
    slots: int


class Ring:
    """A worker process's slots for witnesses of ``n_vars`` values (see the module's docstring)."""

    def __init__(self, n_vars: int, slots: int) -> None:
        size = slots * n_vars * 32
        fd, path = tempfile.mkstemp(prefix="distprove-witness-slots-", dir=SHM)
        try:
            os.unlink(path)
            os.ftruncate(fd, size)
            self._map = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.ref = RingRef(uuid.uuid4().hex, f"/proc/{os.getpid()}/fd/{fd}", n_vars, slots)
        self.values: np.ndarray | None = np.frombuffer(self._map, np.uint32).reshape(slots, n_vars, 8)
        self._free = list(range(slots - 1, -1, -1))  # a stack: the slots used last are used again, their pages warm
        self._lock = threading.Lock()

    def reserve(self) -> int | None:
        """A free slot, or None when every slot is reserved."""
        with self._lock:
            return self._free.pop() if self._free else None

    def release(self, slot: int) -> None:
        """Free ``slot`` (its writer done with it)."""
        with self._lock:
            self._free.append(slot)

    @property
    def idle(self) -> bool:
        """Whether no slot is reserved."""
        with self._lock:
            return len(self._free) == self.ref.slots

    def trim(self) -> bool:
        """Give the ring's pages back to /dev/shm when no slot is reserved (``MADV_REMOVE``; a
        slot written later is allocated again by its witness process); whether it did."""
        with self._lock:
            if len(self._free) != self.ref.slots:
                return False
            self._map.madvise(mmap.MADV_REMOVE)
            return True

    def take(self, slot: int) -> np.ndarray:
        """The (n_vars, 8) values written into ``slot``, copied out; the slot is freed."""
        assert self.values is not None
        out = self.values[slot].copy()
        self.release(slot)
        return out

    def close(self) -> None:
        """Unmap the ring and close its file (witness processes that still map it keep its pages
        until they unmap it)."""
        self.values = None
        self._map.close()
        os.close(self._fd)


_rings: dict[int, Ring | None] = {}
"""This worker process's ring per witness size, kept for the process's life (None: none could be
made; files for that size)."""
_rings_lock = threading.Lock()


def trim_rings() -> None:
    """Give back the pages of this process's rings that hold no reserved slot (a batch's end)."""
    with _rings_lock:
        for ring in _rings.values():
            if ring is not None:
                ring.trim()


def ring_for(n_vars: int, budget: int, claims: int) -> Ring | None:
    """This process's ring for witnesses of ``n_vars`` values, made on first use with
    :data:`RING_CLAIMS` times ``claims`` slots within ``budget`` bytes and /dev/shm's size less
    its :data:`SHM_RESERVE` (idle rings of other sizes closed first); None where there is none:
    not Linux, no /dev/shm, room for less than one slot, or no ring could be made (then scratch
    files, for this size, from then on)."""
    slot_bytes = n_vars * 32
    if sys.platform != "linux" or budget < slot_bytes or not os.path.isdir(SHM):
        return None
    with _rings_lock:
        if n_vars in _rings:
            return _rings[n_vars]
        room = int(_shm_bytes() * (1 - SHM_RESERVE))
        if room < slot_bytes:
            return None
        for other, ring in list(_rings.items()):
            if ring is not None and ring.idle:
                ring.close()
                del _rings[other]
        want, cap = RING_CLAIMS * max(1, claims), min(budget, room)
        slots = max(1, min(cap // slot_bytes, want))
        if room < min(budget, want * slot_bytes):  # /dev/shm, not the budget, holds the ring back
            log.warning("/dev/shm holds %d of the %d witnesses of %d values in flight; the rest go through "
                        "scratch files beside the proofs (slower; give the worker a larger /dev/shm, e.g. "
                        "docker run --shm-size)", slots, want, n_vars)
        try:
            ring: Ring | None = Ring(n_vars, slots)
        except OSError as exc:
            log.warning("no shared witness slots (%d x %d bytes in %s: %s); witnesses go through scratch files",
                        slots, slot_bytes, SHM, exc.strerror or exc)
            ring = None
        _rings[n_vars] = ring
        return ring


def _shm_bytes() -> int:
    """The size of /dev/shm (0 where it cannot be read)."""
    try:
        st = os.statvfs(SHM)
    except OSError:
        return 0
    return st.f_blocks * st.f_frsize


def _room(fd: int, size: int) -> bool:
    """Whether ``size`` more bytes of the filesystem of ``fd`` (/dev/shm) leave it
    :data:`SHM_RESERVE` free."""
    st = os.fstatvfs(fd)
    return (st.f_bavail * st.f_frsize - size) >= SHM_RESERVE * st.f_blocks * st.f_frsize


_mapped: OrderedDict[str, tuple[int, np.ndarray]] = OrderedDict()
"""In a witness process: the rings mapped here (a descriptor and the view), most recently used last."""
_mapped_lock = threading.Lock()  # a daemonic worker's pool is threads


def write_slot(ref: RingRef, slot: int, values: np.ndarray) -> bool:
    """In a witness process: write ``values`` into ``slot`` of the ring ``ref`` once its pages are
    allocated; False (nothing written) when /dev/shm has no room for them, or would be left with
    less than :data:`SHM_RESERVE` of its size free (an allocated slot counts as new here). The
    ring is mapped here on its first witness; beyond :data:`MAPPED_RINGS` rings the least
    recently used is unmapped."""
    with _mapped_lock:
        entry = _mapped.get(ref.ident)
        if entry is None:
            fd = os.open(ref.where, os.O_RDWR)
            try:
                view = np.frombuffer(mmap.mmap(fd, ref.slots * ref.n_vars * 32), np.uint32).reshape(ref.slots, ref.n_vars, 8)
            except BaseException:
                os.close(fd)
                raise
            _mapped[ref.ident] = entry = (fd, view)
            while len(_mapped) > MAPPED_RINGS:
                old_fd, _ = _mapped.popitem(last=False)[1]  # its map closes with its last view
                os.close(old_fd)
        _mapped.move_to_end(ref.ident)
    fd, view = entry
    size = ref.n_vars * 32
    try:
        if not _room(fd, size):
            return False
        os.posix_fallocate(fd, slot * size, size)
    except OSError:
        return False
    view[slot] = values
    return True
