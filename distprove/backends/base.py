"""The backend interface every prover backend (CPU reference, GPU) implements.

A backend holds per-key state (converted or uploaded arrays) keyed by ``key.content_hash`` and
keeps intermediate vectors in its own representation (Python ints on the CPU, CuPy arrays on
the GPU); only the MSM window sums come back to the host, as affine Python-int points.

The ``key`` argument is duck-typed. It needs the attributes

* ``n_vars``, ``n_public``, ``domain_size`` (int) and ``content_hash`` (str);
* ``path`` (str): named in the witness count error of :meth:`Backend.load_witness_file`;
* ``a``, ``b1``, ``c``, ``h``: (m, 16) uint32 G1 bases, ``b2``: (n_vars, 32) uint32 G2 bases,
  Montgomery affine limbs, all-zero row = infinity (``c`` holds signals n_public+1 .. n_vars-1,
  ``h`` has domain_size rows);
* ``a_row_ptr``, ``a_signal``, ``a_value`` and ``b_row_ptr``, ``b_signal``, ``b_value``: the
  coefficient CSR of DESIGN.md (values as stored, coef*R^2 mod r);
* ``points``: the affine alpha1, beta1, beta2, delta1, delta2 that :meth:`Backend.assemble_group`
  adds (:data:`distprove.stages.assemble.VK_POINTS`).

Only numpy-style slicing (``key.a[lo:hi]``) is assumed of the array attributes.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from distprove import bn254, config
from distprove.bn254 import Affine, Group
from distprove.groth16 import MSM_NAMES, msm_group
from distprove.stages.msm import combine, default_window, num_windows

GPU_OVERHEAD = 256 << 20
"""A GPU plan's bytes beside its itemised ones: the NTT's twiddle and coset tables, constants,
CuPy's pool rounding its blocks up."""

BASE_ATTR = {"A": "a", "B1": "b1", "B2": "b2", "C": "c", "H": "h"}
"""The key attribute holding each MSM's bases."""


def stored_rows(key: Any, attr: str, lo: int, hi: int) -> Any:
    """Rows [lo, hi) of the key's array ``attr`` as a streamed MSM reads them: through the key's
    ``stored_rows`` where it has one (a worker's resident key, a points-mode share: from storage,
    not through a whole array they would keep in host memory), else by slicing the array (a zarr
    store reads only the chunks the range touches, a .zkey's memory map only those pages)."""
    read = getattr(key, "stored_rows", None)
    return read(attr, lo, hi) if callable(read) else getattr(key, attr)[lo:hi]


def resolve_constant_work(value: bool | None) -> bool:
    """``value``, or when None the dask config key ``distprove.msm.constant-work`` (default false).

    Read where the MSM runs, so on a cluster each worker's configuration decides unless the
    caller passes the value explicitly.
    """
    if value is not None:
        return bool(value)
    return config.get_bool("msm.constant-work")


class Evals(NamedTuple):
    """Domain evaluations a, b, c = a*b of one proof, each a backend vector of domain_size."""

    a: Any
    b: Any
    c: Any


class LoadedWitness(NamedTuple):
    """A witness file read, checked against a key and loaded into a backend."""

    values: np.ndarray
    """(n_vars, 8) uint32 standard form on the host (may be a read-only map of the file)."""
    vector: Any
    """The same values in the backend's representation (:meth:`Backend.load_witness`)."""


class MsmJob(NamedTuple):
    """One MSM of :meth:`Backend.msm_start_all`: its scalars (as for :meth:`Backend.msm_windows`),
    window width ``c`` and window range [lo, hi)."""

    scalars: Any
    c: int
    lo: int
    hi: int


def _same_names(jobs: Sequence[Mapping[str, MsmJob]]) -> list[str]:
    """The MSMs every proof of :meth:`Backend.msm_start_proofs` names, in :data:`MSM_NAMES` order;
    ValueError when the proofs name different ones or an unknown one."""
    names = set(jobs[0]) if jobs else set()
    for p, proof in enumerate(jobs):
        if set(proof) != names:
            raise ValueError(f"proof {p} names MSMs {sorted(proof)}, proof 0 names {sorted(names)}")
    for which in names:
        msm_group(which)
    return [which for which in MSM_NAMES if which in names]


