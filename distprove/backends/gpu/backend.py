"""The GPU backend: the Backend interface of DESIGN.md on one CUDA device through CuPy.

Per key (by ``key.content_hash``) the bases and the coefficient CSR are uploaded once, on first
use, exactly as the key stores them (Montgomery limbs, coef*R^2 values: no conversion), and stay
resident. When the device runs out of memory (uploading, or in any stage), the MSM scratch and
CuPy's cached blocks are freed and then the least recently used other keys are evicted, one at a
time, retrying after each; an MSM that still does not fit runs in parts, and an overlapped MSM
phase that runs out is dropped and run again one MSM at a time (:meth:`GpuBackend.msm_start_all`).
MSMs started together over the same witness with the same window width (A, B1, B2) sort its
digits once. The MSMs that ``distprove.msm.precompute`` names also keep a table of window
multiples of their bases (built on first use): a whole MSM then runs merged, every window's
digits in one set of buckets (gpu.msm.msm_merged_start), and comes back as its total. Vectors
stay on the device: gather gives Montgomery-form evaluations (wrapped in :class:`MontVector`),
h_scalars a standard-form ``(n, 8)`` array the H MSM takes directly; only window sums come back
to the host.
"""

from __future__ import annotations

import logging
import os
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Sequence, TypeVar

import numpy as np

from distprove import config
from distprove import bn254
from distprove.backends.base import (BASE_ATTR, GPU_OVERHEAD, Backend, Evals, LoadedWitness, MsmJob, _same_names,
                                    check_whole, combine_proofs, resolve_constant_work, stored_rows)
from distprove.bn254 import Affine, Group
from distprove.errors import FormatError
from distprove.groth16 import MSM_NAMES, msm_group
from distprove.stages.msm import num_windows, sums_in_parts

from . import assemble as gpu_assemble
from . import fourstep as gpu_fourstep
from . import msm as gpu_msm
from . import ntt as gpu_ntt
from .gather import DeviceCsr, gather, gather_group
from .stream import ChunkStager, StagedChunk
from .witness import WitnessUploader, bad_indices, first_bad_group, pinned_bytes

log = logging.getLogger(__name__)
T = TypeVar("T")

SORT_SHARING = ("A", "B1", "B2")
"""MSMs over the whole witness: started together with equal widths they share one digit sort."""
UPLOAD_ROWS_BYTES = 64 << 20
"""Host-to-device copies go in slices of about this many bytes (bounded host memory)."""
DEFER_WITNESS_BYTES = 16 << 20
"""Witnesses of up to this many value bytes (2^19 values) are only read on the host ahead of their
group (:meth:`GpuBackend.read_witness_file`) and uploaded with the group's others in one copy and
checked in one launch; larger ones are uploaded as they are read, in chunks beside the MSMs
before, where the copy's own time (2.5 ms at 2^22 values) outweighs a launch and a wait."""
GROUP_PROOFS = 64
"""Most proofs of one key the GPU groups (:meth:`GpuBackend.proofs_per_group`) from 2^14 domain
points up: past a few dozen proofs a grouped MSM's launches are no longer what costs."""
SMALL_GROUP_POINTS = 1 << 20
"""Below that, a group holds up to this many domain points in all (128 proofs at 2^13, 256 at 2^12
and below, :data:`SMALL_GROUP_PROOFS`): what a group costs the host whatever its size (launches,
waits, its batched check, final exponentiation and write) is then spread over more proofs. At
2^12 one Dask worker on an H200 proved 1,006 proofs/s in groups of 256 and 1,015 in groups of
128, against 810 in groups of 64."""
SMALL_GROUP_PROOFS = 256
"""Most proofs of the smallest keys a group holds (larger groups were not measured)."""


