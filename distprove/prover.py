"""One Groth16 proof, end to end: witness + key -> proof (snarkjs §7 pipeline)."""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar, Union

import numpy as np

from . import bn254, config
from .backends.base import Backend, LoadedWitness, MsmJob, resolve_constant_work
from .backends.select import get_backend
from .groth16 import MSM_NAMES, msm_group
from .keystore import KeyStore, ZkeyKey, open_key
from .memplan import KeyDims, WorkerPlan, plan_memory
from .stages.assemble import assemble_windows, random_blinding
from .stages.msm import combine, live_fraction, num_windows
from .stages.stream import chunked_msm_start

log = logging.getLogger(__name__)

KeyLike = Union[str, os.PathLike, KeyStore, ZkeyKey]
WitnessLike = Union[str, os.PathLike, np.ndarray, Any]


@dataclass
class Proof:
    """A Groth16 proof with its public signals; affine points as Python ints (see bn254)."""

    pi_a: bn254.Affine
    pi_b: bn254.Affine
    pi_c: bn254.Affine
    public: list[int]
    timings: dict[str, float] = field(default_factory=dict, repr=False, compare=False)

    @property
    def points(self) -> tuple[bn254.Affine, bn254.Affine, bn254.Affine]:
        """(pi_a, pi_b, pi_c), as the verifier takes them."""
        return self.pi_a, self.pi_b, self.pi_c

    def to_json(self) -> dict:
        """proof.json content in snarkjs's layout."""
        from .formats.jsonio import proof_to_json

        return proof_to_json(self.pi_a, self.pi_b, self.pi_c)

    def public_json(self) -> list[str]:
        """public.json content: the public signals as decimal strings."""
        from .formats.jsonio import public_to_json

        return public_to_json(self.public)

    def write(self, proof_path: str | os.PathLike, public_path: str | os.PathLike) -> None:
        """Write proof.json and public.json atomically (each appears whole or not at all)."""
        from .formats.jsonio import write_json_atomic

        write_json_atomic(public_path, self.public_json())
        write_json_atomic(proof_path, self.to_json())


def load_witness(witness: WitnessLike, key: Any) -> tuple[np.ndarray, str]:
    """Return the witness as an (nVars, 8) uint32 standard-form array, checked against the key."""
    from .formats.wtns import count_error, read_wtns

    if isinstance(witness, (str, os.PathLike)):
        name = os.fspath(witness)
        values = read_wtns(name).values
    elif isinstance(witness, np.ndarray):
        name, values = "<witness>", witness
    else:
        name, values = getattr(witness, "path", "<witness>"), witness.values
    if values.shape != (key.n_vars, 8):
        raise count_error(name, values.shape[0], key)
    return values, name


def msm(
    backend: Backend, key: Any, which: str, scalars: Any, n: int, *, constant_work: bool | None = None
) -> bn254.Affine:
    """One whole MSM of ``n`` points through :func:`start_msms` and the host Horner combine.

    ``constant_work``: see :meth:`Backend.msm_windows` (None = the config default).
    """
    c = backend.window_width(n, msm_group(which))
    sums = start_msms(backend, key, lambda _: scalars, {which: c}, names=(which,), constant_work=constant_work)()
    return combine(msm_group(which), sums[which], c)


OVERLAP_ORDER = ("B2", "H", "A", "B1", "C")
"""Start order of the five MSMs when they overlap: the G2 MSM, the longest, first on its own stream."""
WITNESS_ORDER = ("B2", "A", "B1", "C")
"""Start order of the witness MSMs when H is computed beside them (``prove(overlap_h=True)``)."""


def start_msms(
    backend: Backend,
    key: Any,
    scalars: Callable[[str], Any],
    widths: dict[str, int],
    *,
    names: tuple[str, ...] = OVERLAP_ORDER,
    constant_work: bool | None = None,
    plan: WorkerPlan | None = None,
) -> Callable[[], dict[str, dict[int, bn254.Affine]]]:
    """Start all windows of the MSMs ``names`` (default: the five, in :data:`OVERLAP_ORDER`;
    ``scalars(which)``: that MSM's scalars; ``widths``: its window width) and return a function
    that waits for every one's window sums {which: {w: S_w}} (:meth:`Backend.msm_start_all`: the
    GPU recovers there from running out of memory). ``plan``: a memory plan
    (:func:`memory_plan`) whose chunked MSMs run chunk by chunk (:func:`start_chunked`)."""
    jobs = {which: MsmJob(scalars(which), widths[which], 0, num_windows(widths[which])) for which in names}
    chunked = _chunked_names(plan, names)
    if not chunked:
        wait = backend.msm_start_all(key, jobs, constant_work=constant_work)
        return lambda: {which: dict(enumerate(sums)) for which, sums in wait().items()}
    resident = {which: job for which, job in jobs.items() if which not in chunked}
    wait = backend.msm_start_all(key, resident, constant_work=constant_work) if resident else dict
    streams = start_chunked(backend, key, plan, [jobs], chunked, constant_work)  # type: ignore[arg-type]

    def finish() -> dict[str, dict[int, bn254.Affine]]:
        sums = {**wait(), **streams()[0]}
        return {which: dict(enumerate(sums[which])) for which in MSM_NAMES if which in sums}

    return finish


