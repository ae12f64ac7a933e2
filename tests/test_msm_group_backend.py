"""Backend.msm_start_proofs: several proofs' MSMs of one key at once.

The CPU backend's per-proof loop is the reference. The GPU backend's grouping logic (classes of
proofs by MSM width and windows, stacked scalars, parts sized by free memory, shared digit sorts,
the per-proof fallbacks) runs on test_msm_oom's fake CuPy, with grouped MSMs computed on the CPU;
the grouped kernels themselves are checked in test_kernels_host.py (emulated) and
tests/gpu/test_msm_gpu.py (device).
"""

from __future__ import annotations

from typing import Any

import dask
import numpy as np
import pytest

from distprove import bn254
from distprove.backends.base import MsmJob
from distprove.groth16 import MSM_NAMES, msm_group
from distprove.backends.cpu import CpuBackend
from distprove.backends.gpu import msm as gpu_msm
from distprove.keystore import open_key
from distprove.stages.msm import combine, num_windows

from test_msm_oom import _OOM, MINI_ZKEY, _backend, _Buffer, _cpu_sums, _Device


def _proof_jobs(key: Any, proofs: int, widths: dict[str, int] | None = None, seed: int = 1) -> list[dict[str, MsmJob]]:
    """``proofs`` proofs' five MSMs over random witnesses (w[0] = 1, zeros and ones among them) and
    random H scalars; ``widths`` per MSM (default 5), proof p's A, B1, B2 one wider when p is odd
    and ``widths`` is None (live widths differ between witnesses)."""
    rng = np.random.default_rng(seed)

    def vector(n: int) -> np.ndarray:
        vals = [int.from_bytes(rng.bytes(32), "little") % bn254.R for _ in range(n)]
        for i in range(0, n, 3):
            vals[i] = int(rng.integers(2))
        vals[0] = 1
        return bn254.limbs_from_ints(vals)

    out = []
    for p in range(proofs):
        w, hs = vector(key.n_vars), vector(key.domain_size)
        jobs = {}
        for which in MSM_NAMES:
            c = (widths or {}).get(which, 5 + (p % 2 if widths is None and which in ("A", "B1", "B2") else 0))
            jobs[which] = MsmJob(hs if which == "H" else w, c, 0, num_windows(c))
        out.append(jobs)
    return out


def _reference(key: Any, jobs: list[dict[str, MsmJob]]) -> list[dict[str, list]]:
    cpu = CpuBackend()
    return [{which: cpu.msm_windows(key, which, *proof[which]) for which in MSM_NAMES} for proof in jobs]


def test_cpu_reference_is_the_per_proof_phase() -> None:
    """The CPU backend's msm_start_proofs is msm_start_all proof by proof; proofs naming different
    MSMs are refused."""
    key = open_key(MINI_ZKEY)
    jobs = _proof_jobs(key, 3)
    cpu = CpuBackend()
    assert cpu.msm_start_proofs(key, jobs)() == [cpu.msm_start_all(key, proof)() for proof in jobs]
    with pytest.raises(ValueError, match="proof 1 names"):
        cpu.msm_start_proofs(key, [jobs[0], {"A": jobs[1]["A"]}])


def _combined(key: Any, jobs: list[dict[str, MsmJob]]) -> list[dict]:
    return [{which: combine(msm_group(which), dict(enumerate(sums[which])), proof[which].c) for which in MSM_NAMES}
            for proof, sums in zip(jobs, _reference(key, jobs))]


def test_cpu_combined_is_the_combine_of_each_proofs_sums() -> None:
    """msm_start_combined (the reference): per proof {which: combine(its window sums)}; a job that
    is not a whole MSM is refused."""
    key = open_key(MINI_ZKEY)
    jobs = _proof_jobs(key, 3)
    cpu = CpuBackend()
    assert cpu.msm_start_combined(key, jobs)() == _combined(key, jobs)
    part = dict(jobs[1], H=jobs[1]["H"]._replace(hi=1))
    with pytest.raises(ValueError, match="proof 1's MSM H covers windows"):
        cpu.msm_start_combined(key, [jobs[0], part])


def _affine_rows(group: bn254.Group, points: list) -> np.ndarray:
    """Affine points as the (k, limbs) standard-form rows a combined grouped MSM reads back."""
    return bn254.points_to_limbs(group, points, mont=False).reshape(len(points), -1)


