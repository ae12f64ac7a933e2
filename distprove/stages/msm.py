"""Backend-independent MSM logic: window count, signed-digit recoding, Horner combine, parts.

This is the contract of DESIGN.md "MSM: windows and digits". Every backend recodes scalars
with exactly these digits, so the per-window sums S_w of the CPU and the GPU are the same
points and window ranges computed anywhere can be combined with :func:`combine`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from distprove import bn254, curve
from distprove.bn254 import Affine, Group

log = logging.getLogger(__name__)

SCALAR_BITS = 256
MIN_WINDOW = 2
MAX_WINDOW = 24


def _check_width(c: int) -> None:
    if not MIN_WINDOW <= c <= MAX_WINDOW:
        raise ValueError(f"window width c={c} outside [{MIN_WINDOW}, {MAX_WINDOW}]")


def num_windows(c: int) -> int:
    """W(c) = ceil(256 / c): the number of c-bit windows covering a 256-bit scalar."""
    _check_width(c)
    return -(-SCALAR_BITS // c)


def signed_digits(scalar: int, c: int) -> list[int]:
    """Signed base-2^c digits d_0..d_{W-1} of ``scalar``, low window first.

    Each digit lies in [-2^(c-1), 2^(c-1) - 1] and sum_w d_w * 2^(c*w) == scalar. Every scalar
    below r (< 2^254) has such digits; a scalar whose top window would carry out raises
    ValueError.
    """
    if not 0 <= scalar < 1 << SCALAR_BITS:
        raise ValueError("scalar must lie in [0, 2^256)")
    w_count = num_windows(c)
    mask = (1 << c) - 1
    half = 1 << (c - 1)
    digits = []
    carry = 0
    for w in range(w_count):
        d = ((scalar >> (c * w)) & mask) + carry
        if d >= half:
            digits.append(d - (1 << c))
            carry = 1
        else:
            digits.append(d)
            carry = 0
    if carry:
        raise ValueError(f"scalar {scalar:#x} does not fit W({c}) signed {c}-bit digits")
    return digits


def signed_digits_array(scalars: np.ndarray, c: int) -> np.ndarray:
    """Vectorised :func:`signed_digits` over an (n, 8) uint32 limb array; returns (n, W) int32.

    Raises ValueError if some scalar's top window carries out (impossible for scalars < r).
    """
    limbs = np.ascontiguousarray(scalars, dtype="<u4").reshape(-1, 8)
    w_count = num_windows(c)
    n = limbs.shape[0]
    # Two spare zero limbs so a window's two-limb read never runs off the end.
    padded = np.zeros((n, 10), dtype=np.uint64)
    padded[:, :8] = limbs
    mask = np.uint64((1 << c) - 1)
    half = 1 << (c - 1)
    full = 1 << c
    out = np.empty((n, w_count), dtype=np.int32)
    carry = np.zeros(n, dtype=np.int64)
    for w in range(w_count):
        bit = c * w
        li, sh = divmod(bit, 32)
        pair = padded[:, li] | (padded[:, li + 1] << np.uint64(32))
        d = ((pair >> np.uint64(sh)) & mask).astype(np.int64) + carry
        carry = (d >= half).astype(np.int64)
        out[:, w] = d - carry * full
    if carry.any():
        raise ValueError(f"scalar {int(np.argmax(carry))} does not fit W({c}) signed {c}-bit digits")
    return out


def default_window(n: int, group: Group) -> int:
    """A window width for the CPU Pippenger over ``n`` points of ``group``.

    Minimises W(c) * (n + 2^(c-1)): one bucket addition per point and window against the
    running-sum reduction's two additions per bucket, which are batched across windows and
    measured at about half the cost of a bucket addition (in G1 and G2 alike), capped at 16.
    ``group`` is accepted for the interface; the CPU choice does not depend on it.
    """
    if n < 0:
        raise ValueError("n must be non-negative")
    best = MIN_WINDOW
    best_cost = None
    for c in range(MIN_WINDOW, 17):
        cost = num_windows(c) * (n + (1 << (c - 1)))
        if best_cost is None or cost < best_cost:
            best, best_cost = c, cost
    return best


def is_live(scalars: Any) -> Any:
    """Per scalar (standard-form limbs on the last axis: (n, 8), or (G, n, 8) for a group; NumPy or
    CuPy): neither 0 nor 1, so it reaches a GPU bucket (zeros are skipped, ones summed apart)."""
    return scalars[..., 1:].any(axis=-1) | (scalars[..., 0] > 1)


def live_fraction(scalars: np.ndarray, samples: int = 4096) -> float:
    """Fraction of the scalars (as :func:`is_live` takes them) other than 0 and 1, from every
    ``ceil(n / samples)``-th row: the share of an MSM's points that reach a bucket on the GPU
    (1.0 for no scalars)."""
    return float(live_fractions(scalars[None], samples)[0])


def live_fractions(stack: Any, samples: int = 4096) -> Any:
    """:func:`live_fraction` of each proof of a (G, n, 8) stack in one pass over the same rows, on
    the stack's device (NumPy or CuPy): an array of G fractions (1.0 where n is 0)."""
    n = stack.shape[1]
    if n == 0:
        return stack.sum(axis=(1, 2)) * 0 + 1.0  # G ones, on the stack's device
    return is_live(stack[:, :: -(-n // samples)]).mean(axis=1)


def split_windows(w_count: int, parts: int) -> list[tuple[int, int]]:
    """Split windows [0, w_count) into ``parts`` contiguous non-empty ranges of near-equal size.

    Returns fewer ranges when parts > w_count (never an empty range).
    """
    if w_count < 1 or parts < 1:
        raise ValueError("need at least one window and one part")
    parts = min(parts, w_count)
    base, extra = divmod(w_count, parts)
    ranges = []
    lo = 0
    for i in range(parts):
        hi = lo + base + (1 if i < extra else 0)
        ranges.append((lo, hi))
        lo = hi
    return ranges


def sums_in_parts(
    group: Group,
    run: Callable[[int, int, int, int], list[Affine]],
    lo: int,
    hi: int,
    n: int,
    too_big: type[BaseException],
    name: str = "MSM",
    plan: Sequence[tuple[int, int, int, int]] | None = None,
    ran: list[tuple[int, int, int, int]] | None = None,
) -> list[Affine]:
    """Window sums S_lo..S_{hi-1} of an MSM of ``n`` points, in smaller parts where a part fails.

    ``run(lo, hi, start, stop)`` gives the sums of windows [lo, hi) over points [start, stop)
    (bases and scalars sliced alike). When it raises ``too_big`` (a device out of memory) the
    part is halved and each half run the same way: first the window range, down to one window
    (the halves' sums are concatenated: a window range's memory, bucket rows included, scales
    with its window count), then the point range (the halves' sums are added as points: window
    sums are linear in the points, and each half with window 0 carries its own scalar-1 sum). A
    single window of a single point that fails raises ``too_big``. Logged at INFO (ranges only).

    ``plan``: parts (lo, hi, start, stop) that tile windows [lo, hi) x points [0, n), e.g. what
    ``ran`` received last time, run instead of the whole (each still split if it fails), their
    sums added window by window. ``ran``, if given, receives the parts that ran, in order.
    """
    ran = [] if ran is None else ran

    def part(lo: int, hi: int, start: int, stop: int) -> list[Affine]:
        try:
            sums = run(lo, hi, start, stop)
            ran.append((lo, hi, start, stop))
            return sums
        except too_big:
            if hi - lo == 1 and stop - start <= 1:
                raise
        # split outside the handler: its traceback would keep the failed attempt's buffers alive
        if hi - lo > 1:
            mid = (lo + hi) // 2
            log.info("%s: windows [%d, %d) of points [%d, %d) did not fit; running windows [%d, %d) and [%d, %d) apart",
                     name, lo, hi, start, stop, lo, mid, mid, hi)
            return part(lo, mid, start, stop) + part(mid, hi, start, stop)
        mid = (start + stop) // 2
        log.info("%s: window %d of points [%d, %d) did not fit; running points [%d, %d) and [%d, %d) apart",
                 name, lo, start, stop, start, mid, mid, stop)
        first, second = part(lo, hi, start, mid), part(lo, hi, mid, stop)
        return [bn254.add(group, p, q) for p, q in zip(first, second)]

    if not plan:
        return part(lo, hi, 0, n)
    if not _tiles(plan, lo, hi, n):
        raise ValueError(f"{name}: the parts {list(plan)} do not tile windows [{lo}, {hi}) x points [0, {n})")
    total: list[Affine] = [None] * (hi - lo)
    for p_lo, p_hi, start, stop in plan:
        for w, point in enumerate(part(p_lo, p_hi, start, stop), p_lo):
            total[w - lo] = bn254.add(group, total[w - lo], point)
    return total


def _tiles(parts: Sequence[tuple[int, int, int, int]], lo: int, hi: int, n: int) -> bool:
    """Whether the parts (lo, hi, start, stop) cover windows [lo, hi) x points [0, n) once each."""
    for w in range(lo, hi):
        edge = 0
        for start, stop in sorted((a, b) for p_lo, p_hi, a, b in parts if p_lo <= w < p_hi):
            if start != edge or stop <= start:
                return False
            edge = stop
        if edge != n:
            return False
    return all(lo <= p_lo < p_hi <= hi for p_lo, p_hi, _, _ in parts)


def check_window_sums(sums: Mapping[int, Affine], c: int, allow_missing: bool = False) -> None:
    """Raise ValueError unless ``sums`` has windows of [0, W(c)) only, all of them unless ``allow_missing``."""
    w_count = num_windows(c)
    bad = [w for w in sums if not 0 <= w < w_count]
    if bad:
        raise ValueError(f"window indices {sorted(bad)} outside [0, {w_count}) for c={c}")
    if not allow_missing:
        missing = [w for w in range(w_count) if w not in sums]
        if missing:
            raise ValueError(f"window sums missing for windows {missing} (c={c})")


def combine(
    group: Group, sums: Mapping[int, Affine], c: int, allow_missing: bool = False
) -> Affine:
    """Horner over window sums: sum_w 2^(c*w) * S_w, with acc = acc * 2^c + S_w from the top down.

    ``sums`` maps window index -> S_w (affine, None = infinity). Every window in [0, W(c))
    must be present unless ``allow_missing`` (missing windows then count as infinity).
    Computed by :func:`distprove.curve.combination` (gmpy2 when installed).
    """
    check_window_sums(sums, c, allow_missing)
    return curve.to_affine(group, [curve.combination(group, [(c, sums)])])[0]


def add_partials(group: Group, partials: Sequence[Affine]) -> Affine:
    """The sum of partial MSM results (affine, None = infinity): the MSM over the union of the
    point ranges they were computed over (points mode's reducer)."""
    total: Affine = None
    for p in partials:
        total = bn254.add(group, total, p)
    return total


def as_window_sums(point: Affine, c: int) -> dict[int, Affine]:
    """A whole MSM's point as window sums of width ``c`` whose :func:`combine` is that point: the
    point in window 0, infinity in the others."""
    return {w: (point if w == 0 else None) for w in range(num_windows(c))}