def _chunked_names(plan: WorkerPlan | None, names: Iterable[str]) -> list[str]:
    """The MSMs of ``names`` that ``plan`` runs chunk by chunk (none without a plan)."""
    return [] if plan is None else [which for which in names if plan.chunked(which)]


def start_chunked(
    be: Backend,
    key: Any,
    plan: WorkerPlan,
    jobs: Sequence[Mapping[str, MsmJob]],
    names: Sequence[str],
    constant_work: bool | None = False,
) -> Callable[[], list[dict[str, list[bn254.Affine]]]]:
    """Start the MSMs ``names`` of each proof's ``jobs[p]`` chunk by chunk of ``plan.chunk``
    points (:func:`distprove.stages.stream.chunked_msm_start`: a streamed MSM's bases read from
    the key's host array, a resident one's sliced), all proofs' in one pass over the chunks, and
    return the waiter of per proof {which: window sums}. Every proof's job of an MSM must have the
    same width and windows (a group's do: one width a group)."""
    waits = {}
    for which in names:
        ours = [proof[which] for proof in jobs]
        c, lo, hi = ours[0].c, ours[0].lo, ours[0].hi
        if any((job.c, job.lo, job.hi) != (c, lo, hi) for job in ours):
            raise ValueError(f"MSM {which}'s jobs differ in width or windows: one chunked pass takes one shape")
        waits[which] = chunked_msm_start(be, key, which, [job.scalars for job in ours], c, lo, hi, plan.chunk,
                                         streamed=plan.streams(which), constant_work=constant_work)

    def wait() -> list[dict[str, list[bn254.Affine]]]:
        sums = {which: w() for which, w in waits.items()}
        return [{which: sums[which][p] for which in names} for p in range(len(jobs))]

    return wait


_PLANS: dict[tuple, WorkerPlan] = {}
"""Memory plans by (key, budget, group wanted, groups in flight, backend and its plan settings):
pure arithmetic, kept."""


def memory_plan(be: Backend, key: Any) -> WorkerPlan | None:
    """The device memory plan (:func:`distprove.memplan.plan_memory`) of ``key`` on this worker
    under the backend's budget (:meth:`Backend.memory_budget`: ``distprove.gpu.memory-limit`` on a
    GPU, ``distprove.planner.worker-memory`` on the CPU), for groups of up to
    ``distprove.msm.group-proofs`` or the backend's choice and ``distprove.msm.groups-in-flight``
    groups; None without a budget: every stage on its unbounded path. MemoryBudgetError when the
    budget does not hold the key's smallest plan."""
    budget = be.memory_budget()
    if budget is None:
        return None
    want = _wanted_group(be, key)
    in_flight = config.groups_in_flight()
    cache_key = (key.content_hash, budget, want, in_flight, be.name, be.memory_overhead, be.min_chunk)
    plan = _PLANS.get(cache_key)
    if plan is None:
        if len(_PLANS) > 64:
            _PLANS.clear()
        plan = _PLANS[cache_key] = plan_memory(KeyDims.of(key), budget, want, in_flight=in_flight,
                                               overhead=be.memory_overhead, min_chunk=be.min_chunk)
        log.info("key %s under a budget of %d bytes: %s", key.content_hash[:12], budget, plan.describe())
    return plan


@dataclass
class WindowSums:
    """What a proof's MSMs produced, before the assembly: its public signals, every MSM's window
    sums {which: {w: S_w}} and widths, and the stage seconds so far."""

    public: list[int]
    sums: dict[str, dict[int, bn254.Affine]]
    widths: dict[str, int]
    timings: dict[str, float]


@dataclass
class Prefetched:
    """A witness file already read and checked (:func:`prefetch_witness`), loaded into the backend
    or left for its group's one load (``loaded.vector`` None: :meth:`Backend.read_witness_file`),
    the seconds that took and the file's name (its errors name it)."""

    loaded: LoadedWitness
    seconds: float
    name: str = "<witness>"