def check_whole(jobs: Sequence[Mapping[str, MsmJob]]) -> None:
    """ValueError unless every job of :meth:`Backend.msm_start_combined` is a whole MSM (windows 0 .. W(c))."""
    for p, proof in enumerate(jobs):
        for which, job in proof.items():
            if (job.lo, job.hi) != (0, num_windows(job.c)):
                raise ValueError(f"proof {p}'s MSM {which} covers windows [{job.lo}, {job.hi}), "
                                 f"not the whole [0, {num_windows(job.c)}) of c={job.c}")


def combine_proofs(jobs: Sequence[Mapping[str, MsmJob]], sums: Sequence[Mapping[str, list[Affine]]]) -> list[dict[str, Affine]]:
    """Per proof {which: its window sums' :func:`~distprove.stages.msm.combine`} (the host's Horner)."""
    return [{which: combine(msm_group(which), dict(enumerate(windows)), proof[which].c) for which, windows in s.items()}
            for proof, s in zip(jobs, sums)]


class Backend(ABC):
    """Computes the heavy stages of a Groth16 proof; the host does combine and assembly, except a
    group's assembly on a backend with :attr:`device_assembly`."""

    name: str
    """Short identifier ("cpu", "gpu") used by the CLI and in reports."""
    device_assembly: bool = False
    """Whether :meth:`assemble_group` runs on a device: the host then only waits for it, and a
    worker has no use for its process pool there."""

    def load_witness(self, key: Any, values: np.ndarray) -> Any:
        """The witness ((n_vars, 8) uint32, standard form) in the backend's representation.

        Default: the array itself. A GPU backend uploads it once for gather and the MSMs.
        """
        return values

    def load_witness_file(self, key: Any, path: str | os.PathLike[str]) -> LoadedWitness:
        """Read the .wtns at ``path``, check it (header, every value < r, the key's n_vars
        values) and load it with :meth:`load_witness`.

        Raises FormatError(path, problem) naming the first bad value. Default: the checked host
        read of :func:`distprove.formats.wtns.read_wtns`; a GPU backend checks on the device.
        """
        from distprove.formats.wtns import count_error, read_wtns

        w = read_wtns(path)
        if w.n_witness != key.n_vars:
            raise count_error(w.path, w.n_witness, key)
        return LoadedWitness(w.values, self.load_witness(key, w.values))

    def read_witness_file(self, key: Any, path: str | os.PathLike[str]) -> LoadedWitness:
        """The part of :meth:`load_witness_file` done ahead of a group of proofs (a prefetch): the
        .wtns at ``path`` read and checked against the key. A backend that range-checks on the
        device may leave the values unloaded (``vector`` None, unchecked): :meth:`load_witness_group`
        loads and checks them with the group's others. Default: :meth:`load_witness_file`."""
        return self.load_witness_file(key, path)

    def load_witness_group(
        self, key: Any, witnesses: Sequence[LoadedWitness], names: Sequence[str]
    ) -> tuple[Any, Callable[[], list[Exception | None]]]:
        """A group's witnesses as one backend stack (``stack[i]``: witness i's vector, as
        :meth:`load_witness` gives it), the unloaded ones (``vector`` None) loaded and checked
        (every value < r), and a function that gives per witness None or its FormatError naming
        ``names[i]`` and its first bad value. The stack's rows of a bad witness, and what
        :meth:`gather_group` and :meth:`h_scalars_group` make of them, are unspecified.

        A GPU queues the group's one upload and one range check and reads the verdicts back when
        the function is called (after the group's gather and H are queued: one wait for all).
        Default: a list, each unloaded witness checked on the host and loaded (None if bad).
        """
        from distprove.bn254 import R
        from distprove.formats.container import first_false, lt_bound
        from distprove.formats.wtns import value_error

        stack: list[Any] = []
        errors: list[Exception | None] = []
        for loaded, name in zip(witnesses, names, strict=True):
            vector, error = loaded.vector, None
            if vector is None:
                bad = first_false(lt_bound(loaded.values, R))
                if bad is None:
                    vector = self.load_witness(key, loaded.values)
                else:
                    error = value_error(name, bad)
            stack.append(vector)
            errors.append(error)
        return stack, lambda: errors

    def live_fractions_group(self, stack: Any, witnesses: Sequence[LoadedWitness]) -> Callable[[], list[float]]:
        """Each witness's share of scalars other than 0 and 1
        (:func:`distprove.stages.msm.live_fraction`), for a group's stack from
        :meth:`load_witness_group` and the witnesses it was made from; the returned function gives
        them once the group's work is settled (:meth:`settle`). A GPU computes them from the stack
        on the device, beside the group's other work; an entry for a witness found bad is
        unspecified. Default: from each witness's host values."""
        from distprove.stages.msm import live_fraction

        shares = [live_fraction(w.values) for w in witnesses]
        return lambda: shares

    def gather_group(self, key: Any, witnesses: Any) -> Evals:
        """:meth:`gather` of every witness of a group's stack (:meth:`load_witness_group`): Evals
        whose members are stacks, ``member[i]`` proof i's. A GPU gathers the group in one launch.
        Default: each witness in turn (lists; None for a bad witness's None)."""
        each = [None if w is None else self.gather(key, w) for w in witnesses]
        return Evals(*([None if e is None else e[m] for e in each] for m in range(3)))

    def h_scalars_group(self, key: Any, evals: Evals) -> Any:
        """:meth:`h_scalars` of every proof of a group's stacked evaluations (:meth:`gather_group`),
        which it may overwrite: a stack, ``[i]`` proof i's H scalars. A GPU runs the group's NTTs
        in the launches of one proof's. Default: each proof in turn (a list)."""
        return [None if a is None else self.h_scalars(key, Evals(a, b, c)) for a, b, c in zip(*evals)]

    def mark(self) -> Any:
        """A point in the work queued so far, for :meth:`seconds_between`: a GPU records an event
        on the current stream. Default: the host clock (synchronous backends)."""
        return time.perf_counter()

    def seconds_between(self, start: Any, end: Any) -> float:
        """Seconds the queued work took from mark ``start`` to mark ``end``, once the work before
        ``end`` is done (after :meth:`settle`)."""
        return end - start

    def window_width(self, n: int, group: Group, live: float = 1.0) -> int:
        """The MSM window width c this backend wants for ``n`` points of which a fraction ``live``
        have scalars other than 0 and 1 (:func:`distprove.stages.msm.live_fraction`; default: the
        CPU choice, which does not depend on it)."""
        return default_window(n, group)

    def resident_bytes(self, content_hash: str | None = None) -> int:
        """Device memory held for one key (by content hash), or for every key (None).

        Default: 0 (nothing kept on a device).
        """
        return 0

    def synchronize(self) -> None:
        """Wait for queued device work, so a host timer around a stage measures the stage.

        Default: nothing to wait for (synchronous backends).
        """

    def settle(self) -> None:
        """Wait for the work queued on the default stream (uploads, gather, NTTs) but not for MSMs
        running on their own streams: a witness prefetched beside those MSMs is then timed alone.

        Default: nothing to wait for (synchronous backends).
        """

    @abstractmethod
    def gather(self, key: Any, witness: Any) -> Evals:
        """Step 1: a[i] = sum_row coef*w, b likewise, c = a*b, for rows i < domain_size.

        ``witness``: from :meth:`load_witness` ((n_vars, 8) uint32 standard form, w[0] = 1).
        """

    @abstractmethod
    def h_scalars(self, key: Any, evals: Evals) -> Any:
        """Steps 2-3: odd-coset values hs = a*b - c, standard form, a backend vector (n, 8) uint32.
        It may overwrite the evaluations (the GPU's does): callers drop them."""

    @abstractmethod
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
        """Window sums S_lo..S_{hi-1} (DESIGN.md "MSM: windows and digits") of MSM ``which``.

        ``which`` in {"A", "B1", "B2", "C", "H"}. ``scalars`` is the loaded witness for A, B1,
        B2 and C (the backend slices w[n_public+1:] for C) or the H scalars for H. Index i
        of the result is window lo+i, an affine point or None (infinity).
        ``constant_work``: the opt-in mode of docs/CONSTANT_WORK.md (same sums, every scalar
        in every window); None = :func:`resolve_constant_work`'s config default. A backend may
        return a whole MSM (lo = 0, hi = W(c)) as its total in window 0 and infinity elsewhere
        (the GPU's precomputed window multiples, ``distprove.msm.precompute``): the sums'
        :func:`~distprove.stages.msm.combine` is the same point.
        """

    def msm_start(
        self,
        key: Any,
        which: str,
        scalars: Any,
        c: int,
        lo: int,
        hi: int,
        *,
        constant_work: bool | None = None,
    ) -> Callable[[], list[Affine]]:
        """Start :meth:`msm_windows` and return a function that waits for its window sums: the
        phase of :meth:`msm_start_all` with this one MSM (backends override that, not this)."""
        wait = self.msm_start_all(key, {which: MsmJob(scalars, c, lo, hi)}, constant_work=constant_work)
        return lambda: wait()[which]

    def msm_start_all(
        self, key: Any, jobs: Mapping[str, MsmJob], *, constant_work: bool | None = None
    ) -> Callable[[], dict[str, list[Affine]]]:
        """Start the MSMs ``jobs`` ({which: job}) in the mapping's order and return a function that
        waits for them all: {which: window sums}, collected in :data:`MSM_NAMES` order.

        A backend that can overlap MSMs (the GPU: G1 and G2 on two streams) queues the work and
        returns at once, and recovers the whole phase when the device runs out of memory with
        MSMs in flight; the default computes each now with :meth:`msm_windows`. Wait for every
        start before the scalars change or the next proof begins.
        """
        sums = {which: self.msm_windows(key, which, *job, constant_work=constant_work) for which, job in jobs.items()}
        return lambda: {which: sums[which] for which in MSM_NAMES if which in sums}

    def msm_start_proofs(
        self, key: Any, jobs: Sequence[Mapping[str, MsmJob]], *, constant_work: bool | None = None
    ) -> Callable[[], list[dict[str, list[Affine]]]]:
        """Start the MSMs of several proofs of one key (``jobs[p]``: proof p's {which: job}, as for
        :meth:`msm_start_all`, every proof naming the same MSMs) and return a function that waits
        for them all: per proof {which: window sums}, in :data:`MSM_NAMES` order.

        A GPU runs the proofs' MSMs of each kind and width as grouped MSMs (one set of launches
        for many proofs against the key's bases); the default, the reference, starts each proof's
        :meth:`msm_start_all` in turn and waits for them in order. Wait before any scalars change.
        """
        names = _same_names(jobs)
        waits = [self.msm_start_all(key, {which: proof[which] for which in names}, constant_work=constant_work)
                 for proof in jobs]
        return lambda: [wait() for wait in waits]

    def msm_start_combined(
        self, key: Any, jobs: Sequence[Mapping[str, MsmJob]], *, constant_work: bool | None = None
    ) -> Callable[[], list[dict[str, Affine]]]:
        """:meth:`msm_start_proofs` of whole MSMs (every job's windows 0 .. W(c)), each reduced to
        its point: the waiter returns per proof {which: sum_w 2^(c w) S_w} (None = infinity).

        Default, the reference: :func:`~distprove.stages.msm.combine` of each proof's window sums on
        the host. A GPU combines the window sums on the device and converts the group's points to
        affine together. ValueError for a job that is not a whole MSM.
        """
        check_whole(jobs)
        wait = self.msm_start_proofs(key, jobs, constant_work=constant_work)
        return lambda: combine_proofs(jobs, wait())

    def assemble_group(
        self, key: Any, msm_points: Sequence[Mapping[str, Affine]], blindings: Sequence[tuple[int, int]]
    ) -> list[tuple[Affine, Affine, Affine]]:
        """(pi_a, pi_b, pi_c) of each proof of a group of ``key``'s proofs from its five MSM results
        ({which: affine point}, None = infinity: what :meth:`msm_start_combined` gives) and its
        blinding (r, s) (DESIGN.md step 5). ValueError for a proof missing an MSM result, or as
        many blindings as proofs.

        Default, the reference: :func:`distprove.stages.assemble.assemble` proof by proof on the
        host. A GPU assembles the group on the device, to the same bits."""
        from distprove.stages.assemble import assemble

        if len(blindings) != len(msm_points):
            raise ValueError(f"{len(msm_points)} proofs' MSM results but {len(blindings)} blindings")
        return [assemble(key.points, points, r, s) for points, (r, s) in zip(msm_points, blindings)]

    def memory_budget(self) -> int | None:
        """This worker's device memory budget for a key in bytes, or None: no budget set, every
        stage on its unbounded path (:func:`distprove.prover.memory_plan` then plans nothing).
        Default: ``distprove.planner.worker-memory``; a GPU resolves ``distprove.gpu.memory-limit``
        against its card."""
        return config.get_bytes("planner.worker-memory")

    memory_overhead: int = 0
    """Bytes a memory plan sets aside beside what it itemises (:func:`distprove.memplan.plan_memory`)."""
    min_chunk: int = 1 << 12
    """Fewest points of a chunked MSM's chunk in a memory plan (:data:`distprove.memplan.MIN_CHUNK`)."""

    def msm_length(self, key: Any, which: str) -> int:
        """Points of MSM ``which``'s bases: the key array's rows, from the key's ``stored_length``
        where it has one (nothing read into host memory), else the array's shape."""
        length = getattr(key, "stored_length", None)
        attr = BASE_ATTR[which]
        return int(length(attr)) if callable(length) else int(getattr(key, attr).shape[0])

    def msm_chunk_bases(self, key: Any, which: str, lo: int, hi: int, slot: int, streamed: bool) -> Any:
        """Bases [lo, hi) of MSM ``which`` for :meth:`msm_chunk_start`, in chunk buffer ``slot``
        (0 or 1: :func:`distprove.stages.stream.chunked_msm_start` alternates them). ``streamed``:
        read from the key's host array (a zarr store reads only the chunks the range touches);
        else a slice of what the backend holds for the key. Default: the key's rows, read now
        (:func:`stored_rows`)."""
        return np.ascontiguousarray(stored_rows(key, BASE_ATTR[which], lo, hi), dtype="<u4")

    def msm_chunk_start(self, which: str, bases: Any, scalars: Sequence[Any], c: int, lo: int, hi: int, slot: int,
                        *, constant_work: bool | None = None) -> Callable[[], list[list[Affine]]]:
        """Start MSM ``which``'s windows [lo, hi) over one chunk's ``bases`` (from
        :meth:`msm_chunk_bases`, slot ``slot``) for each proof's ``scalars[p]`` (the chunk's rows,
        C's offset already applied) and return the waiter of per proof window sums. A backend that
        queues it frees the slot for reuse once the MSM has read it. Default, the reference: the
        CPU Pippenger of each proof now."""
        from distprove.backends.cpu import msm as cpu_msm

        group = msm_group(which)
        points = bn254.points_from_limbs(group, np.asarray(bases)) if isinstance(bases, np.ndarray) else bases
        cw = resolve_constant_work(constant_work)
        sums = [cpu_msm.msm_windows(group, points, np.asarray(s, dtype="<u4").reshape(-1, 8), c, lo, hi, cw)
                for s in scalars]
        return lambda: sums

    def proofs_per_group(self, key: Any) -> int:
        """How many proofs of ``key`` the prover groups into one :meth:`msm_start_combined` call
        (``distprove.msm.group-proofs`` null: the backend's choice). Default 1: a backend whose
        grouped MSM is the per-proof one gains nothing from groups and loses the per-proof overlap."""
        return 1

    @abstractmethod
    def ntt(self, values: np.ndarray, inverse: bool = False) -> np.ndarray:
        """NTT of (n, 8) uint32 standard-form Fr values, natural order (inverse scales by 1/n)."""

    def to_host(self, vector: Any) -> np.ndarray:
        """A backend vector (an Evals member or H scalars) as (n, 8) uint32 standard form.

        Default: for vectors that are already (n, 8) uint32 arrays on the host.
        """
        return np.ascontiguousarray(vector, dtype="<u4").reshape(-1, 8)
