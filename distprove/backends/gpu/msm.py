"""GPU Pippenger window sums: the host side of ``distprove/kernels/msm.cu``.

:func:`msm_windows` computes the window sums S_lo .. S_{hi-1} of DESIGN.md on the device (digits,
counting sort into buckets, batch-affine pair rounds that halve every bucket where they pay
(msm_affine.cu, :data:`AFFINE_ROUNDS`; the device skips them on sparse scalars), segmented
accumulation, per-window reduction) and reads back one XYZZ point per window plus the sum of the
scalar-1 bases, which it adds to S_0. The Horner combine stays on the host
(:func:`distprove.stages.msm.combine`). With ``constant_work=True`` the
same sums come from the kernels of ``msm_cw.cu`` (docs/CONSTANT_WORK.md): every scalar in every
window, zero digits to dummy rows the reduction skips, no ones path, complete formulas.
:func:`msm_merged` is the MSM over a :func:`precompute_multiples` table (msm_merged.cu): every
window's digits in one set of buckets, one reduction, its sum.

Scratch memory is kept between calls in a :class:`MsmScratch` (one per process by default): the
buffers are reused, never trusted to hold zeros; the kernels clear what they read. Its side
stream runs the bookkeeping that depends on the sort alone (the pair rounds' job lists, the ones)
beside the arithmetic.
"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import numpy as np

from distprove import bn254, config, curve
from distprove.backends.gpu.compile import get_module
from distprove.backends.gpu.witness import pinned_bytes
from distprove.bn254 import Affine, Group
from distprove.errors import FormatError
from distprove.stages.msm import MAX_WINDOW, MIN_WINDOW, num_windows

if TYPE_CHECKING:  # pragma: no cover
    import cupy

SLICE_LEN: dict[str, int] = {"G1": 128, "G2": 128}
"""Target entries per thread in the segmented accumulation (uniform work per thread), per group;
:func:`slice_length` fits it to whole waves of the device. The launch-parameter sweep with the
fitting and G2's register bound put G2 at 128 (2-5% faster than 32 at 2^20-2^22 on an H200: a
quarter of the spills to fold); G1 is within 1-2% from 32 to 128."""
SLICE_MIN = 8
"""Fewest entries per accumulation thread, whatever the target (:func:`slice_length` keeps to
[target / 2, 3 target / 2] above it)."""
FOLD_LEN = 32
"""Most spill slots per thread in a fold level (>= 4, so that every level shrinks the spill array)."""
FOLD_MIN = 8
"""Fewest spill slots per fold thread: a level with fewer slots than the device holds threads takes
shorter groups (:func:`fold_length`), trading more levels for a shorter serial chain."""
REDUCE_SEG = 16
"""Buckets per thread in the window reduction's first level (a power of two)."""
REDUCE_THREADS = 128
"""Block size of the reduction's first level."""
REDUCE_GROUPS = 8
"""Most blocks per window in the reduction's second level (each leaves a partial). Its threads
wait on one long chain each (the segments' running sums and one multiple s0 R): 8 blocks a window
against 4 take the reduction of G2 2^22 from 5.0 to 4.6 ms on an H200 (G1 within 0.1 ms); 16 and
32 lengthen the multiples more than they shorten the chains (``bench_msm.py --reduce``)."""
REDUCE_BLOCKS = 128
"""Least second-level blocks of the reduction over all windows: an MSM of few windows (a merged
one has one) takes up to this many per window, a power of two, when REDUCE_GROUPS would leave
most SMs idle on the serial chains (G1 2^24 merged at c = 22, one window of 2^21 buckets, on an
H200: 2.8 ms at 8 blocks, 1.9 at 128)."""
TREE_THREADS = 128
"""Block size of the tree kernels (must equal DP_TREE_MAX in msm.cu or be a smaller power of 2)."""
KERNEL_OPTIONS: tuple[str, ...] = ()
"""Extra NVRTC options for msm.cu (e.g. ("-DDP_CIOS_MUL",) for integer CIOS products)."""
SORT_THREADS = 256
RADIX_THREADS = 256
RADIX_TILE = 4096
"""Items per tile of the radix sort (msm_sort.cu): its device code ranks RADIX_ITEMS (16) per
thread of a RADIX_THREADS block, so on a GPU it must be 16 * RADIX_THREADS."""
RADIX_MAX_KEY_BITS = 18
"""Widest key (c - 1 bits) of the two-pass radix sort (passes of at most 512 bins), and so the
widest window :func:`pick_window` models."""
RADIX_THREE_PASS_BITS = 27
"""Widest key the radix sort takes at all: above :data:`RADIX_MAX_KEY_BITS`, three passes (the
middle one msm_sort.cu's msm_radix_mid), each at most 9 bits."""
RADIX_MIN_N = 1 << 19
"""Fewest points for which ``distprove.msm.sort: auto`` may take the radix sort (H200, bench_sort.py:
at 2^18 it only tied the counting sort on uniform scalars, 0.31 against 0.33 ms)."""
RADIX_MIN_LIVE: dict[int, float] = {19: 0.6, 21: 0.35, 23: 0.3}
"""``auto`` from :data:`RADIX_MIN_N` points, by log2 n (the last step reached): the device
(msm_sort_plan) takes the radix sort when at least this fraction of a sample of the scalars is
neither 0 nor 1. The counting sort's cost follows the entries, the radix passes also cost per
scalar and window; they tie (H200, ``bench_sort.py --live``) at ~0.3 at 2^24, ~0.35 at 2^22 and
~0.6 at 2^20."""
ACC_THREADS = 128
BOUNDED_BLOCK = 128
"""The block size msm.cu's __launch_bounds__ assume: accumulation, fold (ACC_THREADS) and the
reduction's first level (REDUCE_THREADS) must launch at most this many threads."""
ONES_BLOCKS_MAX = 512
DUMMY_ROWS = 32
"""Constant work: zero-digit rows per window (a power of two; scalar i uses row i mod DUMMY_ROWS),
spreading the count/scatter atomics of the zero digits over that many counters."""
AFFINE_ROUNDS: dict[str, tuple[tuple[int, int], ...]] = {"G1": ((22, 2), (23, 3)),
                                                          "G2": ((19, 1), (20, 3), (23, 5))}
"""Batch-affine pair rounds (msm_affine.cu) run before the XYZZ accumulation, per group, as (log2
entries per window, rounds) steps: windows holding at least 3/4 of 2^log2 entries on average get
that step's rounds (the last step reached; none below the first). Each round halves every bucket
with affine additions that share one inversion per thread, which pays where buckets are full:
the host plans from the bound n per window, and the device runs the rounds whose step the sort's
real entry count reaches (witness-like scalars, mostly 0 and 1, may run none).
``distprove.msm.affine-rounds`` overrides it (then the rounds always run); default mode only. G2
takes 5 rounds from 2^23 (3% faster than 3 at 2^24 on an H200); 4-5 rounds do not pay for G1."""
PAIR_K: tuple[int, int] = (16, 1024)
"""Least and most jobs (pairs) per thread in a pair round: one field inversion (~320 Fq products)
is amortised over them (:func:`pair_threads`). At G1 2^24 (merged, ~10^8 jobs in round 1) 1024
makes rounds 1 and 2 two waves and one instead of four and two, half the inversions: ~0.4 ms off
the merged MSM's ~49 ms on an H200 against 512. Below ~2.6 * 10^7 jobs a round is one wave either
way."""
PAIR_THREADS = 128
"""Block size of the pair-round kernels (msm_affine.cu's DP_PAIR_BLOCK: their shared-memory stage
is laid out for it)."""
SHARED_PER_SM = 228 * 1024
"""Shared memory of one SM (H100 / H200; other GPUs have less, which this estimate of the pair
kernels' occupancy does not know), for kernels that use shared memory."""
PAIR_JOBS_BLOCKS_PER_SM = 16
"""Blocks of 256 threads per SM of msm_pair_jobs, a grid-stride loop over a round's entries."""


def _xyzz_words(group: Group) -> int:
    """uint32 words of one XYZZ point: 4 coordinates of 8 (G1) or 16 (G2) limbs."""
    return 2 * group.limbs


def kernel_options() -> tuple[str, ...]:
    """NVRTC options of the MSM modules: :data:`KERNEL_OPTIONS` and ``distprove.msm.kernel-options``
    (a list of strings, e.g. ``["-DDP_G2_INLINE"]``; each set compiles once and is cached)."""
    extra = config.get("msm.kernel-options", None) or []
    if isinstance(extra, str) or not all(isinstance(o, str) for o in extra):
        raise FormatError("distprove.msm.kernel-options", f"must be a list of NVRTC option strings (got {extra!r})")
    return KERNEL_OPTIONS + tuple(extra)


def _step_entries(lg: int) -> int:
    """Least average entries per window that reach an :data:`AFFINE_ROUNDS` step of log2 ``lg``."""
    return max(1, (3 << lg) >> 2)