def prefetch_witness(k: KeyStore | ZkeyKey, witness: WitnessLike, be: Backend) -> WitnessLike | Prefetched:
    """Read a witness file ahead of its proof (:meth:`Backend.read_witness_file`: a GPU reads a
    small witness into host memory, for its group's one upload, and uploads a large one, queued on
    the current stream beside MSMs running on their own streams); other witnesses are returned as
    they are. A bad witness file raises its FormatError here, or (a value >= r of a witness left
    unloaded) when its group is loaded."""
    if not isinstance(witness, (str, os.PathLike)):
        return witness
    t0 = time.perf_counter()
    loaded = be.read_witness_file(k, witness)
    return Prefetched(loaded, time.perf_counter() - t0, os.fspath(witness))


def _load(k: KeyStore | ZkeyKey, witness: WitnessLike, be: Backend) -> LoadedWitness:
    """A witness checked against the key and loaded into the backend: a file by the backend's
    own reader (a GPU's range check on the device), anything else through :func:`load_witness`."""
    if isinstance(witness, (str, os.PathLike)):
        return be.load_witness_file(k, witness)
    values, _ = load_witness(witness, k)
    return LoadedWitness(values, be.load_witness(k, values))


def witness_widths(be: Backend, key: Any, live: float = 1.0, constant_work: bool | None = None) -> dict[str, int]:
    """The backend's window width for each of the five MSMs of a proof whose witness has a
    fraction ``live`` of scalars other than 0 and 1 (:func:`distprove.stages.msm.live_fraction`):
    A, B1, B2 and C over the witness, H over the (dense) H scalars. ``live`` counts only in the
    default MSM mode (constant-work puts every scalar into a bucket; ``constant_work`` None: the
    config default) and with the config key ``distprove.msm.live-widths`` on (the default)."""
    return msm_widths(be, {which: key.domain_size if which == "H" else key.n_vars for which in MSM_NAMES}, live,
                      constant_work)


def msm_widths(be: Backend, lengths: Mapping[str, int], live: float = 1.0,
               constant_work: bool | None = None) -> dict[str, int]:
    """The backend's window width for MSMs of ``lengths`` ({which: number of bases}) whose
    witness has a fraction ``live`` of scalars other than 0 and 1 (H's dense scalars: 1), under
    the rules of :func:`witness_widths`."""
    if resolve_constant_work(constant_work) or not config.get_bool("msm.live-widths"):
        live = 1.0
    return {which: be.window_width(max(1, n), msm_group(which), 1.0 if which == "H" else live)
            for which, n in lengths.items()}


@dataclass
class Gathered:
    """A witness loaded into the backend and gathered (:func:`load_and_gather`): the backend's
    witness vector, the public signals, the share of scalars other than 0 and 1 (window widths,
    :func:`witness_widths`), the evaluations a, b, c (None once :func:`h_scalars` took them) and
    the stage seconds so far."""

    witness: Any
    public: list[int]
    live: float
    evals: Any
    timings: dict[str, float]


def _lap(be: Backend, timings: dict[str, float], stage: str, start: float) -> float:
    """Record ``stage``'s seconds since ``start`` once the backend's queued work is done; returns now."""
    be.synchronize()
    now = time.perf_counter()
    timings[stage] = now - start
    return now


def load_and_gather(k: KeyStore | ZkeyKey, witness: WitnessLike, be: Backend) -> Gathered:
    """The first stages of a proof: read, check and load the witness (unless it comes
    :class:`Prefetched`: then its seconds are the prefetch's), take its public signals and live
    share, and gather the evaluations a, b, c. The witness's errors raise here."""
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    if isinstance(witness, Prefetched):
        (values, w), t = witness.loaded, t0
        timings["witness"] = witness.seconds
        if w is None:  # read but not loaded: loaded and checked now, a group of one
            stack, verdicts = be.load_witness_group(k, [witness.loaded], [witness.name])
            if (error := verdicts()[0]) is not None:
                raise error
            w = stack[0]
            t = _lap(be, timings, "witness", t0)
            timings["witness"] += witness.seconds
    else:
        values, w = _load(k, witness, be)
        t = _lap(be, timings, "witness", t0)
    public = bn254.ints_from_limbs(values[1 : 1 + k.n_public])  # values checked < r by the load
    live = live_fraction(values)
    del values
    evals = be.gather(k, w)
    _lap(be, timings, "gather", t)
    return Gathered(w, public, live, evals, timings)


def h_scalars(k: KeyStore | ZkeyKey, g: Gathered, be: Backend, *, timed: bool = True) -> Any:
    """The H scalars from the gathered evaluations, which are dropped (three domain-sized vectors
    the MSMs do not need: device memory). ``timed``: wait for them and record ``ntt`` seconds
    (else they stay queued beside what runs, timed with it)."""
    t = time.perf_counter()
    hs = be.h_scalars(k, g.evals)
    g.evals = None
    if timed:
        _lap(be, g.timings, "ntt", t)
    return hs


