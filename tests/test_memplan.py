"""The device memory plan (distprove.memplan): within the budget at every size from 2^12 to 2^28
points, monotonic in the budget, one clear error below the smallest plan, and the GPU MSM's
buffer formula behind it."""

from __future__ import annotations

import pytest

from distprove.backends.gpu import msm as gpu_msm
from distprove import bn254
from distprove.groth16 import MSM_NAMES
from distprove.memplan import (GPU_OVERHEAD, MAX_CHUNK, MIN_CHUNK, STREAM_ORDER, KeyDims, MemoryBudgetError,
                               WorkerPlan, gpu_msm_scratch, minimum_bytes, ntt_bytes, plan_memory)
from distprove.stages.msm import num_windows

GIB = 1 << 30
SIZES = range(12, 29, 2)
BUDGETS = [1 << 26, 1 << 28, 1 * GIB, 4 * GIB, 12 * GIB, 24 * GIB, 40 * GIB, 80 * GIB, 140 * GIB]


def dims(lg: int) -> KeyDims:
    """A key of 2^lg domain points and as many signals, its CSRs about 3 terms a signal."""
    n = 1 << lg
    return KeyDims(n - 1, 2, n, 3 * n * 36 + 8 * (n + 1))


def plans(lg: int) -> list[tuple[int, WorkerPlan | None]]:
    out: list[tuple[int, WorkerPlan | None]] = []
    for budget in BUDGETS:
        try:
            out.append((budget, plan_memory(dims(lg), budget, 64, overhead=GPU_OVERHEAD)))
        except MemoryBudgetError:
            out.append((budget, None))
    return out


@pytest.mark.parametrize("lg", SIZES)
def test_every_plan_is_within_its_budget(lg: int) -> None:
    for budget, plan in plans(lg):
        if plan is None:
            assert minimum_bytes(dims(lg), overhead=GPU_OVERHEAD) > budget
            continue
        assert plan.total <= budget
        assert 1 <= plan.max_group <= 64 and plan.in_flight in (1, 2)
        assert set(plan.resident) | set(plan.streamed) == set(MSM_NAMES)
        assert not set(plan.resident) & set(plan.streamed)
        if plan.streamed:
            assert MIN_CHUNK <= plan.chunk <= MAX_CHUNK
            # streamed in STREAM_ORDER: the streamed ones are a prefix of it
            assert set(plan.streamed) == set(STREAM_ORDER[:len(plan.streamed)])
        assert plan.parts["chunks"] == 2 * plan.chunk * (128 if "B2" in plan.streamed else 64 if plan.streamed else 0)


@pytest.mark.parametrize("lg", SIZES)
def test_a_larger_budget_never_plans_less(lg: int) -> None:
    """More budget: no more arrays streamed, and at the same streaming no smaller chunk, group or
    fewer groups in flight; once a budget fits, every larger one does."""
    fitted = [(b, p) for b, p in plans(lg) if p is not None]
    assert [b for b, _ in fitted] == [b for b in BUDGETS if b >= fitted[0][0]] if fitted else True
    for (_, small), (_, large) in zip(fitted, fitted[1:]):
        assert len(large.streamed) <= len(small.streamed)
        if large.streamed == small.streamed and large.in_flight == small.in_flight and small.chunk:
            assert large.chunk == 0 or large.chunk >= small.chunk
            if large.chunk == small.chunk:
                assert large.max_group >= small.max_group


def test_small_keys_fit_whole_and_resident_with_full_groups() -> None:
    plan = plan_memory(dims(12), 24 * GIB, 64, overhead=GPU_OVERHEAD)
    assert plan.streamed == () and plan.chunk == 0 and plan.max_group == 64 and plan.in_flight == 2
    assert not any(plan.chunked(which) for which in MSM_NAMES)


def test_a_tight_budget_streams_b2_first_then_more() -> None:
    d = dims(24)
    roomy = plan_memory(d, 80 * GIB, 1)
    assert roomy.streamed == ()
    tight = plan_memory(d, 12 * GIB, 1)
    assert tight.streamed[:1] == ("B2",) or "B2" in tight.streamed
    assert tight.chunked("B2") and tight.streams("B2")
    assert tight.total <= 12 * GIB


def test_chunking_resident_msms_before_streaming() -> None:
    """A budget that holds the arrays but not the whole MSMs' scratch runs resident MSMs in chunks."""
    d = dims(24)
    plan = plan_memory(d, 24 * GIB, 1)
    assert plan.streamed == () and 0 < plan.chunk < d.domain_size
    assert all(plan.chunked(which) for which in MSM_NAMES)


def test_the_group_grows_with_the_budget_up_to_the_wanted_size() -> None:
    d = dims(20)
    groups = [plan_memory(d, b, 64).max_group for b in (8 * GIB, 24 * GIB, 80 * GIB, 1 << 40)]
    assert groups == sorted(groups) and groups[-1] == 64 and groups[0] < 64


def test_below_the_smallest_plan_one_clear_error_naming_the_budget_and_the_minimum() -> None:
    d = dims(26)
    need = minimum_bytes(d)
    with pytest.raises(MemoryBudgetError) as err:
        plan_memory(d, need - 1, 8)
    text = str(err.value)
    assert f"({need - 1} bytes)" in text and f"({need} bytes)" in text and "smallest plan" in text
    assert plan_memory(d, need, 8).max_group == 1  # exactly the minimum fits
    with pytest.raises(MemoryBudgetError, match="must be positive"):
        plan_memory(d, 0)


def test_the_msm_scratch_is_the_gpu_msms_buffer_formula() -> None:
    for which, group in (("A", bn254.G1), ("B2", bn254.G2)):
        for n in (1 << 12, 1 << 20):
            c = gpu_msm.pick_window(n, group)
            w = num_windows(c)
            out = (w + 1) * 4 * gpu_msm._xyzz_words(group)
            assert gpu_msm_scratch(which, n, 1) == gpu_msm.group_bytes(group, n, c, 0, w, 1) + out
        assert gpu_msm_scratch(which, 1 << 16, 8) > gpu_msm_scratch(which, 1 << 16, 1)
        assert gpu_msm_scratch(which, 1 << 18, 1) > gpu_msm_scratch(which, 1 << 16, 1)
    assert gpu_msm_scratch("A", 0, 3) == 0
    assert ntt_bytes(1 << 10, 2) == 4 * 32 * 2048


def test_describe_names_the_resident_and_streamed_arrays() -> None:
    plan = plan_memory(dims(24), 12 * GIB, 16)
    text = plan.describe()
    assert "streamed bases: " + ", ".join(plan.streamed) in text
    assert f"chunk: {plan.chunk} points" in text and f"max proofs per group: {plan.max_group}" in text


def test_the_issue_budgets_fit_their_keys() -> None:
    """2^24 in 12 GiB, 2^25 in 16 GiB and 2^26 (a 29.7 GB key) in 24 GiB, the CUDA context's share
    counted: the H stage holds the gathered vectors and one scratch (the NTTs run in place)."""
    for lg, budget in ((24, 12 * GIB), (25, 16 * GIB), (26, 24 * GIB)):
        plan = plan_memory(dims(lg), budget, 64, overhead=GPU_OVERHEAD)
        assert plan.total <= budget and plan.parts["ntt"] == 4 * 32 * (1 << lg), (lg, plan.describe())
    assert minimum_bytes(dims(26), overhead=GPU_OVERHEAD) < 20 * GIB