def round_thresholds(group: Group, per_window: int) -> list[int]:
    """Least average entries per window for each pair round of an MSM with at most ``per_window``
    entries in a window: round r runs when the windows hold at least element r. Its length is the
    rounds planned; ``distprove.msm.affine-rounds`` plans that many rounds, all at threshold 0."""
    value = config.get("msm.affine-rounds", None)
    if isinstance(value, dict) and set(value) <= set(AFFINE_ROUNDS):
        value = value.get(group.name)
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise FormatError("distprove.msm.affine-rounds",
                              f"must be null, an integer >= 0 or a mapping of G1/G2 to one "
                              f"(got {config.get('msm.affine-rounds')!r})")
        return [0] * value
    need: list[int] = []
    for lg, rounds in AFFINE_ROUNDS[group.name]:
        at = _step_entries(lg)
        if per_window < at:
            break
        need += [at] * (rounds - len(need))
    return need


def _module() -> "cupy.RawModule":
    return get_module("msm", kernel_options())


def _cw_module() -> "cupy.RawModule":
    """msm.cu's helpers and accumulation plus the constant-work kernels of msm_cw.cu (a module of
    its own, so the default path's module and compile time stay as they are)."""
    return get_module("msm_cw", kernel_options())


class _Phases:
    """CUDA events between the MSM phases, read out in ms after the call (benchmarks only)."""

    def __init__(self, out: dict[str, float] | None) -> None:
        self.out = out
        self.marks: list[tuple[str, object]] = []
        self.mark("start")

    def mark(self, name: str) -> None:
        if self.out is not None:
            import cupy

            ev = cupy.cuda.Event()
            ev.record()
            self.marks.append((name, ev))

    def finish(self) -> None:
        if self.out is None:
            return
        import cupy

        self.marks[-1][1].synchronize()
        for (_, a), (name, b) in zip(self.marks, self.marks[1:]):
            self.out[name] = self.out.get(name, 0.0) + cupy.cuda.get_elapsed_time(a, b)


def _suffix(group: Group) -> str:
    return "g1" if group is bn254.G1 else "g2"


MEASURED_WINDOWS: dict[str, dict[int, int]] = {
    "G1": {16: 13, 17: 13, 18: 13, 19: 15, 20: 16, 21: 16, 22: 17, 23: 17, 24: 17},
    "G2": {18: 13, 19: 15, 20: 16, 21: 16, 22: 17, 23: 17, 24: 17},
}
"""Fastest window width by round(log2 n) on one H200, uniform scalars (the window sweeps of
pipelines/bench_msm.py): within 2% of the best at each measured size, where the cost model of
:func:`pick_window` is up to 9% off (G1 2^20: 16 against 15). Wider windows at 2^24 lose to the
reduction (G1 at 19: 2% slower than 17); G2 takes G1's widths where they tie within 1%, so that a
proof's A, B1 and B2 share one width and one digit sort, and 17 at 2^23-2^24 where the cost model
picks 18-20 (G2 2^24 at 20: 10% slower)."""


def pick_window(n: int, group: Group, live: float = 1.0) -> int:
    """Window width c for an MSM of ``n`` points on the GPU, a fraction ``live`` of them with
    scalars other than 0 and 1.

    Only live points reach a bucket, so the width is the one for n * live uniform points:
    witness-like scalars (10% live) run fastest at about that width, up to 2 ms faster than at
    the uniform width at 2^22.
    From :data:`MEASURED_WINDOWS` inside the measured sizes; elsewhere it minimises
    W(c) * (n + k * 2^(c-1)): one mixed addition per point and window against about k additions
    per bucket in the fold and running-sum reduction, up to the radix sort's widest key
    (:data:`RADIX_MAX_KEY_BITS` + 1 = 19: at 2^24 the model's 20 ran 17-20% slower than 17-19, its
    sort falling back to the counting sort and its reduction 2-5x longer).
    """
    table = MEASURED_WINDOWS[group.name]
    n = max(1, round(n * min(max(live, 0.0), 1.0)))
    log_n = round(math.log2(n))
    if min(table) <= log_n <= max(table):
        return table[log_n]
    k = 4 if group is bn254.G1 else 5
    best, best_cost = MIN_WINDOW, None
    for c in range(MIN_WINDOW, min(MAX_WINDOW, RADIX_MAX_KEY_BITS + 1) + 1):
        cost = num_windows(c) * (n + k * (1 << (c - 1)))
        if best_cost is None or cost < best_cost:
            best, best_cost = c, cost
    return best


class MsmScratch:
    """Device buffers reused across MSM calls, grown on demand (contents never assumed zero).

    ``lock`` is held by :func:`msm_windows` for a whole call, so threads sharing one scratch
    (e.g. the process-wide default) run their MSMs one after another instead of trampling
    each other's buffers.
    """

    def __init__(self) -> None:
        self._bufs: dict[str, "cupy.ndarray"] = {}
        self._side: dict[int, "cupy.cuda.Stream"] = {}
        self.lock = threading.Lock()

    def side_stream(self) -> "cupy.cuda.Stream":
        """A stream of this scratch's own for bookkeeping that runs beside an MSM's arithmetic
        (the pair rounds' job lists, the ones): one per device, made on first use there."""
        import cupy

        device = cupy.cuda.runtime.getDevice()
        side = self._side.get(device)
        if side is None:
            side = self._side[device] = cupy.cuda.Stream(non_blocking=True)
        return side

    def take(self, name: str, count: int, dtype: type = np.uint32) -> "cupy.ndarray":
        """A 1-D array of ``count`` elements of ``dtype`` backed by the buffer ``name``.

        Short of memory, every buffer is dropped from the scratch and the allocation retried: a
        buffer queued work still reads stays alive only through the caller's arrays, so a caller
        that hands the device a buffer by address alone (the pair rounds' sets) keeps the array
        until that work has run."""
        import cupy

        itemsize = np.dtype(dtype).itemsize
        nbytes = max(count * itemsize, itemsize)
        buf = self._bufs.get(name)
        if buf is None or buf.nbytes < nbytes:
            self._bufs.pop(name, None)
            try:
                buf = cupy.empty(nbytes, dtype=cupy.uint8)
            except cupy.cuda.memory.OutOfMemoryError:
                # Buffers kept from earlier (larger) calls may be what is in the way: drop them
                # (views taken in the current call keep their memory) and try once more.
                self.release()
                cupy.get_default_memory_pool().free_all_blocks()
                buf = cupy.empty(nbytes, dtype=cupy.uint8)
            self._bufs[name] = buf
        return buf[:nbytes].view(dtype)[:count]

    def release(self) -> None:
        """Drop every buffer (they return to CuPy's memory pool unless a live view holds them)."""
        self._bufs.clear()


_default_scratch = MsmScratch()


def default_scratch() -> MsmScratch:
    """The process-wide scratch used when a call passes none."""
    return _default_scratch


def _check_inputs(group: Group, bases: "cupy.ndarray", scalars: "cupy.ndarray", c: int, lo: int, hi: int) -> int:
    if group is not bn254.G1 and group is not bn254.G2:
        raise ValueError(f"unknown group {group!r}")
    n = _check_scalars(scalars, c, lo, hi)
    if bases.shape != (n, group.limbs) or bases.dtype != np.uint32:
        raise ValueError(f"bases must be ({n}, {group.limbs}) uint32, got {bases.shape} {bases.dtype}")
    if not bases.flags.c_contiguous:
        raise ValueError("bases and scalars must be C-contiguous")
    return n


def _check_scalars(scalars: "cupy.ndarray", c: int, lo: int, hi: int) -> int:
    if scalars.ndim != 2 or scalars.shape[1] != 8 or scalars.dtype != np.uint32:
        raise ValueError(f"scalars must be (n, 8) uint32, got {scalars.shape} {scalars.dtype}")
    if not scalars.flags.c_contiguous:
        raise ValueError("bases and scalars must be C-contiguous")
    n = scalars.shape[0]
    w_count = num_windows(c)
    if not 0 <= lo < hi <= w_count:
        raise ValueError(f"window range [{lo}, {hi}) outside [0, {w_count}) for c={c}")
    if n >= 1 << 31 or n * (hi - lo) >= 1 << 32:
        raise ValueError(f"{n} points x {hi - lo} windows exceed the 32-bit entry indices")
    return n


def msm_windows(
    group: Group,
    bases: "cupy.ndarray",
    scalars: "cupy.ndarray",
    c: int,
    lo: int,
    hi: int,
    scratch: MsmScratch | None = None,
    phases: dict[str, float] | None = None,
    constant_work: bool = False,
) -> list[Affine]:
    """Window sums S_w for w in [lo, hi) of sum_i scalars[i] * bases[i] (index i = window lo+i).

    ``bases``: (n, 16) G1 or (n, 32) G2 uint32, Montgomery affine as in the key, all-zero rows
    are infinity. ``scalars``: (n, 8) uint32 standard form, each < r. The sum of the bases with
    scalar 1 is included in S_0 (only when lo == 0), as DESIGN.md specifies. ``phases``, if
    given, receives the device milliseconds of each phase (sort, pairs when rounds are planned
    (:func:`round_thresholds`; the device may skip them), accumulate, fold, reduce, ones).
    ``constant_work``: the same sums by the kernels of msm_cw.cu (docs/CONSTANT_WORK.md): every
    scalar in every window, zero digits to discarded dummy rows, no ones path, complete
    projective formulas in fold and reduce.
    """
    n = _check_inputs(group, bases, scalars, c, lo, hi)
    if n == 0:
        return [None] * (hi - lo)
    scratch = scratch or default_scratch()
    with scratch.lock:
        return _launch(group, bases, scalars, n, c, lo, hi, scratch, phases, constant_work)()