def start_window_sums(
    k: KeyStore | ZkeyKey,
    witness: WitnessLike,
    be: Backend,
    *,
    constant_work: bool | None = False,
    profile: bool = False,
    overlap_h: bool = True,
    widths: Mapping[str, int] | None = None,
) -> Callable[[], WindowSums]:
    """Every stage of :func:`prove` up to the assembly, on an opened key and a backend (the
    arguments mean what they mean there; ``widths``: each MSM's window width, by default the
    backend's choice for this witness, :func:`witness_widths`), in two steps: load the witness
    and queue the rest (a GPU returns as soon as its MSMs are queued), then the returned
    function waits for the sums. The witness's errors raise here, before anything is queued
    (unless it comes :class:`Prefetched`: then its stage seconds are the prefetch's). With
    ``profile`` (or without ``overlap_h``) everything runs here and the function only hands the
    result over."""
    plan = memory_plan(be, k)
    g = load_and_gather(k, witness, be)
    timings, w, t = g.timings, g.witness, time.perf_counter()
    widths = dict(witness_widths(be, k, g.live, constant_work) if widths is None else widths)
    if overlap_h and not profile:
        witness_msms = start_msms(be, k, lambda _: w, widths, names=WITNESS_ORDER, constant_work=constant_work,
                                  plan=plan)
        hs = h_scalars(k, g, be, timed=False)
        h_msm = start_msms(be, k, lambda _: hs, widths, names=("H",), constant_work=constant_work, plan=plan)

        def finish() -> WindowSums:
            sums = {**witness_msms(), **h_msm()}
            _lap(be, timings, "msm", t)
            return WindowSums(g.public, sums, widths, timings)

        return finish
    hs = h_scalars(k, g, be)
    t = time.perf_counter()

    def scalars(which: str) -> Any:
        return hs if which == "H" else w

    if profile:
        sums = {}
        for which in MSM_NAMES:
            sums.update(start_msms(be, k, scalars, widths, names=(which,), constant_work=constant_work, plan=plan)())
            t = _lap(be, timings, f"msm_{which}", t)
    else:
        sums = start_msms(be, k, scalars, widths, constant_work=constant_work, plan=plan)()
        _lap(be, timings, "msm", t)
    done = WindowSums(g.public, sums, widths, timings)
    return lambda: done


def assemble(
    points: Mapping[str, bn254.Affine],
    sums: Mapping[str, Mapping[int, bn254.Affine]],
    widths: Mapping[str, int],
    public: list[int],
    blinding: tuple[int, int] | None = None,
) -> Proof:
    """The proof from its MSMs' window sums {which: {w: S_w}} and widths: the Horner combines
    and the blinding (fresh r, s unless ``blinding``). ``points``: the key's alpha1, beta1,
    beta2, delta1, delta2."""
    r, s = blinding if blinding is not None else random_blinding()
    pi_a, pi_b, pi_c = assemble_windows(points, sums, widths, r, s)
    return Proof(pi_a, pi_b, pi_c, public)


T = TypeVar("T")
R = TypeVar("R")
U = TypeVar("U")
_END = object()

def _wanted_group(be: Backend, key: Any) -> int:
    """``distprove.msm.group-proofs``, else the backend's choice (:meth:`Backend.proofs_per_group`)."""
    configured = config.group_proofs()
    return configured if configured is not None else max(1, be.proofs_per_group(key))


def group_size(be: Backend, key: Any, constant_work: bool | None = False) -> int:
    """Proofs of ``key`` proved as one group: ``distprove.msm.group-proofs``, else the backend's
    choice (:meth:`Backend.proofs_per_group`), at most the memory plan's group (:func:`memory_plan`);
    1 in constant-work mode (``constant_work`` None: the config default), whose MSMs run proof by proof."""
    if resolve_constant_work(constant_work):
        return 1
    size = _wanted_group(be, key)
    plan = memory_plan(be, key)
    return size if plan is None else min(size, plan.max_group)


@dataclass
class MsmPoints:
    """What a proof of a group produced before the assembly (:func:`start_group`): its public
    signals, its five MSMs' results {which: point} and the stage seconds so far."""

    public: list[int]
    points: dict[str, bn254.Affine]
    timings: dict[str, float]