class _GroupDevice(_Device):
    """_Device with the grouped MSM functions: each grouped start and sort recorded."""

    def __init__(self, free: int = 1 << 40, **kw: Any) -> None:
        super().__init__(**kw)
        self.free = free
        self.group_starts: list[tuple[str, int, int, bool]] = []  # (group, proofs, c, shared sort)
        self.group_sorts: list[tuple[int, int]] = []  # (proofs, c)
        self.combined: list[bool] = []  # each grouped start's combined flag

    def install(self, monkeypatch: pytest.MonkeyPatch, cp: Any) -> None:
        super().install(monkeypatch, cp)
        cp.stack = np.stack
        cp.ascontiguousarray = np.ascontiguousarray
        monkeypatch.setattr(gpu_msm, "msm_windows_group_start", self.group_start)
        monkeypatch.setattr(gpu_msm, "free_device_bytes", lambda: self.free)
        real_sort = self.sort

        def sort(scalars, c, lo, hi, stream):  # noqa: ANN001, ANN202
            if scalars.ndim == 3:
                self.group_sorts.append((scalars.shape[0], c))
                return (id(scalars), scalars.shape[0])
            return real_sort(scalars, c, lo, hi, stream)

        monkeypatch.setattr(gpu_msm, "sort_digits", sort)

    def group_start(self, group, bases, scalars, c, lo, hi, scratch, stream, digits=None, max_proofs=None,  # noqa: ANN001, ANN201
                    combined=False):
        assert scalars.ndim == 3 and scalars.flags.c_contiguous and len(scalars) <= (max_proofs or len(scalars))
        if digits is not None:
            assert digits[1] == len(scalars)
        self.group_starts.append((group.name, len(scalars), c, digits is not None))
        self.combined.append(combined)
        if len(self.group_starts) == self.fail_start:
            self.fail_start = None  # the per-proof starts after it fit
            raise _OOM("out of memory starting a group")
        sums = [_cpu_sums(group, bases, s, c, lo, hi, False) for s in scalars]
        buf = _Buffer()


        def wait() -> list:
            if self.fail_wait:
                self.fail_wait = False  # the per-proof phases after it fit
                raise _OOM("out of memory waiting")
            if combined:  # the device's rows: each proof's combined point, affine in standard form
                return _affine_rows(group, [combine(group, dict(enumerate(s)), c) for s in sums])
            return sums

        wait.buffer = buf
        return wait


@pytest.mark.parametrize("proofs", [2, 3, 5])
def test_gpu_groups_proofs_by_width(monkeypatch: pytest.MonkeyPatch, proofs: int) -> None:
    """Proofs of equal widths run as one grouped MSM per kind (A, B1, B2 sharing one grouped sort of
    the stacked witnesses); proofs whose witness widths differ form one group per width. Every
    proof's sums are the CPU's."""
    key = open_key(MINI_ZKEY)
    device = _GroupDevice()
    be = _backend(monkeypatch, device)
    jobs = _proof_jobs(key, proofs)
    assert be.msm_start_proofs(key, jobs)() == _reference(key, jobs)
    odd, even = proofs // 2, proofs - proofs // 2
    want = []
    for which in MSM_NAMES:
        sizes = [(even, 5), (odd, 6)] if which in ("A", "B1", "B2") else [(proofs, 5)]
        want += [(msm_group(which).name, g, c, which in ("A", "B1", "B2")) for g, c in sizes]
    assert sorted(device.group_starts) == sorted(want)
    assert sorted(device.group_sorts) == sorted([(even, 5), (odd, 6)])
    assert device.starts == [] and device.calls == []