def msm_windows_start(
    group: Group,
    bases: "cupy.ndarray",
    scalars: "cupy.ndarray",
    c: int,
    lo: int,
    hi: int,
    scratch: MsmScratch,
    stream: "cupy.cuda.Stream",
    constant_work: bool = False,
    digits: DigitSort | None = None,
) -> Callable[[], list[Affine]]:
    """Queue :func:`msm_windows` on ``stream`` and return a function that waits for its sums.

    Nothing waits on the host until the returned function is called, so MSMs started on two
    streams overlap on the device, and MSMs started one after another on one stream run back to
    back. The caller owns ``scratch`` until the last start that uses it has been waited for:
    starts on the same stream may share it (the stream orders them), starts on different streams
    must not. ``stream`` must already wait for whatever produced ``bases`` and ``scalars``.
    ``digits``: the sort of these scalars for (c, lo, hi) by :func:`sort_digits` (on any stream),
    used instead of sorting again (default mode only).
    """
    n = _check_inputs(group, bases, scalars, c, lo, hi)
    if n == 0:
        return lambda: [None] * (hi - lo)
    if digits is not None and (constant_work or digits.key != (n, c, lo, hi) or digits.proofs != 1):
        raise ValueError(f"digit sort of {digits.key} does not fit an MSM of {(n, c, lo, hi)}"
                         f"{' in constant-work mode' if constant_work else ''}")
    with stream:
        return _launch(group, bases, scalars, n, c, lo, hi, scratch, None, constant_work, digits)


COMBINE_THREADS = 64
"""Threads per block of msm_combine (one a proof: a group's few dozen proofs in one block)."""
GROUP_GRID_Y = 65535
"""Most grid rows of a CUDA launch: a grouped MSM's proofs (the digit kernels' rows) and its
proofs * (hi - lo) windows (the radix passes' and the reduction's rows) stay within it."""
ENTRY_LIMIT = 1 << 31
"""Entries (windows x points) an MSM's sort may hold: entry slots, rows and the pair rounds'
bounds are 32-bit, and the point word keeps its low bit for the sign."""
GROUP_MEMORY_SHARE = 0.4
"""Share of the device's free memory one grouped MSM's buffers may take (:func:`proofs_that_fit`):
a proof's G1 and G2 MSMs run at once on two lanes, each with scratch of its own, and CuPy's
pool rounds allocations up."""


def group_fits(n: int, c: int, lo: int, hi: int, proofs: int) -> bool:
    """Whether a grouped MSM of ``proofs`` vectors of ``n`` scalars over windows [lo, hi) of width
    ``c`` fits msm.cu's 32-bit indices and CUDA's grid rows (:data:`ENTRY_LIMIT`,
    :data:`GROUP_GRID_Y`); larger groups run in parts (:func:`msm_windows_group_start`)."""
    windows = proofs * (hi - lo)
    return proofs * n < ENTRY_LIMIT and windows * n < ENTRY_LIMIT and windows << (c - 1) < ENTRY_LIMIT \
        and windows <= GROUP_GRID_Y