def _read(k: KeyStore | ZkeyKey, witness: WitnessLike | Prefetched, be: Backend) -> tuple[LoadedWitness, str, float]:
    """A group's witness read and checked on the host (:meth:`Backend.read_witness_file` for a
    file; a :class:`Prefetched` one as it is), its name and the seconds its read took."""
    if isinstance(witness, Prefetched):
        return witness.loaded, witness.name, witness.seconds
    t = time.perf_counter()
    if isinstance(witness, (str, os.PathLike)):
        loaded, name = be.read_witness_file(k, witness), os.fspath(witness)
    else:
        values, name = load_witness(witness, k)
        loaded = LoadedWitness(values, None)
    return loaded, name, time.perf_counter() - t


def start_group(
    k: KeyStore | ZkeyKey,
    witnesses: Sequence[WitnessLike | Prefetched | Exception],
    be: Backend,
    *,
    constant_work: bool | None = False,
    widths: Mapping[str, int] | None = None,
) -> Callable[[], list[MsmPoints | Exception]]:
    """Every stage of a group of proofs up to the assembly, queued as one pass: the group's
    witnesses (read unless they come :class:`Prefetched`) loaded as one stack
    (:meth:`Backend.load_witness_group`: on a GPU one upload and one range check), gathered
    (:meth:`Backend.gather_group`) and their H scalars computed (:meth:`Backend.h_scalars_group`)
    with one wait for the group (:meth:`Backend.settle`) and the witnesses' verdicts, then the
    group's five MSMs started as one :meth:`Backend.msm_start_combined` call; the returned
    function waits for them.

    A witness that fails (its exception, or an exception passed in its place: a failed prefetch)
    is that proof's result, and the others go on without it. ``widths``: each MSM's window width,
    by default the backend's choice for the group's mean live share (:func:`witness_widths`).
    Stage seconds per proof: witness its own read plus its share of the group's load, gather and
    ntt its share of the group's (times between :meth:`Backend.mark` marks: on a GPU the device's
    time, on the CPU the host's); msm its share of the group's MSMs.
    """
    results: list[Gathered | Exception | None] = [None] * len(witnesses)
    loaded: list[LoadedWitness] = []
    names: list[str] = []
    reads: list[float] = []
    slots: list[int] = []
    for i, witness in enumerate(witnesses):
        if isinstance(witness, Exception):
            results[i] = witness
            continue
        try:
            one, name, seconds = _read(k, witness, be)
        except Exception as exc:
            results[i] = exc
            continue
        loaded.append(one)
        names.append(name)
        reads.append(seconds)
        slots.append(i)
    if not loaded:
        return lambda: list(results)  # type: ignore[arg-type]
    marks = [be.mark()]
    stack, verdicts = be.load_witness_group(k, loaded, names)
    lives = be.live_fractions_group(stack, loaded)
    marks.append(be.mark())
    evals = be.gather_group(k, stack)
    marks.append(be.mark())
    hs = be.h_scalars_group(k, evals)
    del evals  # three domain-sized vectors a proof the MSMs do not need: device memory
    marks.append(be.mark())
    be.settle()  # the group's one wait
    errors, live = verdicts(), lives()
    share = [be.seconds_between(a, b) / len(loaded) for a, b in zip(marks, marks[1:])]
    scalars: list[tuple[Any, Any]] = []
    for j, (i, one) in enumerate(zip(slots, loaded)):
        if errors[j] is not None:
            results[i] = errors[j]
            continue
        timings = {"witness": reads[j] + share[0], "gather": share[1], "ntt": share[2]}
        public = bn254.ints_from_limbs(one.values[1 : 1 + k.n_public])  # values checked < r by the load
        results[i] = Gathered(stack[j], public, live[j], None, timings)
        scalars.append((stack[j], hs[j]))
    del loaded, stack, hs
    ok = [g for g in results if isinstance(g, Gathered)]
    if not ok:
        return lambda: list(results)  # type: ignore[arg-type]
    t = time.perf_counter()
    if widths is None:
        widths = witness_widths(be, k, sum(g.live for g in ok) / len(ok), constant_work)
    jobs = [{which: MsmJob(hs if which == "H" else w, widths[which], 0, num_windows(widths[which]))
             for which in MSM_NAMES} for w, hs in scalars]
    wait = _start_combined(be, k, jobs, memory_plan(be, k), constant_work)
    del scalars, jobs  # the backend holds what its queued MSMs read

    def finish() -> list[MsmPoints | Exception]:
        points = iter(wait())  # this group's MSMs only: a later group's may be queued behind them
        share = (time.perf_counter() - t) / len(ok)
        out: list[MsmPoints | Exception] = []
        for g in results:
            if not isinstance(g, Gathered):
                out.append(g)  # type: ignore[arg-type]
                continue
            g.timings["msm"] = share
            out.append(MsmPoints(g.public, next(points), g.timings))
        return out

    return finish