def group_cap(domain_size: int) -> int:
    """Most proofs of a key with ``domain_size`` points the GPU groups: :data:`GROUP_PROOFS`, up to
    :data:`SMALL_GROUP_PROOFS` below 2^14 points (:data:`SMALL_GROUP_POINTS`)."""
    return min(SMALL_GROUP_PROOFS, max(GROUP_PROOFS, SMALL_GROUP_POINTS // max(1, domain_size)))


class MontVector(NamedTuple):
    """A device (n, 8) uint32 vector in Montgomery form (the members of the GPU's Evals)."""

    data: Any


def _as_window_sums(total: Affine, windows: int) -> list[Affine]:
    """A merged MSM's total as the sums of its ``windows`` windows: all in window 0, whose
    combine() is the same point."""
    return [total] + [None] * (windows - 1)


@dataclass
class MemoryPlan:
    """How one key's MSMs last fitted in the device's memory when they did not fit whole: later
    proofs of the key start there instead of running short again (each shortage costs the work
    queued before it and a release of every cached buffer)."""

    serial: bool = False
    """The overlapped phase (five MSMs on two lanes) ran short: start the MSMs one at a time."""
    parts: dict[tuple[str, int, int, int, int, bool], list[tuple[int, int, int, int]]] = field(default_factory=dict)
    """(which, c, lo, hi, n, constant work) -> the parts (windows lo..hi, points start..stop) an
    MSM ran in."""
    no_multiples: set[str] = field(default_factory=set)
    """MSMs whose table of window multiples (``distprove.msm.precompute``) did not fit."""


class _StoredRows:
    """A key's array as :class:`~distprove.backends.gpu.stream.ChunkStager` reads it: its shape,
    and row slices through :func:`~distprove.backends.base.stored_rows` (never a whole array kept
    in host memory)."""

    def __init__(self, key: Any, attr: str, rows: int) -> None:
        self._key, self._attr = key, attr
        self.shape = (rows, 32 if attr == "b2" else 16)  # a G2 or G1 affine point's uint32 limbs

    def __getitem__(self, sel: slice) -> Any:
        return stored_rows(self._key, self._attr, sel.start, sel.stop)


def _counted_witness(key: Any, path: str | os.PathLike[str]) -> Any:
    """The .wtns at ``path`` opened (read whole or mapped, as its size says) with its header
    checked and its count the key's (values not scanned: the device checks them); the host read's
    errors, a value >= r before the count."""
    from distprove.formats.wtns import count_error, read_wtns

    w = read_wtns(path, check_values=False)
    if w.n_witness != key.n_vars:
        read_wtns(path)  # a value >= r is reported before the count, as by the host read
        raise count_error(w.path, w.n_witness, key)
    return w


class GpuBackend(Backend):
    """Backend on the current CUDA device; per-key device state kept in an LRU."""

    name = "gpu"
    device_assembly = True
    fourstep = gpu_fourstep
    """The four-step NTT block functions of the distributed H (see ``gpu/fourstep.py``)."""
    memory_overhead = GPU_OVERHEAD

    def __init__(self) -> None:
        import cupy

        self.cp = cupy
        self._states: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.engine = gpu_ntt.engine()
        self._lanes: dict[str, tuple[Any, gpu_msm.MsmScratch]] = {}
        self._plans: dict[str, MemoryPlan] = {}
        self._witness = WitnessUploader()
        self._staging: Any = None  # pinned host stack of a group's witnesses (load_witness_group)
        self._staged: Any = None  # event after the last copy out of it
        self._chunks: ChunkStager | None = None  # a streamed MSM's double-buffered chunk copies

    # -- resident per-key state ------------------------------------------------------------

    def _state(self, key: Any) -> dict[str, Any]:
        h = key.content_hash
        st = self._states.get(h)
        if st is None:
            st = self._states[h] = {}
        self._states.move_to_end(h)
        return st

    def evict(self, content_hash: str | None = None) -> None:
        """Drop the device state of one key (or of all keys) and return the memory to the device.
        Every key's :class:`MemoryPlan` is forgotten too: what the evicted key held may let the
        others' MSMs fit whole again, and their next proofs find out."""
        if content_hash is None:
            self._states.clear()
            self._release_scratch()
        else:
            self._states.pop(content_hash, None)
        self._plans.clear()
        self.cp.get_default_memory_pool().free_all_blocks()

    def resident_bytes(self, content_hash: str | None = None) -> int:
        """Device bytes of the key arrays uploaded for one key (every key: None); the MSM scratch,
        NTT tables and witnesses, which every key shares, are not counted."""
        states = list(self._states.values()) if content_hash is None else [self._states.get(content_hash, {})]
        return sum(int(arr.nbytes) for st in states for arr in st.values())

    def _retry_oom(self, keep: str, fn: Callable[..., T], *args: Any, evict_others: bool = True) -> T:
        """fn(*args); when the device runs out of memory, free the MSM scratch, the NTT tables and
        CuPy's cached blocks, then (unless not ``evict_others``) evict least recently used keys
        other than ``keep`` one at a time, retrying after each."""
        freed = False
        while True:
            try:
                return fn(*args)
            except self.cp.cuda.memory.OutOfMemoryError:
                victims = [h for h in self._states if h != keep] if evict_others else []
                if freed and not victims:
                    raise
            # outside the handler, whose traceback keeps the failed call's buffers alive
            if not freed:
                freed = True
                self._free_rebuildable()
            else:
                log.info("GPU memory short: evicting key %s", victims[0])
                self.evict(victims[0])

    def _array(self, key: Any, attr: str) -> Any:
        """Key array ``attr`` on the device, uploaded unchanged on first use."""
        st = self._state(key)
        dev = st.get(attr)
        if dev is None:
            src = getattr(key, attr)
            shape = tuple(int(s) for s in src.shape)
            dev = self._retry_oom(key.content_hash, self.cp.empty, shape, self.cp.uint32)
            row_bytes = max(1, 4 * int(np.prod(shape[1:], dtype=np.int64)))
            step = max(1, UPLOAD_ROWS_BYTES // row_bytes)
            for lo in range(0, shape[0], step):
                hi = min(shape[0], lo + step)
                dev[lo:hi].set(np.ascontiguousarray(src[lo:hi], dtype=np.uint32))
            st[attr] = dev
        return dev

    def _lane(self, group: Group) -> tuple[Any, gpu_msm.MsmScratch]:
        """The stream and scratch of ``group``'s started MSMs: G1 and G2 each have their own, so a
        G2 MSM overlaps the G1 ones while the G1 MSMs run back to back on one stream."""
        lane = self._lanes.get(group.name)
        if lane is None:
            lane = self._lanes[group.name] = (self.cp.cuda.Stream(non_blocking=True), gpu_msm.MsmScratch())
        return lane

    def _free_rebuildable(self) -> None:
        """Free what later work rebuilds on demand, the first answer to running out of memory: the
        MSM scratch, the NTT engine's tables of every size seen so far, CuPy's cached blocks."""
        self._release_scratch()
        self.engine.clear()
        self.cp.get_default_memory_pool().free_all_blocks()

    def _release_scratch(self) -> None:
        """Drop the MSM scratch buffers, the lanes' and the synchronous path's (freeing the blocks
        syncs the device, so work queued with them finishes first)."""
        for _, scratch in self._lanes.values():
            scratch.release()
        gpu_msm.default_scratch().release()

    def _multiples(self, key: Any, which: str, group: Group, bases: Any, c: int, lo: int, hi: int,
                   cw: bool) -> tuple[Any, int] | None:
        """(table, width) of ``which``'s window multiples (gpu.msm.precompute_multiples) when
        ``distprove.msm.precompute`` names it and the MSM is whole (windows 0 .. W(c)) in the
        default mode; built on first use and kept with the key's arrays (evicted with them,
        counted by :meth:`resident_bytes`). None otherwise, or when the table does not fit even
        after the rebuildable buffers are freed (no key is evicted for it): the key then runs
        that MSM without one until the memory plans are forgotten (:meth:`evict`)."""
        n = int(bases.shape[0])
        if cw or lo != 0 or hi != num_windows(c) or n == 0 or which not in config.msm_precompute():
            return None
        width = gpu_msm.merged_width(n, group)
        if not gpu_msm.table_fits(n, width):
            return None
        st = self._state(key)
        attr = f"{which}_multiples_{width}"
        table = st.get(attr)
        if table is None:
            plan = self._plans.get(key.content_hash)
            if plan is not None and which in plan.no_multiples:
                return None
            try:
                table = self._retry_oom(key.content_hash, gpu_msm.precompute_multiples, group, bases, width,
                                        evict_others=False)
            except self.cp.cuda.memory.OutOfMemoryError:
                log.info("GPU memory short for %s's window multiples (%.1f GB): its MSMs run without them", which,
                         num_windows(width) * n * group.limbs * 4 / 1e9)
                self._plans.setdefault(key.content_hash, MemoryPlan()).no_multiples.add(which)
                return None
            st[attr] = table
        return table, width

    def _csr(self, key: Any, m: str) -> DeviceCsr:
        return DeviceCsr(*(self._array(key, f"{m}_{part}") for part in ("row_ptr", "signal", "value")))

    # -- Backend interface -----------------------------------------------------------------

    def load_witness(self, key: Any, values: np.ndarray) -> Any:
        """Upload the (n_vars, 8) uint32 standard-form witness."""
        return self.cp.asarray(np.ascontiguousarray(values, dtype=np.uint32))

    def load_witness_file(self, key: Any, path: str | os.PathLike[str]) -> LoadedWitness:
        """Read the .wtns values into pinned host memory, upload them in chunks (reading one
        while the one before is copied) and check every value < r on the device; the header and
        count checks are the host's. Same errors as the host read (the first bad value named)."""
        return self._upload_witness(key, _counted_witness(key, path))

    def _upload_witness(self, key: Any, w: Any) -> LoadedWitness:
        """The count-checked .wtns ``w`` (:func:`_counted_witness`) uploaded and range-checked."""
        from distprove.formats.wtns import value_error

        dev = self._retry_oom(key.content_hash, self.cp.empty, (w.n_witness, 8), self.cp.uint32)
        try:
            bad = self._witness.upload(w.path, w.offset, dev)
        except (OSError, EOFError) as e:
            raise FormatError(w.path, f"cannot read the witness values: {e}") from e
        if bad is not None:
            raise value_error(w.path, bad)
        return LoadedWitness(w.values, dev)

    def read_witness_file(self, key: Any, path: str | os.PathLike[str]) -> LoadedWitness:
        """Up to :data:`DEFER_WITNESS_BYTES`: the .wtns's header and count checked and its values
        read into host memory, unloaded (:meth:`load_witness_group` uploads and checks them with
        the group's others); larger witnesses are uploaded now, as :meth:`load_witness_file` does. Same errors as the host
        read, a bad value's once its group is loaded."""
        w = _counted_witness(key, path)
        if w.values.nbytes > DEFER_WITNESS_BYTES:
            self.settle()  # work queued before (NTTs): the upload would wait for it, not take its own time
            return self._upload_witness(key, w)
        return LoadedWitness(np.array(w.values) if w.mapped else w.values, None)  # in memory now, not when stacked

    def load_witness_group(
        self, key: Any, witnesses: Sequence[LoadedWitness], names: Sequence[str]
    ) -> tuple[Any, Callable[[], list[Exception | None]]]:
        """A (G, n_vars, 8) device stack: the unloaded witnesses copied into one pinned host stack
        and uploaded in one copy, the loaded ones (already checked) copied in on the device, and
        every row range-checked in one launch (gpu.witness.first_bad_group), all queued on the
        current stream; the returned function reads the G verdicts back (one wait)."""
        cp = self.cp
        g, n = len(witnesses), key.n_vars
        stack = self._retry_oom(key.content_hash, cp.empty, (g, n, 8), cp.uint32)
        if any(lw.vector is None for lw in witnesses):
            if self._staged is not None:
                self._staged.synchronize()  # the copy out of the last group's stack is done
            if self._staging is None or self._staging.nbytes < stack.nbytes:
                self._staging = None  # back to CuPy's pinned pool before the larger one is taken
                self._staging = pinned_bytes(stack.nbytes)
            host = self._staging[:stack.nbytes].view(np.uint32).reshape(g, n, 8)
            for i, lw in enumerate(witnesses):
                if lw.vector is None:
                    host[i] = lw.values
            stack.data.copy_from_host_async(host.ctypes.data, stack.nbytes, cp.cuda.get_current_stream())
            self._staged = cp.cuda.Event(disable_timing=True)
            self._staged.record()
        for i, lw in enumerate(witnesses):
            if lw.vector is not None:
                stack[i] = lw.vector
        flags = first_bad_group(stack)

        def verdicts() -> list[Exception | None]:
            from distprove.formats.wtns import value_error

            bad = bad_indices(cp.asnumpy(flags))
            return [None if i is None or lw.vector is not None else value_error(name, i)
                    for i, lw, name in zip(bad, witnesses, names)]

        return stack, verdicts

    def live_fractions_group(self, stack: Any, witnesses: Sequence[LoadedWitness]) -> Callable[[], list[float]]:
        """The group's live shares computed from the device stack in a few launches queued with
        the group's work (:func:`distprove.stages.msm.live_fractions`), read back in one small
        copy: on the host they cost about 0.4 ms a 2^12 witness."""
        from distprove.stages.msm import live_fractions

        shares = live_fractions(stack)
        return lambda: self.cp.asnumpy(shares).tolist()

    def gather_group(self, key: Any, witnesses: Any) -> Evals:
        """The group's evaluations in one launch (gpu.gather.gather_group): three (G, domain, 8)
        Montgomery stacks."""
        w = self.cp.asarray(witnesses, dtype=self.cp.uint32)
        if w.ndim != 3 or w.shape[1:] != (key.n_vars, 8):
            raise ValueError(f"witnesses have shape {w.shape}, the key expects (G, {key.n_vars}, 8)")
        return self._gathered(key, gather_group, w)

    def _gathered(self, key: Any, launch: Callable[..., Any], w: Any) -> Evals:
        """``launch`` (gpu.gather's gather or gather_group) over the key's CSRs and the witness
        vector or stack ``w``: the evaluations, retried when the device runs out of memory."""
        a_csr, b_csr = self._csr(key, "a"), self._csr(key, "b")
        if a_csr.rows != key.domain_size:
            raise ValueError(f"CSR has {a_csr.rows} rows, the key's domain is {key.domain_size}")
        a, b, c = self._retry_oom(key.content_hash, launch, a_csr, b_csr, w)
        return Evals(MontVector(a), MontVector(b), MontVector(c))

    def h_scalars_group(self, key: Any, evals: Evals) -> Any:
        """The group's H scalars, (G, domain_size, 8) standard form, computed in place in the
        evaluations' stacks (their NTTs in one proof's launches, NttEngine.h_scalars; its tables are
        built before anything is overwritten, so a retry after running out of memory is sound)."""
        return self._retry_oom(key.content_hash, self.engine.h_scalars, *(v.data for v in evals))

    def mark(self) -> Any:
        ev = self.cp.cuda.Event()
        ev.record()
        return ev

    def seconds_between(self, start: Any, end: Any) -> float:
        return self.cp.cuda.get_elapsed_time(start, end) / 1e3

    def synchronize(self) -> None:
        self.cp.cuda.Device().synchronize()  # every stream: started MSMs run on their own

    def settle(self) -> None:
        self.cp.cuda.get_current_stream().synchronize()  # not the MSM lanes (non-blocking streams)

    def window_width(self, n: int, group: Group, live: float = 1.0) -> int:
        return gpu_msm.pick_window(n, group, live)

    def gather(self, key: Any, witness: Any) -> Evals:
        w = self.cp.asarray(witness, dtype=self.cp.uint32)
        if w.shape != (key.n_vars, 8):
            raise ValueError(f"witness has shape {w.shape}, the key expects ({key.n_vars}, 8)")
        return self._gathered(key, gather, w)

    def h_scalars(self, key: Any, evals: Evals) -> Any:
        """hs = a*b - c on the odd coset, standard form, (domain_size, 8) uint32 on the device,
        computed in place in the evaluations (overwritten, as in :meth:`h_scalars_group`: every
        caller drops them), so the H stage holds four domain vectors, not seven."""
        return self.h_scalars_group(key, evals)

    def _msm_operands(self, key: Any, which: str, scalars: Any, constant_work: bool | None) -> tuple[Group, Any, Any, bool]:
        """Group, resident bases, device scalars (w[n_public+1:] for C) and the resolved mode of one MSM."""
        s = self.cp.asarray(scalars, dtype=self.cp.uint32)
        if which == "C":
            s = s[key.n_public + 1 :]
        return msm_group(which), self._array(key, BASE_ATTR[which]), s, resolve_constant_work(constant_work)

    def msm_windows(
        self,
        key: Any,
        which: str,
        scalars: Any,
        c: int,
        lo: int,
        hi: int,
        *,
        constant_work: bool | None = None,
    ) -> list[Affine]:
        """Window sums of one MSM, now. Short of memory: the retries of ``_retry_oom`` (scratch and
        CuPy's cache freed, other keys evicted), then, with nothing left to evict, the MSM in parts
        (:func:`~distprove.stages.msm.sums_in_parts`: halves of the window range, then of the points).
        The parts are remembered (:class:`MemoryPlan`): the same MSM of the key runs in them next time."""
        group, bases, s, cw = self._msm_operands(key, which, scalars, constant_work)
        n = int(bases.shape[0])
        oom = self.cp.cuda.memory.OutOfMemoryError
        multiples = self._multiples(key, which, group, bases, c, lo, hi, cw)
        if multiples is not None:
            table, width = multiples
            try:
                total = self._retry_oom(key.content_hash, lambda: gpu_msm.msm_merged(group, table, s, width))
                return _as_window_sums(total, hi - lo)
            except oom:
                log.info("GPU memory short for the merged MSM %s: running it by windows", which)

        def run(lo: int, hi: int, start: int, stop: int) -> list[Affine]:
            return self._retry_oom(
                key.content_hash,
                lambda: gpu_msm.msm_windows(group, bases[start:stop], s[start:stop], c, lo, hi, constant_work=cw),
            )

        shape = (which, c, lo, hi, n, cw)
        plan = self._plans.get(key.content_hash)
        ran: list[tuple[int, int, int, int]] = []
        sums = sums_in_parts(group, run, lo, hi, n, oom, f"GPU MSM {which}", plan.parts.get(shape) if plan else None, ran)
        if ran != [(lo, hi, 0, n)]:
            self._plans.setdefault(key.content_hash, MemoryPlan()).parts[shape] = ran
        elif plan is not None:
            plan.parts.pop(shape, None)
        return sums

    def msm_start_all(
        self, key: Any, jobs: Mapping[str, MsmJob], *, constant_work: bool | None = None
    ) -> Callable[[], dict[str, list[Affine]]]:
        """Queue each MSM of ``jobs`` on its group's stream (G1 and G2 overlap; each after
        everything queued so far on the current stream: uploads, gather, NTT) and return the
        waiter for their window sums.

        Short of memory anywhere in the phase, starting or waiting: the started MSMs are waited
        for and dropped with their buffers, the scratch and CuPy's cached blocks freed, and every
        MSM of ``jobs`` run again one at a time by :meth:`msm_windows` (which evicts other keys
        and, if one MSM alone does not fit, runs it in parts).
        """
        plan = self._plans.get(key.content_hash)
        if plan is not None and plan.serial:
            sums = self._one_at_a_time(key, jobs, constant_work, None)
            return lambda: sums
        oom = self.cp.cuda.memory.OutOfMemoryError
        started: dict[str, Callable[[], list[Affine]]] = {}
        share = {which: self._sort_share(which, job, constant_work) for which, job in jobs.items()}
        uses = Counter(share.values())
        sorts: dict[tuple, gpu_msm.DigitSort] = {}
        try:
            for which, job in jobs.items():
                shared = share[which] if share[which] is not None and uses[share[which]] > 1 else None
                started[which] = self._start(key, which, job, constant_work, sorts, shared)
        except oom:
            pass  # recovered below, outside the handler (its traceback holds the failed launch's buffers)
        sorts.clear()  # the started MSMs' waiters hold what they share
        if len(started) < len(jobs):
            failed = next(w for w in jobs if w not in started)
            started.clear()
            sums = self._one_at_a_time(key, jobs, constant_work, f"starting MSM {failed}")
            return lambda: sums

        def wait() -> dict[str, list[Affine]]:
            try:
                return {which: started[which]() for which in MSM_NAMES if which in started}
            except oom:
                pass
            started.clear()
            return self._one_at_a_time(key, jobs, constant_work, "waiting for the MSMs")

        return wait

    def proofs_per_group(self, key: Any) -> int:
        """As many proofs as one grouped G2 MSM of the key's witness (the largest of a proof's five)
        takes in the device's free memory (:func:`~gpu.msm.proofs_that_fit`) after each proof's own
        vectors (witness, H scalars and the gather's three evaluations while they last), at most
        :func:`group_cap`."""
        c = self.window_width(key.n_vars, bn254.G2)
        vectors = 32 * (key.n_vars + 4 * key.domain_size)
        cap = group_cap(key.domain_size)
        free = gpu_msm.free_device_bytes()
        room = max(free // 2, free - cap * vectors)
        return gpu_msm.proofs_that_fit(bn254.G2, key.n_vars, c, 0, num_windows(c), room, cap)

    def msm_start_proofs(
        self, key: Any, jobs: Sequence[Mapping[str, MsmJob]], *, constant_work: bool | None = None
    ) -> Callable[[], list[dict[str, list[Affine]]]]:
        """Queue the MSMs of several proofs of one key as grouped MSMs (gpu.msm.msm_windows_group_start:
        one set of launches for the proofs whose MSM ``which`` has the same width and windows, their
        scalars stacked into one (G, n, 8) array on the current stream) on each group's lane, and
        return the waiter: per proof {which: window sums}.

        Groups are split where :func:`~gpu.msm.proofs_that_fit` says (free memory, 32-bit indices);
        A, B1 and B2 of a group share one stacked witness and one digit sort, in equal parts. MSMs
        with window multiples (``distprove.msm.precompute``) run merged, per proof; constant-work
        mode, a key whose MSMs already run one at a time (:class:`MemoryPlan`) and a single proof
        take :meth:`Backend.msm_start_proofs`'s per-proof path, as does the whole phase after the
        device runs out of memory starting or waiting (each proof's MSMs then recover as
        :meth:`msm_start_all`'s do).
        """
        names = _same_names(jobs)
        plan = self._plans.get(key.content_hash)
        if len(jobs) <= 1 or resolve_constant_work(constant_work) or (plan is not None and plan.serial):
            return super().msm_start_proofs(key, jobs, constant_work=constant_work)
        oom = self.cp.cuda.memory.OutOfMemoryError
        started: list[tuple[str, list[int], Callable[[], list[list[Affine]]]]] = []
        try:
            self._start_groups(key, jobs, names, started)
        except oom:
            pass  # recovered below, outside the handler (its traceback holds the failed launch's buffers)
        if sum(len(members) for _, members, _ in started) < len(jobs) * len(names):
            started.clear()
            return self._proofs_after_oom(key, jobs, constant_work, "starting the grouped MSMs")

        def wait() -> list[dict[str, list[Affine]]]:
            sums: list[dict[str, list[Affine]]] = [{} for _ in jobs]
            try:
                for which, members, finish in started:
                    for p, windows in zip(members, finish()):
                        sums[p][which] = windows
            except oom:
                pass
            else:
                return [{which: proof[which] for which in names} for proof in sums]
            started.clear()
            return self._proofs_after_oom(key, jobs, constant_work, "waiting for the grouped MSMs")()

        return wait

    def msm_start_combined(
        self, key: Any, jobs: Sequence[Mapping[str, MsmJob]], *, constant_work: bool | None = None
    ) -> Callable[[], list[dict[str, Affine]]]:
        """:meth:`msm_start_proofs` of whole MSMs, each proof's window sums and ones combined and made
        affine on the device (gpu.msm's msm_combine), so that one standard-form row per (proof, MSM)
        comes back for a byte copy into integers. A single proof, constant-work
        mode and a key whose MSMs run one at a time take :meth:`Backend.msm_start_combined`'s host
        combine, as does the phase after the device runs out of memory starting or waiting."""
        check_whole(jobs)
        names = _same_names(jobs)
        plan = self._plans.get(key.content_hash)
        if len(jobs) <= 1 or resolve_constant_work(constant_work) or (plan is not None and plan.serial):
            return super().msm_start_combined(key, jobs, constant_work=constant_work)
        oom = self.cp.cuda.memory.OutOfMemoryError
        started: list[tuple[str, list[int], Callable[[], Any]]] = []
        try:
            self._start_groups(key, jobs, names, started, combined=True)
        except oom:
            pass  # recovered below, outside the handler (its traceback holds the failed launch's buffers)
        if sum(len(members) for _, members, _ in started) < len(jobs) * len(names):
            started.clear()
            recovered = self._proofs_after_oom(key, jobs, constant_work, "starting the grouped MSMs")
            return lambda: combine_proofs(jobs, recovered())

        def wait() -> list[dict[str, Affine]]:
            points: list[dict[str, Affine]] = [{} for _ in jobs]
            try:
                for which, members, finish in started:
                    got = finish()
                    if isinstance(got, np.ndarray):
                        got = bn254.points_from_limbs(msm_group(which), got, mont=False)
                    for p, point in zip(members, got):
                        points[p][which] = point
            except oom:
                pass
            else:
                return [{which: proof[which] for which in names} for proof in points]
            started.clear()
            return combine_proofs(jobs, self._proofs_after_oom(key, jobs, constant_work, "waiting for the grouped MSMs")())

        return wait

    def assemble_group(
        self, key: Any, msm_points: Sequence[Mapping[str, Affine]], blindings: Sequence[tuple[int, int]]
    ) -> list[tuple[Affine, Affine, Affine]]:
        """The group's proofs on the device (gpu.assemble: one upload, one launch, one readback) on
        the current stream, retried as every stage is when the device runs out of memory; the
        key's part (gpu.assemble.vk_words) is made and uploaded once and stays with its arrays."""
        if not msm_points:  # nothing to upload: the argument checks alone
            return gpu_assemble.assemble_group(None, msm_points, blindings)
        st = self._state(key)
        vk = st.get("assemble_vk")
        if vk is None:
            words = gpu_assemble.vk_words(key.points)
            vk = st["assemble_vk"] = self._retry_oom(key.content_hash, self.cp.asarray, words)
        return self._retry_oom(key.content_hash, gpu_assemble.assemble_group, vk, msm_points, blindings)

    def _start_groups(self, key: Any, jobs: Sequence[Mapping[str, MsmJob]], names: list[str],
                      started: list[tuple[str, list[int], Callable[[], Any]]], combined: bool = False) -> None:
        """Queue :meth:`msm_start_proofs`'s MSMs, appending (which, proofs, waiter) to ``started`` as
        each part starts (a waiter's lists are its proofs' window sums, in order). ``combined``
        (whole MSMs): a grouped part's waiter gives its proofs' points as (proofs, words) XYZZ rows
        combined on the device, a merged MSM's its proof's affine total in a list."""
        cp = self.cp
        free = gpu_msm.free_device_bytes()
        # Stack each class of proofs (same MSM width and windows) on the current stream first, so
        # that the lanes wait once for the stacks and everything queued before them.
        classes: list[tuple[str, tuple[int, int, int], list[int]]] = []
        for which in names:
            by_shape: dict[tuple[int, int, int], list[int]] = {}
            for p, proof in enumerate(jobs):
                job = proof[which]
                by_shape.setdefault((job.c, job.lo, job.hi), []).append(p)
            classes += [(which, shape, members) for shape, members in by_shape.items()]
        stacks: dict[tuple, Any] = {}
        plans: list[tuple[str, tuple[int, int, int], list[int], Any, int, tuple | None]] = []
        for which, (c, lo, hi), members in classes:
            group = msm_group(which)
            bases = self._array(key, BASE_ATTR[which])
            n = int(bases.shape[0])
            if self._multiples(key, which, group, bases, c, lo, hi, False) is not None:
                for p in members:  # merged, per proof (a new table is built on the current stream)
                    finish = self._start(key, which, jobs[p][which], False, {}, None)
                    started.append((which, [p], lambda finish=finish: [finish()[0] if combined else finish()]))
                continue
            share = (tuple(members), c, lo, hi) if which in SORT_SHARING else None
            stack_key = share or (which, tuple(members), c, lo, hi)
            if stack_key not in stacks:
                parts = [cp.asarray(jobs[p][which].scalars, dtype=cp.uint32) for p in members]
                if which == "C":
                    parts = [s[key.n_public + 1:] for s in parts]
                stacks[stack_key] = cp.ascontiguousarray(cp.stack(parts))
            # A, B1 and B2 take one part size (the G2 MSM's, the largest) so that they share sorts.
            sized = bn254.G2 if share is not None and "B2" in names else group
            step = gpu_msm.proofs_that_fit(sized, n, c, lo, hi, free, len(members))
            plans.append((which, (c, lo, hi), members, stacks[stack_key], step, share))
        ready = cp.cuda.Event()
        ready.record()
        sorts: dict[tuple, gpu_msm.DigitSort] = {}
        uses = Counter(share for *_, share in plans if share is not None)
        for which, (c, lo, hi), members, stack, step, share in plans:
            group = msm_group(which)
            bases = self._array(key, BASE_ATTR[which])
            stream, scratch = self._lane(group)
            stream.wait_event(ready)
            for first in range(0, len(members), step):
                part = stack[first:first + step]
                digits = None
                if share is not None and uses[share] > 1:
                    at = share + (first,)
                    if at not in sorts:
                        sorts[at] = gpu_msm.sort_digits(part, c, lo, hi, stream)
                    digits = sorts[at]
                finish = gpu_msm.msm_windows_group_start(group, bases, part, c, lo, hi, scratch, stream,
                                                         digits=digits, max_proofs=step, combined=combined)
                # The waiter holds the stacked scalars: freed earlier, their memory could be taken
                # by the current stream (the next group's witnesses) while the lane still reads them.
                started.append((which, members[first:first + step], lambda finish=finish, part=part: finish()))

    def _proofs_after_oom(self, key: Any, jobs: Sequence[Mapping[str, MsmJob]], constant_work: bool | None,
                          where: str) -> Callable[[], list[dict[str, list[Affine]]]]:
        """After running out of memory ``where``: wait for the device, free what can be rebuilt and
        start the proofs one after another (:meth:`Backend.msm_start_proofs`)."""
        log.info("GPU memory short %s: released their buffers, running the %d proofs' MSMs proof by proof",
                 where, len(jobs))
        self.synchronize()
        self._free_rebuildable()
        return super().msm_start_proofs(key, jobs, constant_work=constant_work)

    @staticmethod
    def _sort_share(which: str, job: MsmJob, constant_work: bool | None) -> tuple | None:
        """What makes two MSMs' digit sorts the same (None: never shared): the same scalars
        object, width and windows, in the default mode. C reads a slice of the witness, H its
        own scalars, so a proof's A, B1 and B2 share one sort whenever their widths agree."""
        if which not in SORT_SHARING or resolve_constant_work(constant_work):
            return None
        return (id(job.scalars), job.c, job.lo, job.hi)

    def _start(
        self, key: Any, which: str, job: MsmJob, constant_work: bool | None, sorts: dict[tuple, Any], share: tuple | None
    ) -> Callable[[], list[Affine]]:
        """Queue one MSM on its group's lane (after the current stream's work); its waiter. With a
        ``share`` key, the digit sort is taken from ``sorts``, or made on this lane and left there."""
        group, bases, s, cw = self._msm_operands(key, which, job.scalars, constant_work)
        multiples = self._multiples(key, which, group, bases, job.c, job.lo, job.hi, cw)  # a new table: this stream
        stream, scratch = self._lane(group)
        ready = self.cp.cuda.Event()
        ready.record()
        stream.wait_event(ready)
        if multiples is not None:
            table, width = multiples
            total = gpu_msm.msm_merged_start(group, table, s, width, scratch, stream)
            return lambda: _as_window_sums(total(), job.hi - job.lo)
        digits = None
        if share is not None:
            if share not in sorts:
                sorts[share] = gpu_msm.sort_digits(s, job.c, job.lo, job.hi, stream)
            digits = sorts[share]
        return gpu_msm.msm_windows_start(group, bases, s, job.c, job.lo, job.hi, scratch, stream, constant_work=cw, digits=digits)

    def _one_at_a_time(
        self, key: Any, jobs: Mapping[str, MsmJob], constant_work: bool | None, where: str | None
    ) -> dict[str, list[Affine]]:
        """Each MSM of ``jobs`` alone through :meth:`msm_windows`. After running out of memory
        ``where``: first wait for the device (the started MSMs' waiters are already dropped) and
        free what can be rebuilt, and remember that this key's MSMs run one at a time (None: the
        key's :class:`MemoryPlan` already says so)."""
        if where is not None:
            log.info("GPU memory short %s: released the MSM phase's buffers, running its %d MSMs one at a time "
                     "(and this key's MSMs from now on)", where, len(jobs))
            self.synchronize()
            self._free_rebuildable()
            self._plans.setdefault(key.content_hash, MemoryPlan()).serial = True
        return {
            which: self.msm_windows(key, which, *jobs[which], constant_work=constant_work)
            for which in MSM_NAMES
            if which in jobs
        }

    # -- memory budget and chunked MSMs ------------------------------------------------------

    def memory_budget(self) -> int | None:
        """``distprove.gpu.memory-limit`` in bytes: a size as it is, a fraction of the current
        card's memory; None when it is null (no budget: every stage on its unbounded path)."""
        limit = config.gpu_memory_limit()
        if limit is None:
            return None
        if isinstance(limit, float):
            _, total = self.cp.cuda.runtime.memGetInfo()
            return int(limit * int(total))
        return int(limit)

    def msm_chunk_bases(self, key: Any, which: str, lo: int, hi: int, slot: int, streamed: bool) -> Any:
        """A resident array's rows [lo, hi) as a view of the device array (no copy); a streamed
        one's staged into slot ``slot`` (:class:`~distprove.backends.gpu.stream.ChunkStager`: read
        into pinned host memory, copied on the stager's stream)."""
        if not streamed:
            return self._array(key, BASE_ATTR[which])[lo:hi]
        if self._chunks is None:
            self._chunks = ChunkStager(self.cp)
        return self._chunks.stage(_StoredRows(key, BASE_ATTR[which], self.msm_length(key, which)), lo, hi, slot)

    def msm_chunk_start(self, which: str, bases: Any, scalars: Sequence[Any], c: int, lo: int, hi: int, slot: int,
                        *, constant_work: bool | None = None) -> Callable[[], list[list[Affine]]]:
        """Queue one chunk's MSM on its group's lane after the current stream's work (the scalars)
        and the chunk's copy: one proof by gpu.msm.msm_windows_start, several as one grouped MSM
        (gpu.msm.msm_windows_group_start over their stacked scalars; constant-work mode proof by
        proof); a staged chunk's slot is released once the MSM is queued."""
        cp = self.cp
        group = msm_group(which)
        cw = resolve_constant_work(constant_work)
        staged = bases if isinstance(bases, StagedChunk) else None
        dev = staged.data if staged is not None else bases
        parts = [cp.ascontiguousarray(cp.asarray(s, dtype=cp.uint32)) for s in scalars]
        stack = cp.ascontiguousarray(cp.stack(parts)) if len(parts) > 1 and not cw else None
        stream, scratch = self._lane(group)
        ready = cp.cuda.Event()
        ready.record()  # after the scalars and their stack on the current stream
        stream.wait_event(ready)
        if staged is not None:
            stream.wait_event(staged.ready)
        if stack is not None:
            finish = gpu_msm.msm_windows_group_start(group, dev, stack, c, lo, hi, scratch, stream)
            waits = [lambda finish=finish, stack=stack: finish()]
        else:
            waits = [lambda w=gpu_msm.msm_windows_start(group, dev, s, c, lo, hi, scratch, stream, constant_work=cw): [w()]
                     for s in parts]
        if staged is not None and self._chunks is not None:
            self._chunks.release(staged.slot, stream)
        return lambda: [sums for w in waits for sums in w()]

    def ntt(self, values: np.ndarray, inverse: bool = False) -> np.ndarray:
        x = self.cp.asarray(np.ascontiguousarray(values, dtype=np.uint32).reshape(-1, 8))
        return self.cp.asnumpy(self.engine.ntt_standard(x, inverse))

    def to_host(self, vector: Any) -> np.ndarray:
        if isinstance(vector, MontVector):
            return self.cp.asnumpy(self.engine.from_montgomery(vector.data.copy()))
        if isinstance(vector, self.cp.ndarray):
            return self.cp.asnumpy(vector)
        return super().to_host(vector)