def test_gpu_group_runs_in_equal_parts_when_memory_is_short(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short of memory for the whole group, A, B1 and B2 run in equal parts (the G2 MSM's size),
    each part with its own shared sort."""
    key = open_key(MINI_ZKEY)
    jobs = _proof_jobs(key, 5, widths={})
    one = max(gpu_msm.group_bytes(bn254.G2, key.n_vars, 5, 0, num_windows(5), 1),
              gpu_msm.group_bytes(bn254.G1, key.domain_size, 5, 0, num_windows(5), 1))
    device = _GroupDevice(free=int(3.5 * one / gpu_msm.GROUP_MEMORY_SHARE))  # 3 proofs a part, so 5 run as 3 + 2
    be = _backend(monkeypatch, device)
    assert be.msm_start_proofs(key, jobs)() == _reference(key, jobs)
    assert sorted(g for _, g, _, shared in device.group_starts if shared) == [2, 2, 2, 3, 3, 3]  # A, B1, B2
    assert all(g in (2, 3, 5) for _, g, _, _ in device.group_starts)  # C and H: parts of their own size
    assert sorted(device.group_sorts) == [(2, 5), (3, 5)]


@pytest.mark.parametrize("fail", [1, 4, "wait"])
def test_gpu_group_out_of_memory_runs_proof_by_proof(monkeypatch: pytest.MonkeyPatch, fail: int | str) -> None:
    """Out of memory starting a grouped MSM (the first, a later one) or waiting: the device is
    synchronised, the rebuildable buffers freed, and each proof's MSMs run through its own phase."""
    key = open_key(MINI_ZKEY)
    device = _GroupDevice(fail_start=fail if isinstance(fail, int) else None, fail_wait=fail == "wait")
    be = _backend(monkeypatch, device)
    jobs = _proof_jobs(key, 3)
    assert be.msm_start_proofs(key, jobs)() == _reference(key, jobs)
    assert be.cp.syncs >= 1 and be.cp.frees >= 1
    assert len(device.starts) == 3 * len(MSM_NAMES)  # then each proof's overlapped phase


def test_gpu_constant_work_and_single_proofs_take_the_per_proof_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Constant-work mode and a single proof never group: each proof's overlapped phase."""
    key = open_key(MINI_ZKEY)
    device = _GroupDevice()
    be = _backend(monkeypatch, device)
    jobs = _proof_jobs(key, 2)
    with dask.config.set({"distprove.msm.constant-work": True}):
        assert be.msm_start_proofs(key, jobs)() == [
            {which: CpuBackend().msm_windows(key, which, *proof[which], constant_work=True) for which in MSM_NAMES}
            for proof in jobs]
    assert be.msm_start_proofs(key, jobs[:1])() == _reference(key, jobs[:1])
    assert device.group_starts == [] and len(device.starts) == 3 * len(MSM_NAMES)


@pytest.mark.parametrize("fail", [None, 1, "wait"])
def test_gpu_combined_groups_read_one_point_per_proof(monkeypatch: pytest.MonkeyPatch, fail: int | str | None) -> None:
    """msm_start_combined on the GPU: every grouped MSM starts combined (the device's affine rows),
    and the points are the CPU's combines; out of memory starting or
    waiting, the proofs run one by one and are combined on the host, with the same points."""
    key = open_key(MINI_ZKEY)
    device = _GroupDevice(fail_start=fail if isinstance(fail, int) else None, fail_wait=fail == "wait")
    be = _backend(monkeypatch, device)
    jobs = _proof_jobs(key, 3)
    assert be.msm_start_combined(key, jobs)() == _combined(key, jobs)
    assert device.combined and all(device.combined)
    if fail is None:
        assert device.starts == []


def test_default_assemble_group_is_the_host_assembly() -> None:
    """Backend.assemble_group's default (the CPU's): stages.assemble.assemble proof by proof, with
    each proof's own (r, s); as many blindings as proofs or ValueError."""
    import random
    import types

    from distprove.stages.assemble import VK_POINTS, assemble

    rng = random.Random()
    def point(group: bn254.Group) -> bn254.Affine:
        return bn254.mul(group, bn254.G1_GEN if group is bn254.G1 else bn254.G2_GEN, rng.randrange(1, bn254.R))
    vk = {name: point(bn254.G2 if name.endswith("2") else bn254.G1) for name in VK_POINTS}
    msm = [{which: point(msm_group(which)) for which in MSM_NAMES} for _ in range(2)]
    msm[1]["C"] = None
    blindings = [(rng.randrange(bn254.R), rng.randrange(bn254.R)), (0, 1)]
    key = types.SimpleNamespace(points=vk)
    assert CpuBackend().assemble_group(key, msm, blindings) == [assemble(vk, m, *rs) for m, rs in zip(msm, blindings)]
    with pytest.raises(ValueError, match="blindings"):
        CpuBackend().assemble_group(key, msm, blindings[:1])


@pytest.mark.parametrize("log_n, cap", [(3, 256), (12, 256), (13, 128), (14, 64), (20, 64)])
def test_gpu_groups_small_keys_in_larger_groups(monkeypatch: pytest.MonkeyPatch, log_n: int, cap: int) -> None:
    """Below 2^14 domain points a group holds up to 2^20 points (at most 256 proofs), else 64
    proofs; with the device short of memory, fewer (what one grouped G2 MSM of them takes)."""
    from types import SimpleNamespace

    from distprove.backends.gpu import backend as gpu_backend

    assert gpu_backend.group_cap(1 << log_n) == cap
    key = SimpleNamespace(n_vars=(1 << log_n) + 1, domain_size=1 << log_n, content_hash="k")
    be = _backend(monkeypatch, _GroupDevice(free=1 << 44))
    assert be.proofs_per_group(key) == cap
    c = be.window_width(key.n_vars, bn254.G2)
    three = gpu_msm.group_bytes(bn254.G2, key.n_vars, c, 0, num_windows(c), 3)
    be = _backend(monkeypatch, _GroupDevice(free=int(2.2 * three / gpu_msm.GROUP_MEMORY_SHARE)))
    assert 1 <= be.proofs_per_group(key) < cap