def _start_combined(be: Backend, k: Any, jobs: Sequence[Mapping[str, MsmJob]], plan: WorkerPlan | None,
                    constant_work: bool | None) -> Callable[[], list[dict[str, bn254.Affine]]]:
    """A group's whole MSMs started, each reduced to its point: :meth:`Backend.msm_start_combined`,
    except the MSMs ``plan`` runs chunk by chunk (:func:`start_chunked`, combined on the host)."""
    chunked = _chunked_names(plan, MSM_NAMES)
    if not chunked:
        return be.msm_start_combined(k, jobs, constant_work=constant_work)
    resident = [{which: job for which, job in proof.items() if which not in chunked} for proof in jobs]
    wait = be.msm_start_combined(k, resident, constant_work=constant_work) if resident[0] else None
    streams = start_chunked(be, k, plan, jobs, chunked, constant_work)  # type: ignore[arg-type]

    def finish() -> list[dict[str, bn254.Affine]]:
        points = wait() if wait is not None else [{} for _ in jobs]
        for proof, job, sums in zip(points, jobs, streams()):
            for which, windows in sums.items():
                proof[which] = combine(msm_group(which), dict(enumerate(windows)), job[which].c)
        return [{which: proof[which] for which in MSM_NAMES if which in proof} for proof in points]

    return finish


def assembled_group(
    k: KeyStore | ZkeyKey,
    be: Backend,
    results: Sequence[MsmPoints],
    starts: Sequence[float],
    blindings: Sequence[tuple[int, int] | None],
) -> list[Proof]:
    """A group's proofs from their MSM results (:func:`start_group`) in one
    :meth:`Backend.assemble_group` call (on a GPU one device step), each with its blinding (fresh
    r, s from :mod:`secrets` where ``blindings`` has None) and its timings completed with assemble
    (its share of the call's seconds) and total (from its entry in ``starts``)."""
    if not results:
        return []
    t = time.perf_counter()
    drawn = [b if b is not None else random_blinding() for b in blindings]
    points = be.assemble_group(k, [result.points for result in results], drawn)
    now = time.perf_counter()
    proofs = []
    for result, t0, (pi_a, pi_b, pi_c) in zip(results, starts, points):
        result.timings["assemble"] = (now - t) / len(results)
        result.timings["total"] = now - t0
        proofs.append(Proof(pi_a, pi_b, pi_c, result.public, result.timings))
    return proofs


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of ``size`` items (the last may be shorter)."""
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def pipelined_groups(
    items: Iterable[T],
    size: int,
    prefetch: Callable[[T], Any],
    start: Callable[[list[Any]], Callable[[], list[Any]]],
    finish_group: Callable[[list[T], list[Any]], list[U]],
    failed: Callable[[T, Exception], U],
    depth: int | None = None,
) -> Iterator[U]:
    """:func:`pipelined` over groups of ``size`` items (``depth`` groups started and not yet
    waited for; None: ``distprove.msm.groups-in-flight``, by default 2: the next group's upload,
    gather, H and MSMs are queued before the host waits for the group before, so the device does
    not idle through the host's part of a group), yielding per item in order: ``prefetch(item)``
    for each item of a group (an exception it raises is passed to ``start`` in its place) while
    the groups before run on the device, ``start(prefetched)`` queues a group and returns the
    waiter of its per-item results, and ``finish_group(group, results)`` (results that are
    exceptions included; one output per item, in order) runs while later groups' device work
    proceeds. A group whose start, wait or ``finish_group`` raises fails each of its items
    (``failed(item, exc)``)."""

    def fetch(group: list[T]) -> list[Any]:
        out: list[Any] = []
        for item in group:
            try:
                out.append(prefetch(item))
            except Exception as exc:
                out.append(exc)
        return out

    def all_failed(group: list[T], exc: Exception) -> list[U]:
        return [failed(item, exc) for item in group]

    if depth is None:
        depth = config.groups_in_flight()
    for outs in pipelined(_chunks(items, size), start, finish_group, all_failed, fetch, depth):
        yield from outs


def pipelined(
    items: Iterable[T],
    start: Callable[[Any], Callable[[], R]],
    finish: Callable[[T, R], U],
    failed: Callable[[T, Exception], U],
    prefetch: Callable[[T], Any] | None = None,
    depth: int = 1,
) -> Iterator[U]:
    """Run items through a device and the host with overlap, yielding in item order.

    ``start(item)`` queues an item's device work and returns its waiter; ``finish(item, result)``
    is the host work on what the waiter returned. With ``depth`` 1, item i + 1 starts once item
    i's waiter has returned (one item's device buffers and scratch at a time), and item i's
    finish runs while item i + 1's device work proceeds. With ``depth`` 2, item i + 1 starts
    before item i's waiter is called, so the device holds the next item's work while the host
    waits for, finishes and hands out the one before (two items' buffers at a time): item i's
    waiter runs after item i + 1's start, its finish after item i + 2's start. With ``prefetch``,
    ``start`` gets ``prefetch(item)`` instead of the item, and item i + 1's prefetch runs after
    item i's start and the finish (and the consumer's handling) of the item finished there,
    before the next waiter (a witness read and uploaded beside the device work queued before).
    An exception in any step becomes ``failed(item, exc)`` (which may raise it again) and the
    next item goes on.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1 (got {depth})")

    def finished(item: T, result: R) -> U:
        try:
            return finish(item, result)
        except Exception as exc:
            return failed(item, exc)

    def fetched(item: T) -> tuple[T, Any, Exception | None]:
        if prefetch is None:
            return item, item, None
        try:
            return item, prefetch(item), None
        except Exception as exc:
            return item, None, exc

    def waited(item: T, wait: Callable[[], R] | None, error: Exception | None) -> tuple[bool, Any]:
        """(True, (item, result)) from the item's waiter, or (False, its failed() output)."""
        if wait is None:
            return False, failed(item, error)  # type: ignore[arg-type]
        try:
            return True, (item, wait())
        except Exception as exc:
            return False, failed(item, exc)

    source = iter(items)
    first = next(source, _END)
    upcoming = None if first is _END else fetched(first)
    started: deque[tuple[T, Callable[[], R] | None, Exception | None]] = deque()
    pending: tuple[T, R] | None = None
    while upcoming is not None:
        item, ready, error = upcoming
        wait: Callable[[], R] | None = None
        if error is None:
            try:
                wait = start(ready)
            except Exception as exc:
                error = exc
            ready = None  # start holds what it needs; a failed start's buffers go now
        started.append((item, wait, error))
        wait = None  # held in started only: its device buffers go once it is waited for
        if pending is not None:
            yield finished(*pending)  # the host's part of an earlier item, beside this one's device work
            pending = None
        following = next(source, _END)
        upcoming = None if following is _END else fetched(following)  # beside the device work queued
        if len(started) == depth:
            ok, out = waited(*started.popleft())
            if ok:
                pending = out
            else:
                yield out
    if pending is not None:
        yield finished(*pending)
    while started:
        ok, out = waited(*started.popleft())
        yield finished(*out) if ok else out