def group_bytes(group: Group, n: int, c: int, lo: int, hi: int, proofs: int) -> int:
    """Device bytes of a grouped MSM's buffers (scratch and stacked scalars): sort entries and the
    radix sort's temporaries, the pair rounds' entries, jobs and sums, buckets, spills and the
    reduction, for ``proofs`` vectors of ``n`` scalars over windows [lo, hi) of width ``c``. An
    upper estimate from the sort's bound (every digit live); the real MSM may need less."""
    windows = proofs * (hi - lo)
    bound = windows * n
    rows = windows << (c - 1)
    pw = 4 * _xyzz_words(group)  # bytes of an XYZZ point
    total = 32 * proofs * n  # the stacked scalars
    total += 8 * bound + 8 * rows  # entries; counts and cursor
    if sort_kind(proofs * n, c) != "atomic":
        total += 5 * 4 * bound + 8 * 4 * rows  # digits, keys, points (and a three-pass sort's); histograms
    out_bound, points = bound, []
    for _ in round_thresholds(group, n):
        out_bound = (out_bound + min(rows, out_bound)) // 2
        total += 16 * out_bound + 8 * rows  # entries and jobs; cursor and counts
        points.append(out_bound * 4 * group.limbs)
    total += sum(sorted(points, reverse=True)[:2])  # the rounds' sums alternate between two buffers
    total += rows * pw * 2  # buckets; the reduction's segment sums (at most as many)
    slices = -(-bound // max(SLICE_MIN, SLICE_LEN[group.name] // 2))  # slice_length's shortest slices
    total += 2 * slices * (pw + 4) * 5 // 4  # the spill arrays: the accumulation's, a fold level's (<= 1/4)
    return total


def proofs_that_fit(group: Group, n: int, c: int, lo: int, hi: int, free_bytes: int, proofs: int) -> int:
    """How many of ``proofs`` scalar vectors of ``n`` one grouped MSM over windows [lo, hi) of width
    ``c`` takes at once: the most whose :func:`group_bytes` is within :data:`GROUP_MEMORY_SHARE` of
    ``free_bytes`` and that :func:`group_fits`, at least 1 (a single proof is the per-proof MSM's
    own size). The group then runs in parts of about equal size."""
    budget = GROUP_MEMORY_SHARE * free_bytes
    lo_g, hi_g = 1, max(1, proofs)
    while lo_g < hi_g:  # group_bytes grows with the proofs: the largest that fits, by bisection
        mid = (lo_g + hi_g + 1) // 2
        if group_fits(n, c, lo, hi, mid) and group_bytes(group, n, c, lo, hi, mid) <= budget:
            lo_g = mid
        else:
            hi_g = mid - 1
    parts = -(-proofs // lo_g)
    return -(-proofs // parts) if proofs else 1


def free_device_bytes() -> int:
    """Free memory of the current device, counting the blocks CuPy's pool holds unused."""
    import cupy

    free, _ = cupy.cuda.runtime.memGetInfo()
    return int(free) + int(cupy.get_default_memory_pool().free_bytes())


def _check_group(group: Group, bases: "cupy.ndarray", scalars: "cupy.ndarray", c: int, lo: int,
                 hi: int) -> tuple[int, int]:
    """(proofs, n) of a grouped MSM's (G, n, 8) scalars against (n, limbs) bases; raises on bad shapes."""
    if scalars.ndim != 3 or scalars.shape[2] != 8 or scalars.dtype != np.uint32:
        raise ValueError(f"grouped scalars must be (G, n, 8) uint32, got {scalars.shape} {scalars.dtype}")
    proofs, n = int(scalars.shape[0]), int(scalars.shape[1])
    if not scalars.flags.c_contiguous:
        raise ValueError("bases and scalars must be C-contiguous")
    if proofs:
        _check_inputs(group, bases, scalars[0], c, lo, hi)
    return proofs, n


def msm_windows_group_start(
    group: Group,
    bases: "cupy.ndarray",
    scalars: "cupy.ndarray",
    c: int,
    lo: int,
    hi: int,
    scratch: MsmScratch,
    stream: "cupy.cuda.Stream",
    digits: DigitSort | None = None,
    max_proofs: int | None = None,
    combined: bool = False,
) -> Callable[[], Any]:
    """Queue the window sums of G MSMs over the same ``bases`` on ``stream``: ``scalars`` (G, n, 8)
    uint32 standard form, one vector a proof; the waiter returns G lists, each as
    :func:`msm_windows` of that proof's vector (index i = window lo+i, the proof's ones in S_0).

    One set of launches for the whole group: the G vectors are G * (hi - lo) windows of one MSM
    over the n points (vector p's window w is window p * (hi - lo) + w - lo), so a small MSM's
    fixed costs (launches, the reduction's serial chains) are paid once for G proofs. Groups over
    ``max_proofs`` (default: as many as :func:`group_fits` allows) run in consecutive parts on
    the same stream, one readback each. ``scratch``, ``stream`` as for :func:`msm_windows_start`;
    ``digits``: :func:`sort_digits` of these (G, n, 8) scalars for (c, lo, hi), when one part
    runs it (A, B1 and B2 of G proofs share it). Default mode only.

    ``combined`` (whole MSMs, lo = 0 and hi = W(c)): each proof's sums are combined and made
    affine on the device, and the waiter returns a (G, limbs) array of standard-form affine rows,
    one point a proof, infinity all zero (:func:`bn254.points_from_limbs` with ``mont=False``
    decodes them; :func:`msm_combined_group` does both).
    """
    proofs, n = _check_group(group, bases, scalars, c, lo, hi)
    if combined:
        _check_whole(c, lo, hi, False)
    if proofs == 0 or n == 0:
        if combined:
            return lambda: np.zeros((proofs, group.limbs), dtype=np.uint32)
        return lambda: [[None] * (hi - lo) for _ in range(proofs)]
    step = max(1, min(max_proofs or proofs, proofs))
    while step > 1 and not group_fits(n, c, lo, hi, step):
        step = (step + 1) // 2
    if digits is not None and (digits.key != (n, c, lo, hi) or digits.proofs != proofs or step != proofs):
        raise ValueError(f"digit sort of {digits.proofs} x {digits.key} does not fit a grouped MSM of "
                         f"{proofs} x {(n, c, lo, hi)} in parts of {step}")
    waiters = []
    with stream:
        for first in range(0, proofs, step):
            part = min(step, proofs - first)
            waiters.append((part, _launch(group, bases, scalars[first:first + part], n, c, lo, hi, scratch, None,
                                          False, digits, proofs=part, combined=combined)))
    if combined:
        return lambda: np.concatenate([finish() for _, finish in waiters])

    def wait() -> list[list[Affine]]:
        span, sums = hi - lo, []
        for part, finish in waiters:
            flat = finish()
            sums += [flat[p * span:(p + 1) * span] for p in range(part)]
        return sums

    return wait


def msm_windows_group(
    group: Group,
    bases: "cupy.ndarray",
    scalars: "cupy.ndarray",
    c: int,
    lo: int,
    hi: int,
    scratch: MsmScratch | None = None,
    max_proofs: int | None = None,
) -> list[list[Affine]]:
    """:func:`msm_windows_group_start` on the current stream, waited for: per proof (row of the
    (G, n, 8) ``scalars``) its window sums S_lo .. S_{hi-1} over ``bases``."""
    import cupy

    scratch = scratch or default_scratch()
    with scratch.lock:
        return msm_windows_group_start(group, bases, scalars, c, lo, hi, scratch, cupy.cuda.get_current_stream(),
                                       max_proofs=max_proofs)()


class DigitSort(NamedTuple):
    """The counting sort of one scalar vector's signed digits (windows [lo, hi) of width c): what
    the accumulation reads, in buffers of its own. MSMs of the same scalars, width and windows
    share it (a proof's A, B1 and B2, whose bases differ); ``done`` is recorded after the scatter
    on the stream that sorted, and the buffers live as long as any MSM's waiter holds them.
    A grouped sort (``proofs`` > 1) is of (proofs, n, 8) scalars, for :func:`msm_windows_group_start`."""

    key: tuple[int, int, int, int]
    """(n, c, lo, hi)."""
    counts: "cupy.ndarray"
    cursor: "cupy.ndarray"
    entries: "cupy.ndarray"
    done: "cupy.cuda.Event"
    proofs: int = 1


def sort_digits(scalars: "cupy.ndarray", c: int, lo: int, hi: int, stream: "cupy.cuda.Stream") -> DigitSort:
    """Queue the digit sort of ``scalars`` (default mode) on ``stream`` for later
    :func:`msm_windows_start` calls with ``digits=`` (or, of (G, n, 8) scalars, for
    :func:`msm_windows_group_start`); ``stream`` must wait for the scalars."""
    import cupy

    proofs = int(scalars.shape[0]) if scalars.ndim == 3 else 1
    flat = scalars.reshape(-1, 8) if scalars.ndim == 3 and scalars.flags.c_contiguous else scalars
    n = _check_scalars(flat, c, lo, hi) // max(proofs, 1)
    if not group_fits(n, c, lo, hi, proofs):
        raise ValueError(f"{proofs} x {n} scalars x {hi - lo} windows exceed one grouped MSM's indices")
    nw = proofs * (hi - lo)
    rows = nw << (c - 1)
    with stream:
        counts = cupy.zeros(rows, dtype=cupy.uint32)
        cursor = cupy.empty(rows, dtype=cupy.uint32)
        entries = cupy.empty(2 * nw * max(n, 1), dtype=cupy.uint32)
        if n and proofs:
            _sort(_module(), flat, n, c, lo, hi - lo, counts, cursor, entries, False,
                  lambda name, count: cupy.empty(max(count, 1), dtype=cupy.uint32), proofs)
        done = cupy.cuda.Event()
        done.record(stream)
    return DigitSort((n, c, lo, hi), counts, cursor, entries, done, proofs)


def table_fits(n: int, c: int) -> bool:
    """Whether a :func:`precompute_multiples` table of width ``c`` for ``n`` points has rows that
    msm.cu's entries can index (31 bits: the low bit of an entry's point word is the sign)."""
    return num_windows(c) * n < 1 << 31


def precompute_multiples(group: Group, bases: "cupy.ndarray", c: int) -> "cupy.ndarray":
    """The table of :func:`msm_merged`: for ``bases`` ((n, limbs) uint32, Montgomery affine, all-zero
    rows infinity) and width ``c``, a (W(c) * n, limbs) array whose row w * n + i is 2^(c w) P_i
    (msm_merged.cu msm_precompute_*): W(c) times the bases' memory, made once per key and width."""
    import cupy

    if bases.ndim != 2 or bases.shape[1] != group.limbs or bases.dtype != np.uint32 or not bases.flags.c_contiguous:
        raise ValueError(f"bases must be C-contiguous (n, {group.limbs}) uint32, got {bases.shape} {bases.dtype}")
    n, w = bases.shape[0], num_windows(c)
    if not table_fits(n, c):
        raise ValueError(f"{w} windows x {n} points exceed the 31-bit point indices")
    table = cupy.empty((w * n, group.limbs), dtype=cupy.uint32)
    if n:
        _module().get_function(f"msm_precompute_{_suffix(group)}")(
            (-(-n // TREE_THREADS),), (TREE_THREADS,), (bases, np.uint32(n), np.uint32(c), np.uint32(w), table))
    return table


def merged_width(n: int, group: Group) -> int:
    """Window width of a :func:`precompute_multiples` table for ``n`` points: the c minimising
    W(c) * n + k * 2^(c-1) (every window's entries into one set of buckets, reduced once; k as
    in :func:`pick_window`), up to the radix sort's widest key. At G1 2^24 that is 22, the
    fastest of 22-24 on an H200 (``bench_msm.py --precomputed``)."""
    k = 4 if group is bn254.G1 else 5
    n = max(n, 1)
    widths = range(MIN_WINDOW, min(MAX_WINDOW, RADIX_THREE_PASS_BITS + 1) + 1)
    return min(widths, key=lambda c: (num_windows(c) * n + k * (1 << (c - 1)), c))


def msm_merged_start(group: Group, table: "cupy.ndarray", scalars: "cupy.ndarray", c: int, scratch: MsmScratch,
                     stream: "cupy.cuda.Stream", phases: dict[str, float] | None = None) -> Callable[[], Affine]:
    """Queue sum_i scalars[i] * P_i over a :func:`precompute_multiples` table of width ``c`` (W(c)
    * n rows for n scalars) on ``stream``; return the function that waits for it (affine): every
    window's digits sorted into one set of 2^(c-1) buckets (the radix sort's passes over all
    windows as one, msm_merged.cu), then the pair rounds, accumulation and one bucket reduction
    of the window-range MSM; the scalars equal to 1 add their P_i (the table's window 0).
    ``scratch`` and ``stream`` as for :func:`msm_windows_start`; ``phases`` as for
    :func:`msm_windows` (filled when the waiter returns)."""
    import cupy

    n = _check_scalars(scalars, c, 0, 1)
    w = num_windows(c)
    if table.ndim != 2 or table.shape != (w * n, group.limbs) or table.dtype != np.uint32:
        raise ValueError(f"table must be ({w} * {n}, {group.limbs}) uint32 for c={c}, got {table.shape} {table.dtype}")
    if not table_fits(n, c):
        raise ValueError(f"{w} windows x {n} points exceed the 31-bit point indices")
    if n == 0:
        return lambda: None
    rows = 1 << (c - 1)
    with stream:
        counts = scratch.take("merged_counts", rows)
        counts.fill(0)
        cursor = scratch.take("merged_cursor", rows)
        entries = scratch.take("merged_entries", 2 * w * n)
        timer = _Phases(phases)
        _planned_sort(_module(), scalars, n, c, 0, w, counts, cursor, entries, scratch.take, 0, flat=True)
        timer.mark("merged_sort")
        done = cupy.cuda.Event()
        done.record()
        sort = DigitSort((w * n, c, 0, 1), counts, cursor, entries, done)
        rest: dict[str, float] | None = {} if phases is not None else None
        finish = _launch(group, table, scalars, w * n, c, 0, 1, scratch, rest, False, sort, ones_n=n)

    def wait() -> Affine:
        (total,) = finish()
        if phases is not None and rest is not None:
            timer.finish()
            phases.update({"sort": phases.pop("merged_sort", 0.0) + rest.pop("sort", 0.0), **rest})
        return total

    return wait


def msm_merged(group: Group, table: "cupy.ndarray", scalars: "cupy.ndarray", c: int,
               scratch: MsmScratch | None = None, phases: dict[str, float] | None = None) -> Affine:
    """:func:`msm_merged_start` on the current stream, waited for."""
    import cupy

    scratch = scratch or default_scratch()
    with scratch.lock:
        return msm_merged_start(group, table, scalars, c, scratch, cupy.cuda.get_current_stream(), phases)()


def sort_kind(n: int, c: int, constant_work: bool = False) -> str:
    """Which digit sort an MSM of ``n`` points at width ``c`` takes: ``"atomic"`` (msm.cu's counting
    sort), ``"radix"`` (msm_sort.cu) or ``"planned"`` (the device picks one of the two from the
    scalars, :data:`RADIX_MIN_LIVE`). ``distprove.msm.sort`` chooses: auto (planned from
    :data:`RADIX_MIN_N` points, the counting sort below), radix or atomic. Constant-work mode and
    keys wider than :data:`RADIX_THREE_PASS_BITS` bits always take the counting sort."""
    kind = config.get("msm.sort", "auto")
    if kind not in ("auto", "radix", "atomic"):
        raise FormatError("distprove.msm.sort", f"must be auto, radix or atomic (got {kind!r})")
    if constant_work or c - 1 > RADIX_THREE_PASS_BITS or kind == "atomic":
        return "atomic"
    if kind == "radix":
        return "radix"
    return "planned" if n >= RADIX_MIN_N else "atomic"


def _min_live(n: int) -> float:
    """:data:`RADIX_MIN_LIVE` at the last step that log2 ``n`` reaches (the first step below them)."""
    steps = sorted(RADIX_MIN_LIVE.items())
    reached = [value for lg, value in steps if lg <= n.bit_length() - 1]
    return reached[-1] if reached else steps[0][1]


def _sort(mod: Any, scalars: "cupy.ndarray", n: int, c: int, lo: int, nw: int, counts: "cupy.ndarray",
          cursor: "cupy.ndarray", entries: "cupy.ndarray", constant_work: bool,
          take: Callable[[str, int], "cupy.ndarray"], proofs: int = 1) -> None:
    """Sort of (window, |digit|) rows on the current stream into ``entries`` (sorted by row),
    ``cursor`` (each row's first entry) and ``counts``, which must be zero; ``take(name, count)``
    gives the radix sort's uint32 temporaries. ``proofs`` > 1: ``scalars`` holds that many vectors
    of ``n`` (a grouped MSM, :func:`msm_windows_group`), sorted as ``proofs * nw`` windows (vector
    p's window w is window p * nw + w - lo); the choice of sort follows all proofs * n scalars,
    as both sorts' costs grow with them (not constant work)."""
    import cupy

    if proofs > 1 and constant_work:
        raise ValueError("grouped MSMs have no constant-work mode")
    kind = sort_kind(proofs * n, c, constant_work)
    if kind != "atomic":
        min_live = round(_min_live(proofs * n) * 1024) if kind == "planned" else 0
        _planned_sort(mod, scalars, n, c, lo, nw, counts, cursor, entries, take, min_live, proofs=proofs)
        return
    u32 = np.uint32
    cw = "_cw" if constant_work else ""
    sort_grid = (-(-n // SORT_THREADS), proofs)
    args = (u32(n), u32(c), u32(lo), u32(nw), u32(1 << (c - 1))) + ((u32(DUMMY_ROWS),) if constant_work else ())
    mod.get_function(f"msm_count{cw}")(sort_grid, (SORT_THREADS,), (scalars, counts) + args)
    cupy.cumsum(counts, dtype=cupy.uint32, out=cursor)
    mod.get_function(f"msm_scatter{cw}")(sort_grid, (SORT_THREADS,), (scalars, cursor, entries) + args)


def _planned_sort(mod: Any, scalars: "cupy.ndarray", n: int, c: int, lo: int, nw: int, counts: "cupy.ndarray",
                  cursor: "cupy.ndarray", entries: "cupy.ndarray", take: Callable[[str, int], "cupy.ndarray"],
                  min_live: int, flat: bool = False, proofs: int = 1) -> None:
    """msm_sort_plan picks the sort on the device (the radix sort when at least ``min_live`` / 1024
    of a sample of the scalars are live; ``min_live`` 0: the radix sort, no sample taken), and the
    kernels of both are queued: those of the other one return at once. The radix sort
    (msm_sort.cu): digits, then per pass a histogram of (window, bin, tile) counts, its inclusive
    scan (where each run ends) and a scatter (stable after the first; the last also counts each
    row's entries); then the cursor from the counts. Keys of c - 1 bits: two passes
    up to :data:`RADIX_MAX_KEY_BITS`, three above (d1 >= dm >= d2 bits, low to high).

    ``flat`` (precomputed window multiples, :func:`msm_merged_start`): the nw windows' digits are
    sorted as one window of nw * n items, rows 2^(c-1) and point index w * n + i (the table row);
    always the radix sort (``min_live`` must be 0). ``proofs``: a grouped MSM's vectors, as for
    :func:`_sort` (never flat): the digit kernel's grid row p writes vector p's digits as windows
    p * nw .., and the passes run over ``proofs * nw`` windows."""
    import cupy

    if flat and proofs != 1:
        raise ValueError("a flat (merged) sort has one scalar vector")
    u32 = np.uint32
    passes = 2 if c - 1 <= RADIX_MAX_KEY_BITS else 3
    d2 = (c - 1) // passes
    dm = (c - 1 - d2) // 2 if passes == 3 else 0
    d1 = c - 1 - d2 - dm
    tiles_n = -(-n // RADIX_TILE)  # msm_radix_digits' tiles, over the scalars
    sort_n, sort_nw = (nw * n, 1) if flat else (n, proofs * nw)  # the passes' items per window and windows
    rows = sort_nw << (c - 1)
    tiles = -(-sort_n // RADIX_TILE)
    grid = (tiles, sort_nw)
    tile_args = (u32(RADIX_TILE), u32(d1))
    plan = take("radix_plan", 1)
    digits, keys, pts = (take(f"radix_{name}", proofs * nw * n) for name in ("digits", "keys", "pts"))
    hist1, ends1 = (take(f"radix_{name}1", (sort_nw << d1) * tiles) for name in ("hist", "ends"))
    hist2, ends2 = (take(f"radix_{name}2", (sort_nw << d2) * tiles) for name in ("hist", "ends"))
    shape = (u32(n), u32(c), u32(lo), u32(nw), u32(1 << (c - 1)))  # the counting sort's kernels'
    sort_grid = (-(-n // SORT_THREADS), proofs)
    if min_live:
        mod.get_function("msm_sort_plan")((1,), (RADIX_THREADS,), (scalars, u32(proofs * n), u32(min_live), plan))
    else:  # the radix sort whatever the scalars: no sample to wait for (74 us at G1 2^24)
        plan.fill(1)
    if not flat:
        mod.get_function("msm_count_sel")(sort_grid, (SORT_THREADS,), (plan, scalars, counts) + shape)
    # Flat, the digit kernel's histogram is pass 1's when every tile lies in one window; else
    # msm_radix_flat_hist counts the words again over tiles that cross windows.
    fused = flat and n % RADIX_TILE == 0
    hist_w = take("radix_hist_windows", (nw << d1) * tiles_n) if flat and not fused else hist1
    mod.get_function("msm_radix_digits")((tiles_n, proofs), (RADIX_THREADS,), (plan, scalars, digits, hist_w, u32(n), u32(c),
                                                                      u32(lo), u32(nw)) + tile_args
                                         + (u32(tiles_n), u32(fused)))
    if flat and not fused:
        mod.get_function("msm_radix_flat_hist")((tiles,), (RADIX_THREADS,),
                                                (plan, digits, u32(sort_n), hist1) + tile_args + (u32(tiles),))
    cupy.cumsum(hist1, dtype=cupy.uint32, out=ends1)  # unread when the plan is the counting sort
    mod.get_function("msm_radix_pass1")(grid, (RADIX_THREADS,),
                                        (plan, digits, hist1, ends1, keys, pts, u32(sort_n)) + tile_args + (u32(tiles),))
    later_hist = mod.get_function("msm_radix_hist2")
    if dm:
        histm, endsm = (take(f"radix_{name}m", (sort_nw << dm) * tiles) for name in ("hist", "ends"))
        keys_m, pts_m = (take(f"radix_{name}m", proofs * nw * n) for name in ("keys", "pts"))
        later_hist(grid, (RADIX_THREADS,), (plan, keys, hist1, ends1, histm) + tile_args + (u32(d1), u32(dm), u32(tiles)))
        cupy.cumsum(histm, dtype=cupy.uint32, out=endsm)
        mod.get_function("msm_radix_mid")(grid, (RADIX_THREADS,), (plan, keys, pts, hist1, ends1, histm, endsm, keys_m,
                                                                   pts_m) + tile_args + (u32(dm), u32(tiles)))
        keys, pts = keys_m, pts_m
    later_hist(grid, (RADIX_THREADS,), (plan, keys, hist1, ends1, hist2) + tile_args + (u32(d1 + dm), u32(d2), u32(tiles)))
    cupy.cumsum(hist2, dtype=cupy.uint32, out=ends2)
    mod.get_function("msm_radix_pass2")(grid, (RADIX_THREADS,), (plan, keys, pts, hist1, ends1, hist2, ends2, entries,
                                                                 counts, u32(1 << (c - 1))) + tile_args
                                        + (u32(d1 + dm), u32(d2), u32(tiles)))
    cupy.cumsum(counts, dtype=cupy.uint32, out=cursor)  # each row's end
    if not flat:
        mod.get_function("msm_scatter_sel")(sort_grid, (SORT_THREADS,), (plan, scalars, cursor, entries) + shape)
    mod.get_function("msm_radix_cursor")((-(-rows // 256),), (256,), (plan, counts, cursor, u32(rows)))


@dataclass
class _Msm:
    """What the phases of one window-range MSM (:func:`_launch`) share: its shape, module and
    scratch. ``nw`` windows in all (a grouped MSM's are virtual: proof p's window w is
    p * span + w - lo), ``rows`` bucket rows (constant work appends DUMMY_ROWS zero-digit rows per
    window after them), ``pw`` uint32 words per XYZZ point."""

    group: Group
    n: int
    c: int
    lo: int
    span: int
    proofs: int
    constant_work: bool
    scratch: MsmScratch
    phases: InitVar[dict[str, float] | None]
    mod: Any = field(init=False)
    sfx: str = field(init=False)
    cw: str = field(init=False)
    timer: _Phases = field(init=False)
    nw: int = field(init=False)
    nb: int = field(init=False)
    rows: int = field(init=False)
    pw: int = field(init=False)

    def __post_init__(self, phases: dict[str, float] | None) -> None:
        self.nw = self.proofs * self.span
        self.sfx = _suffix(self.group)
        self.mod = _cw_module() if self.constant_work else _module()
        self.cw = "_cw" if self.constant_work else ""
        self.timer = _Phases(phases)  # after the module: its start mark follows any compile
        self.nb = 1 << (self.c - 1)
        self.rows = self.nw * self.nb + (self.nw * DUMMY_ROWS if self.constant_work else 0)
        self.pw = _xyzz_words(self.group)


def msm_combined_group(
    group: Group,
    bases: "cupy.ndarray",
    scalars: "cupy.ndarray",
    c: int,
    scratch: MsmScratch | None = None,
    max_proofs: int | None = None,
) -> list[Affine]:
    """Whole grouped MSMs on the current stream, waited for: per proof (row of the (G, n, 8)
    ``scalars``) sum_i s_i P_i over ``bases``, its windows combined and made affine on the device
    (:func:`msm_windows_group_start` with ``combined``)."""
    import cupy

    scratch = scratch or default_scratch()
    with scratch.lock:
        words = msm_windows_group_start(group, bases, scalars, c, 0, num_windows(c), scratch,
                                        cupy.cuda.get_current_stream(), max_proofs=max_proofs, combined=True)()
    return bn254.points_from_limbs(group, words, mont=False)


def _check_whole(c: int, lo: int, hi: int, constant_work: bool) -> None:
    """ValueError unless windows [lo, hi) are a whole MSM of width ``c`` in the default mode (what
    the device combine takes)."""
    if constant_work or lo != 0 or hi != num_windows(c):
        raise ValueError(f"a combined MSM is whole (windows [0, {num_windows(c)})) in the default mode, "
                         f"not windows [{lo}, {hi}){' in constant-work mode' if constant_work else ''}")


def _launch(
    group: Group,
    bases: "cupy.ndarray",
    scalars: "cupy.ndarray",
    n: int,
    c: int,
    lo: int,
    hi: int,
    scratch: MsmScratch,
    phases: dict[str, float] | None,
    constant_work: bool = False,
    digits: DigitSort | None = None,
    ones_n: int | None = None,
    proofs: int = 1,
    combined: bool = False,
) -> Callable[[], Any]:
    """Queue every kernel of one window-range MSM on the current stream (the sort skipped when
    ``digits`` has it); return the waiter. ``ones_n``: the scalars equal to 1 are summed over the
    first ``ones_n`` points only (default n; a merged MSM's window 0). ``proofs``: a grouped MSM
    (:func:`msm_windows_group`) of that many scalar vectors of n, run as proofs * (hi - lo)
    windows; the waiter's list holds them proof by proof, each proof's ones in its window lo.
    ``combined`` (whole MSMs only, windows 0 .. W(c), default mode): each proof's windows and ones
    are combined on the device (:func:`_combine_phase`) and the waiter returns the (proofs, limbs)
    standard-form affine rows."""
    import cupy

    if not 4 <= FOLD_MIN <= FOLD_LEN:
        raise ValueError("need 4 <= FOLD_MIN <= FOLD_LEN")
    if max(ACC_THREADS, REDUCE_THREADS) > BOUNDED_BLOCK:
        raise ValueError(f"ACC_THREADS and REDUCE_THREADS must be at most {BOUNDED_BLOCK} (msm.cu's launch bounds)")
    if DUMMY_ROWS < 1 or DUMMY_ROWS & (DUMMY_ROWS - 1):
        raise ValueError("DUMMY_ROWS must be a power of two")
    if combined:
        _check_whole(c, lo, hi, constant_work)
    m = _Msm(group, n, c, lo, hi - lo, proofs, constant_work, scratch, phases)
    counts, cursor, entries = _sort_phase(m, scalars, digits)
    rounds = [] if constant_work else round_thresholds(group, n)
    accumulate, acc_inputs, by_address = _pair_phase(m, rounds, entries, bases, cursor, counts)
    main = cupy.cuda.get_current_stream()
    out = cupy.empty((m.nw + proofs) * m.pw, dtype=cupy.uint32)  # per call: queued MSMs each keep their own
    with_ones = lo == 0 and not constant_work
    ones_done = _ones_phase(m, scalars, bases, ones_n or n, bool(rounds), main, out) if with_ones else None
    if rounds:
        m.timer.mark("pairs")
    buckets = _accumulate_phase(m, accumulate, acc_inputs, bool(rounds))
    _reduce_phase(m, buckets, out)
    if ones_done is not None:
        main.wait_event(ones_done)
    if combined:
        return _words_waiter(m, _combine_phase(m, out, with_ones), main, digits, [by_address])
    return _waiter(m, out, with_ones, main, digits, [by_address])


def _sort_phase(m: _Msm, scalars: "cupy.ndarray", digits: DigitSort | None
                ) -> tuple["cupy.ndarray", "cupy.ndarray", "cupy.ndarray"]:
    """Counting or radix sort of (window, |digit|) rows (msm.cu, msm_sort.cu), or wait for the one
    these scalars already have (``digits``); returns (counts, cursor, entries)."""
    import cupy

    if digits is not None:
        cupy.cuda.get_current_stream().wait_event(digits.done)
        counts, cursor, entries = digits.counts, digits.cursor, digits.entries
    else:
        counts = m.scratch.take("counts", m.rows)
        counts.fill(0)
        cursor = m.scratch.take("cursor", m.rows)
        entries = m.scratch.take("entries", 2 * m.nw * m.n)
        _sort(m.mod, scalars, m.n, m.c, m.lo, m.span, counts, cursor, entries, m.constant_work, m.scratch.take,
              m.proofs)
    m.timer.mark("sort")
    return counts, cursor, entries


def _pair_phase(m: _Msm, rounds: list[int], entries: "cupy.ndarray", bases: "cupy.ndarray",
                cursor: "cupy.ndarray", counts: "cupy.ndarray") -> tuple[Any, tuple, list]:
    """Batch-affine pair rounds (msm_affine.cu), one per entry of ``rounds`` (per-window entry
    thresholds; as many as the device finds worth it): the accumulation then reads the last one's
    sums instead of the bases. Returns (the accumulation kernel, its inputs, the buffers the device
    finds by an address stored in another buffer)."""
    if rounds:
        accumulate = m.mod.get_function(f"msm_accumulate_sel_{m.sfx}")
        plan, sets, by_address = _pair_rounds(m.mod, m.group, [t * m.nw for t in rounds], entries, bases, cursor,
                                              counts, m.rows, m.nw * m.n, m.scratch)
        return accumulate, (plan, sets), by_address
    return m.mod.get_function(f"msm_accumulate_{m.sfx}"), (entries, bases, cursor, counts), []


def _ones_phase(m: _Msm, scalars: "cupy.ndarray", bases: "cupy.ndarray", ones_n: int, after_rounds: bool,
                main: "cupy.cuda.Stream", out: "cupy.ndarray") -> "cupy.cuda.Event":
    """The scalars equal to 1 (their bases summed as they are, over the first ``ones_n`` points)
    on the side stream into ``out``'s last ``proofs`` points, after the pair rounds' job lists
    there (which already wait for the sort, so for the inputs) or, without rounds, after what
    ``main`` has queued: beside the rounds or the accumulation instead of after the reduction.
    Returns the event the main stream waits for."""
    import cupy

    u32 = np.uint32
    side = m.scratch.side_stream()
    if not after_rounds:
        inputs = cupy.cuda.Event()
        inputs.record(main)
        side.wait_event(inputs)
    ones_blocks = max(1, min(-(-ONES_BLOCKS_MAX // m.proofs), -(-ones_n // TREE_THREADS)))  # per proof
    ones = m.scratch.take("ones", m.proofs * ones_blocks * m.pw)
    with side:
        m.mod.get_function(f"msm_ones_{m.sfx}")((ones_blocks, m.proofs), (TREE_THREADS,),
                                                (scalars, bases, u32(ones_n), ones))
        m.mod.get_function(f"msm_sum_groups{m.cw}_{m.sfx}")((m.proofs,), (TREE_THREADS,),
                                                            (ones, u32(ones_blocks), out[m.nw * m.pw :]))
        ones_done = cupy.cuda.Event()
        ones_done.record(side)
    return ones_done


def _accumulate_phase(m: _Msm, accumulate: Any, acc_inputs: tuple, after_rounds: bool) -> "cupy.ndarray":
    """Buckets (msm.cu): clear, accumulate slices, fold the slices' spills; returns the buckets.
    The slices cover the sort's bound (the rounds may not have run); after rounds the device
    re-cuts them to the entries left (pair_slice_len)."""
    u32 = np.uint32
    pw, rows = m.pw, m.rows
    buckets = m.scratch.take("buckets", rows * pw)
    m.mod.get_function(f"msm_clear{m.cw}_{m.sfx}")((-(-rows // 256),), (256,), (buckets, u32(rows)))
    bound = m.nw * m.n
    slice_len = slice_length(bound, SLICE_LEN[m.group.name], accumulate)
    slices = -(-bound // slice_len)
    shape: tuple = (u32(rows), u32(slice_len), u32(slices))
    if after_rounds:
        resident = _resident_threads(accumulate, ACC_THREADS) or _sm_count() * ACC_THREADS
        shape += (u32(resident), u32(SLICE_LEN[m.group.name]), u32(SLICE_MIN))
    spills = 2 * slices
    fold = m.mod.get_function(f"msm_fold{m.cw}_{m.sfx}")
    fold_out = 2 * (-(-spills // fold_length(spills, fold)))
    spill = [
        (m.scratch.take("spill_rows_a", spills), m.scratch.take("spill_pts_a", spills * pw)),
        (m.scratch.take("spill_rows_b", fold_out), m.scratch.take("spill_pts_b", fold_out * pw)),
    ]
    accumulate(
        (-(-slices // ACC_THREADS),),
        (ACC_THREADS,),
        acc_inputs + shape + (buckets,) + spill[0],
    )
    m.timer.mark("accumulate")
    src = 0
    while True:
        flen = fold_length(spills, fold)
        groups = -(-spills // flen)
        dst = 1 - src
        fold(
            (-(-groups // ACC_THREADS),),
            (ACC_THREADS,),
            (spill[src][0], spill[src][1], u32(spills), u32(flen), u32(groups), buckets) + spill[dst],
        )
        if groups == 1:
            break
        spills = 2 * groups
        src = dst
    m.timer.mark("fold")
    return buckets


def _reduce_phase(m: _Msm, buckets: "cupy.ndarray", out: "cupy.ndarray") -> None:
    """Window reduction (msm.cu): one partial per group of bucket segments, then one point per
    window into ``out``'s first ``nw`` points."""
    u32 = np.uint32
    nb, nw, pw, sfx = m.nb, m.nw, m.pw, m.sfx
    if m.constant_work:  # one segment of seg buckets per thread, each with its multiple a * R
        seg = min(REDUCE_SEG, nb)
        threads = min(TREE_THREADS, nb // seg)
        groups = nb // (seg * threads)
        partials = m.scratch.take("partials", nw * groups * pw)
        m.mod.get_function(f"msm_reduce_cw_{sfx}")((groups, nw), (threads,), (buckets, u32(nb), u32(seg), partials))
    else:
        reduce_seg = m.mod.get_function(f"msm_reduce_seg_{sfx}")
        seg, nseg, threads, groups = reduce_geometry(nb, nw, reduce_seg)
        segs = nw * nseg
        seg_t, seg_r = m.scratch.take("reduce_t", segs * pw), m.scratch.take("reduce_r", segs * pw)
        partials = m.scratch.take("partials", nw * groups * pw)
        reduce_seg((-(-segs // REDUCE_THREADS),), (REDUCE_THREADS,), (buckets, u32(segs), u32(seg), seg_t, seg_r))
        m.mod.get_function(f"msm_reduce_win_{sfx}")((groups, nw), (threads,),
                                                    (seg_t, seg_r, u32(nseg), u32(seg.bit_length() - 1), partials))
    m.mod.get_function(f"msm_sum_groups{m.cw}_{sfx}")((nw,), (TREE_THREADS,), (partials, u32(groups), out))
    m.timer.mark("reduce")


def _combine_phase(m: _Msm, out: "cupy.ndarray", with_ones: bool) -> "cupy.ndarray":
    """Horner combine of each proof's whole MSM on the device (msm.cu's msm_combine, one thread a
    proof): sum_w 2^(c w) S_w of ``out``'s window sums plus its ones, affine in standard form;
    returns the (proofs * limbs) rows. Its own buffer: the waiter reads it after later MSMs took
    the scratch."""
    import cupy

    u32 = np.uint32
    points = cupy.empty(m.proofs * m.group.limbs, dtype=cupy.uint32)
    threads = min(COMBINE_THREADS, m.proofs)
    m.mod.get_function(f"msm_combine_{m.sfx}")((-(-m.proofs // threads),), (threads,),
                                               (out, u32(m.span), u32(m.c), u32(m.proofs), u32(with_ones), points))
    m.timer.mark("combine")
    return points


def _words_waiter(m: _Msm, points: "cupy.ndarray", main: "cupy.cuda.Stream", digits: DigitSort | None,
                  in_flight: list) -> Callable[[], np.ndarray]:
    """The waiter of a combined :func:`_launch`: the (proofs, limbs) standard-form affine rows read
    back. ``digits``, ``in_flight`` as for :func:`_waiter`."""
    import cupy

    # The readback is queued now, behind the combine: a waiter called after later MSMs were
    # queued on the same stream (the next group's) waits for this MSM only.
    host = pinned_bytes(points.nbytes).view(np.uint32).reshape(m.proofs, m.group.limbs)
    cupy.asnumpy(points.reshape(m.proofs, m.group.limbs), stream=main, out=host, blocking=False)
    done = cupy.cuda.Event(disable_timing=True)
    done.record(main)

    def wait() -> np.ndarray:
        m.timer.finish()
        if digits is not None:
            digits.done.synchronize()
        done.synchronize()
        in_flight.clear()
        return host

    return wait


def _waiter(m: _Msm, out: "cupy.ndarray", with_ones: bool, main: "cupy.cuda.Stream", digits: DigitSort | None,
            in_flight: list) -> Callable[[], list[Affine]]:
    """The waiter of :func:`_launch`: reads ``out`` back, converts to affine and adds each proof's
    ones to its window lo. ``in_flight``: buffers the device finds by an address stored in another
    buffer (the pair rounds' sets), held until the readback so that a later take() that runs short
    of memory and drops the scratch's buffers cannot free them under a kernel still queued to read
    them."""
    import cupy

    nw, pw, span, proofs = m.nw, m.pw, m.span, m.proofs

    def wait() -> list[Affine]:
        m.timer.finish()
        if digits is not None:  # a shared sort's buffers live until every MSM reading them was waited for
            digits.done.synchronize()
        host = cupy.asnumpy(out[: (nw + proofs * int(with_ones)) * pw], stream=main).reshape(-1, pw)
        in_flight.clear()  # the readback waited for every kernel of this MSM
        points = xyzz_to_affine(m.group, host)
        sums = points[:nw]
        if with_ones:
            for p in range(proofs):
                sums[p * span] = curve.add(m.group, sums[p * span], points[nw + p])
        return sums

    return wait


def slice_length(bound: int, target: int, kernel: Any) -> int:
    """Entries per accumulation thread for ``bound`` entries: the length in [target / 2, 3 target / 2]
    (at least :data:`SLICE_MIN`) that minimises waves * length, the time of the accumulation when
    every thread's slice costs the same and a wave is what every SM holds at once at ``kernel``'s
    register count (a last wave a tenth full costs as long as a full one); the longest on ties
    (fewer spills to fold). The target itself where the register count is unknown (host emulation)."""
    resident = _resident_threads(kernel, ACC_THREADS)
    if resident is None:
        return target
    best, best_cost = target, None
    for n in range(max(SLICE_MIN, target // 2), max(SLICE_MIN, 3 * target // 2) + 1):
        cost = -(-(-(-bound // n)) // resident) * n
        if best_cost is None or cost <= best_cost:
            best, best_cost = n, cost
    return best


def fold_length(m: int, kernel: Any) -> int:
    """Spill slots per thread in a fold level over ``m`` slots: :data:`FOLD_LEN`, or fewer (down to
    :data:`FOLD_MIN`) when that leaves fewer groups than ``kernel`` has resident threads; each
    level's groups then fill the device and each thread's chain of additions is shorter."""
    resident = _resident_threads(kernel, ACC_THREADS)
    if resident is None:
        return FOLD_LEN
    return min(FOLD_LEN, max(FOLD_MIN, -(-m // resident)))


def pair_block() -> int:
    """Threads per block of the pair rounds: :data:`PAIR_THREADS`, or the build's -DDP_PAIR_BLOCK=N
    (msm_affine.cu lays the stage out for it; bench_msm.py's block-size builds)."""
    for opt in kernel_options():
        if opt.startswith("-DDP_PAIR_BLOCK="):
            return int(opt.partition("=")[2])
    return PAIR_THREADS


def pair_stage_bytes(group: Group) -> int:
    """Dynamic shared memory of a pair-round block: msm_affine.cu's stage, two buffers of two affine
    points a thread (G1 32 KiB, G2 64 KiB at 128 threads); 0 for a build without it
    (-DDP_G1_PAIR_STAGE=0 / -DDP_G2_PAIR_STAGE=0)."""
    if f"-DDP_{_suffix(group).upper()}_PAIR_STAGE=0" in kernel_options():
        return 0
    return 4 * 4 * group.limbs * pair_block()  # limbs: uint32 words of an affine point


def pair_threads(jobs: int, kernel: Any, dynamic: int = 0) -> tuple[int, int]:
    """(threads to launch, resident threads) for a pair round over at most ``jobs`` jobs with
    ``kernel`` and ``dynamic`` bytes of shared memory a block: enough whole waves of its resident
    threads for ``jobs`` at PAIR_K[1] jobs a thread, at most ``jobs`` / PAIR_K[0] threads (a whole
    number of blocks). The kernel picks its stride from the real job count (msm_affine.cu
    pair_stride), within these threads."""
    block = pair_block()
    resident = _resident_threads(kernel, block, dynamic) or _sm_count() * block
    waves = max(1, -(-jobs // (resident * PAIR_K[1])))
    threads = min(waves * resident, -(-jobs // PAIR_K[0]))
    return -(-threads // block) * block, resident


def _resident_threads(kernel: Any, block: int, dynamic: int = 0) -> int | None:
    """Threads of ``kernel`` in blocks of ``block`` that the device holds at once, from its
    register count (64 Ki registers and 2048 threads per SM, allocated per warp in units of 256)
    and its shared memory, static plus ``dynamic`` bytes a block (228 KiB per SM, 1 KiB of it
    reserved per block: sm_90); None when the kernel does not say."""
    regs = getattr(kernel, "num_regs", None)
    if not isinstance(regs, int) or regs <= 0:
        return None
    per_warp = -(-regs * 32 // 256) * 256
    warps = -(-block // 32)
    blocks = min(65536 // (per_warp * warps), 2048 // block, 32)
    static = getattr(kernel, "shared_size_bytes", 0)
    shared = (static if isinstance(static, int) else 0) + dynamic
    if shared > 0:
        blocks = min(blocks, SHARED_PER_SM // (shared + 1024))
    return _sm_count() * max(blocks, 1) * block


def reduce_geometry(nb: int, nw: int, kernel: Any = None) -> tuple[int, int, int, int]:
    """(seg, nseg, threads, groups) of the window reduction over ``nw`` windows of ``nb`` buckets (a
    power of two): seg buckets per first-level thread (nseg = nb / seg segments per window), then
    groups blocks of threads per window in the second level (:data:`REDUCE_GROUPS`, more for few
    windows: :data:`REDUCE_BLOCKS`), each thread over nseg / (groups * threads) segments (every
    count a power of two, so each divides the next). seg is
    :data:`REDUCE_SEG`, or smaller (down to 2) where the first level would not fill half the
    device's resident threads of ``kernel`` (the first-level kernel; None: REDUCE_SEG): small MSMs
    then wait on shorter serial chains."""
    seg = min(REDUCE_SEG, nb)
    resident = _resident_threads(kernel, REDUCE_THREADS) if kernel is not None else None
    while resident is not None and seg > 2 and 2 * (nw * nb // seg) < resident:
        seg //= 2
    nseg = nb // seg
    threads = min(TREE_THREADS, nseg)
    few = 1 << max(0, (REDUCE_BLOCKS // max(nw, 1)).bit_length() - 1)  # a power of two
    groups = min(max(REDUCE_GROUPS, few), nseg // threads)
    return seg, nseg, threads, groups


def _pair_rounds(mod: Any, group: Group, min_total: list[int], entries: "cupy.ndarray", bases: "cupy.ndarray",
                 cursor: "cupy.ndarray", counts: "cupy.ndarray", rows: int, bound: int,
                 scratch: MsmScratch) -> tuple[Any, Any, list]:
    """Queue len(``min_total``) pair rounds of msm_affine.cu on the current stream, after the sort;
    round r runs only if the sort's entries number at least min_total[r] (msm_pair_plan decides on
    the device, so nothing waits on the host). Returns (plan, sets, buffers): the arguments that
    make msm_accumulate_sel read the last round that ran (set 0: the sort's entries and the bases)
    and the rounds' buffers, which the device finds only by their addresses in ``sets``: the
    caller keeps them alive until the accumulation has run.

    Each round halves every bucket (counts_out = ceil(counts / 2)); ``bound`` caps the entries
    of its input (nw * n for the sort's) and the output holds at most (bound + min(rows, bound))
    / 2: an odd row leaves one entry unpaired. Only scratch buffers are written, two of each kind
    used in turn: the sort's may be a :class:`DigitSort` that other MSMs read.
    """
    import cupy

    u32 = np.uint32
    rounds = len(min_total)
    # Every round's buffers first, so that their addresses (the sets msm_accumulate_sel reads)
    # and the thresholds go up in one copy. Each round's entries, cursor, counts and jobs are its
    # own (the side stream builds round r + 1's while round r's pairs read them); the sums
    # alternate between two buffers, written and read on the calling stream only.
    sides = []
    out_bound = bound
    for r in range(rounds):
        out_bound = (out_bound + min(rows, out_bound)) // 2
        sides.append((out_bound, scratch.take(f"pair_entries_{r}", 2 * out_bound),
                      scratch.take(f"pair_points_{'ab'[r % 2]}", out_bound * group.limbs),
                      scratch.take(f"pair_cursor_{r}", rows), scratch.take(f"pair_counts_{r}", rows)))
    ptrs = [_ptr(a) for a in (entries, bases, cursor, counts)]
    for _, *arrays in sides:
        ptrs += [_ptr(a) for a in arrays]
    host = np.zeros(len(ptrs) + -(-rounds // 2), dtype=np.uint64)
    host[: len(ptrs)] = ptrs
    host[len(ptrs):].view(np.uint32)[:rounds] = min_total
    sets = scratch.take("pair_sets", host.size, np.uint64)
    _upload(sets, host)
    need = sets[len(ptrs):].view(np.uint32)
    plan = scratch.take("pair_plan", 1)
    mod.get_function("msm_pair_plan")((1,), (32,), (cursor, counts, u32(rows), need, u32(rounds), plan))
    pairs = mod.get_function(f"msm_pairs_{_suffix(group)}")
    stage, block = pair_stage_bytes(group), pair_block()
    if stage > 48 * 1024 and hasattr(pairs, "max_dynamic_shared_size_bytes"):
        pairs.max_dynamic_shared_size_bytes = stage  # above 48 KiB a launch must opt in
    make_jobs = mod.get_function("msm_pair_jobs")
    halve = mod.get_function("msm_pair_counts")
    # The job lists depend on the sort alone, not on any sums: the side stream builds them all,
    # one round ahead of the pairs, which wait for their round's list only.
    main, side = cupy.cuda.get_current_stream(), scratch.side_stream()
    sorted_ = cupy.cuda.Event()
    sorted_.record(main)
    side.wait_event(sorted_)
    points, held = bases, []
    for r, (out_bound, entries_out, points_out, cursor_out, counts_out) in enumerate(sides):
        jobs = scratch.take(f"pair_jobs_{r}", 2 * out_bound)
        held.append(jobs)
        with side:
            halve((-(-rows // 256),), (256,), (plan, u32(r), counts, counts_out, u32(rows)))
            cupy.cumsum(counts_out, dtype=cupy.uint32, out=cursor_out)  # garbage when the round is skipped: unread
            cursor_out -= counts_out  # exclusive: each row's first slot
            make_jobs((min(-(-bound // 256), _sm_count() * PAIR_JOBS_BLOCKS_PER_SM),), (256,),
                      (plan, u32(r), entries, cursor, counts, cursor_out, u32(rows), jobs, entries_out))
            listed = cupy.cuda.Event()
            listed.record(side)
        main.wait_event(listed)
        threads, resident = pair_threads(out_bound, pairs, stage)
        pairs((threads // block,), (block,),
              (plan, u32(r), jobs, points, cursor_out, counts_out, u32(rows), u32(resident), u32(PAIR_K[0]),
               u32(PAIR_K[1]), points_out), shared_mem=stage)
        entries, points, cursor, counts, bound = entries_out, points_out, cursor_out, counts_out, out_bound
    return plan, sets[: len(ptrs)], [a for _, *arrays in sides for a in arrays] + held


def _ptr(a: Any) -> int:
    """Device address of a CuPy array (host address of a NumPy one: the tests' emulated kernels)."""
    return int(a.data.ptr) if hasattr(a.data, "ptr") else int(a.ctypes.data)


def _upload(dst: Any, host: np.ndarray) -> None:
    """Copy ``host`` into the device array ``dst`` on the current stream (a NumPy ``dst``: in place)."""
    if isinstance(dst, np.ndarray):
        dst[: host.size] = host
    else:
        dst[: host.size].set(host)


@functools.lru_cache(maxsize=None)
def _sm_count_of(device: int) -> int:
    import cupy

    rt = cupy.cuda.runtime
    return int(rt.deviceGetAttribute(rt.cudaDevAttrMultiProcessorCount, device))


def _sm_count() -> int:
    """Streaming multiprocessors of the current device."""
    import cupy

    return _sm_count_of(cupy.cuda.runtime.getDevice())


def xyzz_to_affine(group: Group, words: np.ndarray) -> list[Affine]:
    """Convert (k, 32) G1 or (k, 64) G2 XYZZ Montgomery limb rows to affine points (ZZ = 0: None),
    with one field inversion in all (:func:`distprove.curve.xyzz_to_affine`)."""
    vals = bn254.ints_from_limbs(words.reshape(-1, 8))
    if group is bn254.G1:
        rows = [vals[i : i + 4] for i in range(0, len(vals), 4)]
    else:
        rows = [[(vals[j], vals[j + 1]) for j in range(i, i + 8, 2)] for i in range(0, len(vals), 8)]
    return curve.xyzz_to_affine(group, rows)