def prove(
    key: KeyLike,
    witness: WitnessLike,
    backend: str | Backend = "auto",
    *,
    blinding: tuple[int, int] | None = None,
    constant_work: bool | None = False,
    profile: bool = False,
    overlap_h: bool = True,
) -> Proof:
    """Prove one witness.

    ``key`` is a key store path, a ``.zkey`` path or an opened key; ``witness`` a ``.wtns`` path,
    a parsed witness or an (nVars, 8) uint32 array. ``blinding`` = (r, s) is for tests only; by
    default both come from :mod:`secrets`. ``constant_work``: run the five MSMs in the opt-in
    constant-work mode (docs/CONSTANT_WORK.md; same proof); None = the config key
    ``distprove.msm.constant-work``.

    ``overlap_h``: start the four witness MSMs before computing H, so that on a GPU the NTTs
    run beside them, then the H MSM; otherwise H first, then the five MSMs together.

    ``Proof.timings`` holds seconds per stage: witness (read, check and load into the backend:
    on a GPU the upload and the device range check), gather, ntt (not with ``overlap_h``, where
    msm includes it), msm (the five MSMs, which a GPU overlaps: G2 on its own stream), assemble,
    total. ``profile=True`` runs H, then the MSMs one at a time, and times each (msm_A ...
    msm_H): a breakdown, at some cost in latency.
    """
    t0 = time.perf_counter()
    k, be = _opened(key, backend)
    ws = start_window_sums(k, witness, be, constant_work=constant_work, profile=profile, overlap_h=overlap_h)()
    proof = _assembled(k, ws, t0, blinding)
    log.debug("proved with %s backend in %.3f s", be.name, proof.timings["total"])
    return proof


def _opened(key: KeyLike, backend: str | Backend) -> tuple[KeyStore | ZkeyKey, Backend]:
    """The key opened (unless it is) and the backend made (unless it is one)."""
    be = get_backend(backend) if isinstance(backend, str) else backend
    k = key if isinstance(key, (KeyStore, ZkeyKey)) else open_key(key, device="gpu" if be.name == "gpu" else "cpu")
    return k, be


def _assembled(k: KeyStore | ZkeyKey, ws: WindowSums, t0: float, blinding: tuple[int, int] | None = None) -> Proof:
    """The proof from its window sums (Horner combines and blinding; fresh r, s unless
    ``blinding``), its timings completed with assemble and total (from ``t0``)."""
    t = time.perf_counter()
    proof = assemble(k.points, ws.sums, ws.widths, ws.public, blinding)
    ws.timings["assemble"] = time.perf_counter() - t
    ws.timings["total"] = time.perf_counter() - t0
    proof.timings = ws.timings
    return proof


def prove_many(
    key: KeyLike,
    witnesses: Iterable[WitnessLike],
    backend: str | Backend = "auto",
    *,
    constant_work: bool | None = False,
    group: int | None = None,
    blindings: Sequence[tuple[int, int]] | None = None,
) -> Iterator[Proof]:
    """Prove several witnesses of one key, yielding each :class:`Proof` in order. A bad witness
    raises, as in :func:`prove`, when its turn comes (after the proofs before it).

    In groups of ``group`` proofs (default :func:`group_size`: ``distprove.msm.group-proofs`` or
    the backend's choice): each proof's witness, gather and H in turn, then the group's MSMs as
    one grouped call (:func:`start_group`), and the group's assembly (:func:`assembled_group`: on
    a GPU one device step) while the next group's MSMs run (:func:`pipelined_groups`); the next
    group's witness files are read and uploaded beside the MSMs before. With groups of one (the
    CPU's choice, constant-work mode): :func:`prove`'s pipeline proof by proof, each proof's
    assembly beside the next one's MSMs (:func:`pipelined`). ``blindings``: (r, s) for each
    witness in order, for tests only.
    With a memory budget (:func:`memory_plan`) the groups hold at most the plan's proofs, at most
    its groups are in flight, and the MSMs it runs in chunks go chunk by chunk (streamed bases
    from the key's host arrays).
    ``Proof.timings`` as in :func:`prove`; ``msm`` then includes the previous proof's (group's)
    assembly, and in a group it is the proof's share of the group's MSM seconds.
    """
    k, be = _opened(key, backend)
    size = group if group is not None else group_size(be, k, constant_work)
    if size < 1:
        raise ValueError(f"group size must be at least 1 (got {size})")
    plan = memory_plan(be, k)
    if plan is not None:
        size = min(size, plan.max_group)
    if size > 1 and resolve_constant_work(constant_work):
        size = 1

    def blinding(i: int) -> tuple[int, int] | None:
        return None if blindings is None else blindings[i]

    def prefetch(item: tuple[int, WitnessLike]) -> tuple[float, WitnessLike | Prefetched]:
        t0 = time.perf_counter()
        return t0, prefetch_witness(k, item[1], be)

    t_start: dict[int, float] = {}

    def failed(item: tuple[int, WitnessLike], exc: Exception) -> Exception:
        t_start.pop(item[0], None)
        return exc  # raised when its turn comes: the proofs before it are yielded first

    if size == 1:
        def start(ready: tuple[float, WitnessLike | Prefetched]) -> Callable[[], tuple[float, WindowSums]]:
            t0, witness = ready
            wait = start_window_sums(k, witness, be, constant_work=constant_work)
            return lambda: (t0, wait())

        def finish(item: tuple[int, WitnessLike], started: tuple[float, WindowSums]) -> Proof:
            t0, ws = started
            return _assembled(k, ws, t0, blinding(item[0]))

        results: Iterator[Proof | Exception] = pipelined(enumerate(witnesses), start, finish, failed, prefetch)
    else:
        def start_many(ready: list[Any]) -> Callable[[], list[Any]]:
            return start_group(k, [r if isinstance(r, Exception) else r[1] for r in ready], be,
                               constant_work=constant_work)

        def fetch(item: tuple[int, WitnessLike]) -> tuple[float, WitnessLike | Prefetched]:
            ready = prefetch(item)
            t_start[item[0]] = ready[0]
            return ready

        def finish_group(group: list[tuple[int, WitnessLike]], results: list[Any]) -> list[Proof | Exception]:
            ok = [(item, result) for item, result in zip(group, results) if not isinstance(result, Exception)]
            proofs = iter(assembled_group(k, be, [result for _, result in ok], [t_start.pop(item[0]) for item, _ in ok],
                                          [blinding(item[0]) for item, _ in ok]))
            return [failed(item, result) if isinstance(result, Exception) else next(proofs)
                    for item, result in zip(group, results)]

        depth = config.groups_in_flight() if plan is None else min(config.groups_in_flight(), plan.in_flight)
        results = pipelined_groups(enumerate(witnesses), size, fetch, start_many, finish_group, failed, depth)
    return _raising(results)


def _raising(results: Iterator[Proof | Exception]) -> Iterator[Proof]:
    """The proofs of ``results``, raising an exception where it comes."""
    for result in results:
        if isinstance(result, Exception):
            raise result
        yield result
