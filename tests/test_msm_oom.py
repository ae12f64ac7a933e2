"""GPU out of memory in the MSM phase (issue 9), host-side logic on a fake CuPy.

The GPU backend's own code (``GpuBackend.msm_start_all``, ``msm_windows``, ``_retry_oom``) runs
against a stand-in for CuPy whose MSM functions compute on the CPU and raise CuPy's
out-of-memory error where a test says; ``stages.msm.sums_in_parts`` is checked on the CPU
backend's Pippenger. The real allocator is exercised by tests/gpu/test_reliability_gpu.py.
"""

from __future__ import annotations

import logging
import weakref
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import dask
import numpy as np
import pytest

from distprove import bn254
from distprove.backends.base import MsmJob
from distprove.backends.cpu import CpuBackend
from distprove.backends.cpu import msm as cpu_msm
from distprove.backends.gpu import msm as gpu_msm
from distprove.backends.gpu.backend import GpuBackend
from distprove.formats.wtns import read_wtns
from distprove.groth16 import MSM_NAMES, msm_group
from distprove.keystore import open_key
from distprove.prover import OVERLAP_ORDER, prove
from distprove.stages.msm import num_windows, sums_in_parts

DATA = Path(__file__).parent / "data"
MINI_ZKEY, MINI_WTNS = DATA / "mini" / "mini_0001.zkey", DATA / "mini" / "witness.wtns"
MUL_ZKEY = DATA / "mul_chain_1k" / "circuit_final.zkey"
BLINDING = (12345, 67890)


class _OOM(Exception):
    """Stands in for cupy.cuda.memory.OutOfMemoryError."""


class _DevArray(np.ndarray):
    """A host array with CuPy's ``set`` (what GpuBackend._array uploads with)."""

    def set(self, values: np.ndarray) -> None:
        self[...] = values


class _FakeCupy:
    """The parts of CuPy the GPU backend's MSM and memory logic touch."""

    uint32 = np.uint32

    def __init__(self) -> None:
        self.frees = 0
        self.syncs = 0
        fake = self

        class Device:
            def synchronize(self) -> None:
                fake.syncs += 1

        class Stream:
            def __init__(self, non_blocking: bool = False) -> None:
                pass

            def wait_event(self, event: object) -> None:
                pass

        class Event:
            def record(self, stream: object = None) -> None:
                pass

        self.cuda = SimpleNamespace(memory=SimpleNamespace(OutOfMemoryError=_OOM), Device=Device, Stream=Stream, Event=Event)

    def get_default_memory_pool(self) -> "_FakeCupy":
        return self

    def free_all_blocks(self) -> None:
        self.frees += 1

    def asarray(self, x: Any, dtype: Any = None) -> np.ndarray:
        return np.asarray(x, dtype=dtype)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype).view(_DevArray)


class _Scratch:
    """An MsmScratch stand-in: ``held`` while a started MSM uses it, until released."""

    def __init__(self) -> None:
        self.held = False

    def release(self) -> None:
        self.held = False


class _Buffer:
    """A started MSM's device output buffer (tracked by weak reference)."""


def _cpu_sums(group: bn254.Group, bases: np.ndarray, scalars: np.ndarray, c: int, lo: int, hi: int, cw: bool) -> list:
    return cpu_msm.msm_windows(group, bn254.points_from_limbs(group, bases), scalars, c, lo, hi, cw)


class _Device:
    """The fake GPU MSM functions: starts fail at the ``fail_start``-th call (1-based) or their
    waiters when ``fail_wait``; a synchronous call fails unless ``fits(windows, points)``. At the
    first synchronous call it records what the phase still held then."""

    def __init__(self, fail_start: int | None = None, fail_wait: bool = False,
                 fits: Callable[[int, int], bool] = lambda nw, n: True) -> None:
        self.fail_start, self.fail_wait, self.fits = fail_start, fail_wait, fits
        self.starts: list[str] = []
        self.sorts: list[tuple[int, int, int]] = []
        self.digits: dict[str, int | None] = {}
        self.calls: list[tuple[str, int, int, int]] = []
        self.buffers: list[weakref.ref] = []
        self.scratches: list[_Scratch] = []
        self.default = _Scratch()
        self.at_first_call: dict[str, int] | None = None
        self.cp: _FakeCupy | None = None

    def install(self, monkeypatch: pytest.MonkeyPatch, cp: _FakeCupy) -> None:
        self.cp = cp

        def new_scratch() -> _Scratch:
            s = _Scratch()
            self.scratches.append(s)
            return s

        monkeypatch.setattr(gpu_msm, "MsmScratch", new_scratch)
        monkeypatch.setattr(gpu_msm, "default_scratch", lambda: self.default)
        monkeypatch.setattr(gpu_msm, "msm_windows_start", self.start)
        monkeypatch.setattr(gpu_msm, "msm_windows", self.sync)
        monkeypatch.setattr(gpu_msm, "sort_digits", self.sort)

    def sort(self, scalars, c, lo, hi, stream):  # noqa: ANN001, ANN201
        """A shared digit sort: a tracked device buffer."""
        self.sorts.append((c, lo, hi))
        buf = _Buffer()
        self.buffers.append(weakref.ref(buf))
        return buf

    def start(self, group, bases, scalars, c, lo, hi, scratch, stream, constant_work=False, digits=None):  # noqa: ANN001, ANN201
        self.starts.append(group.name)
        self.digits[f"{len(self.starts)}"] = None if digits is None else id(digits)  # not the object: it must be freed
        scratch.held = True
        if len(self.starts) == self.fail_start:
            raise _OOM("out of memory starting")
        buf = _Buffer()
        self.buffers.append(weakref.ref(buf))
        sums = _cpu_sums(group, bases, scalars, c, lo, hi, constant_work)

        def wait() -> list:
            if self.fail_wait:
                raise _OOM("out of memory waiting")
            return sums

        wait.buffer = buf  # alive as long as the waiter
        wait.digits = digits  # as the real waiter holds a shared sort
        return wait

    def sync(self, group, bases, scalars, c, lo, hi, constant_work=False):  # noqa: ANN001, ANN201
        if self.at_first_call is None:
            self.at_first_call = {
                "live_buffers": sum(r() is not None for r in self.buffers),
                "held_scratch": sum(s.held for s in (*self.scratches, self.default)),
                "syncs": self.cp.syncs,
                "frees": self.cp.frees,
            }
        self.calls.append((group.name, lo, hi, len(bases)))
        if not self.fits(hi - lo, len(bases)):
            raise _OOM("out of memory")
        self.default.held = True
        return _cpu_sums(group, bases, scalars, c, lo, hi, constant_work)


class _CpuStagesGpu(GpuBackend):
    """GpuBackend's MSM and memory logic on the fake CuPy; gather and H scalars from the CPU."""

    def __init__(self, cp: _FakeCupy) -> None:
        self.cp = cp
        self._states = OrderedDict()
        self._lanes = {}
        self._plans = {}
        self._cpu = CpuBackend()
        self.engine = SimpleNamespace(clear=lambda: None)  # NTT tables: none here

    def gather(self, key: Any, witness: Any) -> Any:
        return self._cpu.gather(key, np.asarray(witness))

    def h_scalars(self, key: Any, evals: Any) -> Any:
        return self._cpu.h_scalars(key, evals)


def _backend(monkeypatch: pytest.MonkeyPatch, device: _Device) -> _CpuStagesGpu:
    cp = _FakeCupy()
    device.install(monkeypatch, cp)
    return _CpuStagesGpu(cp)


def _jobs(key: Any, be: GpuBackend) -> dict[str, MsmJob]:
    """The five MSMs of the mini proof, in the prover's start order."""
    cpu = CpuBackend()
    w = read_wtns(MINI_WTNS).values
    hs = cpu.h_scalars(key, cpu.gather(key, w))
    jobs = {}
    for which in OVERLAP_ORDER:
        n = key.domain_size if which == "H" else key.n_vars
        c = be.window_width(n, msm_group(which))
        jobs[which] = MsmJob(hs if which == "H" else w, c, 0, num_windows(c))
    return jobs


def _reference(key: Any, jobs: dict[str, MsmJob], constant_work: bool = False) -> dict[str, list]:
    cpu = CpuBackend()
    return {which: cpu.msm_windows(key, which, *jobs[which], constant_work=constant_work) for which in MSM_NAMES}


@pytest.mark.parametrize("fail", [1, 2, 3, 4, 5, "wait"])
def test_oom_in_the_overlapped_phase_redoes_it_one_msm_at_a_time(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, fail: int | str
) -> None:
    """An OOM at the k-th start (or while waiting): the started MSMs' buffers dropped, the
    device synchronized, every scratch released and CuPy's cache freed before the five MSMs run
    again one at a time through the synchronous path; the sums are the CPU's."""
    device = _Device(fail_start=None if fail == "wait" else fail, fail_wait=fail == "wait")
    device.default.held = True  # buffers an earlier synchronous MSM left
    be = _backend(monkeypatch, device)
    key = open_key(MINI_ZKEY)
    jobs = _jobs(key, be)
    with caplog.at_level(logging.INFO, logger="distprove.backends.gpu.backend"):
        got = be.msm_start_all(key, jobs)()
    assert got == _reference(key, jobs)
    assert list(got) == list(MSM_NAMES)
    assert len(device.starts) == (5 if fail == "wait" else fail)
    assert device.calls == [(msm_group(w).name, 0, jobs[w].hi, len(getattr(key, w.lower()))) for w in MSM_NAMES]
    held = device.at_first_call
    assert held["live_buffers"] == 0 and held["held_scratch"] == 0
    assert held["syncs"] >= 1 and held["frees"] >= 1
    assert "running its 5 MSMs one at a time" in caplog.text


@pytest.mark.parametrize("constant_work", [False, True])
def test_witness_msms_share_one_digit_sort(monkeypatch: pytest.MonkeyPatch, constant_work: bool) -> None:
    """A, B1 and B2 over the same witness with one window width sort its digits once (the G2
    lane's sort, B2 starting first, serves the G1 lane's A and B1); C and H sort their own, and
    the constant-work mode never shares. The sums are the CPU's either way."""
    device = _Device()
    be = _backend(monkeypatch, device)
    key = open_key(MINI_ZKEY)
    jobs = {w: j._replace(c=7, hi=num_windows(7)) if w in ("A", "B1", "B2") else j for w, j in _jobs(key, be).items()}
    with dask.config.set({"distprove.msm.constant-work": constant_work}):
        assert be.msm_start_all(key, jobs)() == _reference(key, jobs, constant_work)
    given = dict(zip(OVERLAP_ORDER, device.digits.values()))
    if constant_work:
        assert device.sorts == [] and set(given.values()) == {None}
    else:
        assert device.sorts == [(7, 0, num_windows(7))]
        assert given["A"] == given["B1"] == given["B2"] is not None and given["C"] is None and given["H"] is None


def test_no_oom_keeps_the_overlapped_path(monkeypatch: pytest.MonkeyPatch) -> None:
    device = _Device()
    be = _backend(monkeypatch, device)
    key = open_key(MINI_ZKEY)
    jobs = _jobs(key, be)
    assert be.msm_start_all(key, jobs)() == _reference(key, jobs)
    assert device.starts == [msm_group(w).name for w in OVERLAP_ORDER] and device.calls == []
    assert be.cp.syncs == 0 and be.cp.frees == 0


def test_single_msm_start_recovers_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """msm_start is the phase of one MSM (as prove(profile=True) and prover.msm start them)."""
    device = _Device(fail_start=1)
    be = _backend(monkeypatch, device)
    key = open_key(MINI_ZKEY)
    job = _jobs(key, be)["B2"]
    assert be.msm_start(key, "B2", *job)() == _reference(key, _jobs(key, be))["B2"]
    assert device.calls == [("G2", 0, job.hi, key.n_vars)]


def _scalars_with_edge_cases(n: int, seed: int) -> np.ndarray:
    """n random scalars < r with zeros and ones among them (the ones go to S_0)."""
    rng = np.random.default_rng(seed)
    values = [int.from_bytes(rng.bytes(32), "little") % bn254.R for _ in range(n)]
    for i in range(0, n, 7):
        values[i] = 1
    for i in range(3, n, 11):
        values[i] = 0
    return bn254.limbs_from_ints(values)


def _run_at_most(pts: list, scalars: np.ndarray, c: int, constant_work: bool, windows: int, points: int,
                 calls: list[tuple[int, int, int, int]]) -> Callable[[int, int, int, int], list]:
    """A ``run`` for sums_in_parts: CPU Pippenger over parts of at most ``windows`` windows and
    ``points`` points (larger parts raise the stand-in OOM), each call recorded in ``calls``."""

    def run(lo: int, hi: int, start: int, stop: int) -> list:
        calls.append((lo, hi, start, stop))
        if hi - lo > windows or stop - start > points:
            raise _OOM("too big")
        return cpu_msm.msm_windows(bn254.G1, pts[start:stop], scalars[start:stop], c, lo, hi, constant_work)

    return run


@pytest.mark.parametrize("constant_work", [False, True])
@pytest.mark.parametrize("lo,hi", [(0, 37), (5, 19)])
def test_parts_add_up_to_the_one_pass_sums(constant_work: bool, lo: int, hi: int) -> None:
    """CPU Pippenger: window sums run in parts (window halves, then point halves, with
    infinity bases, zeros and ones among the points) equal the sums of one pass."""
    key = open_key(MUL_ZKEY)
    bases = np.array(key.a[:200])
    bases[::13] = 0  # infinity rows
    scalars = _scalars_with_edge_cases(len(bases), seed=lo + hi)
    c = 7  # W = 37
    pts = bn254.points_from_limbs(bn254.G1, bases)
    runs: list[tuple[int, int, int, int]] = []
    run = _run_at_most(pts, scalars, c, constant_work, 4, 60, runs)
    want = cpu_msm.msm_windows(bn254.G1, pts, scalars, c, lo, hi, constant_work)
    assert sums_in_parts(bn254.G1, run, lo, hi, len(pts), _OOM) == want
    assert any(stop - start < len(pts) for _, _, start, stop in runs)  # points were split too
    assert {w for lo_, hi_, _, _ in runs for w in range(lo_, hi_)} == set(range(lo, hi))


def test_a_part_that_never_fits_raises() -> None:
    def run(lo: int, hi: int, start: int, stop: int) -> list:
        raise _OOM("no memory at all")

    with pytest.raises(_OOM):
        sums_in_parts(bn254.G1, run, 0, 4, 3, _OOM)


def test_gpu_msm_alone_too_big_runs_in_parts(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The synchronous GPU path: other keys evicted first; still short, the MSM runs in parts
    whose sums are the one-pass sums (G2 here: the point halves' sums added in G2). The log
    names ranges, never scalar values."""
    key = open_key(MINI_ZKEY)
    device = _Device(fits=lambda nw, n: "other" not in be._states and nw == 1 and n <= 2)
    be = _backend(monkeypatch, device)
    be._states["other"] = {"a": None}
    w = read_wtns(MINI_WTNS).values
    c = be.window_width(key.n_vars, bn254.G2)
    with caplog.at_level(logging.INFO):
        got = be.msm_windows(key, "B2", w, c, 0, num_windows(c))
    assert got == CpuBackend().msm_windows(key, "B2", w, c, 0, num_windows(c))
    assert list(be._states) == [key.content_hash]
    assert "evicting key other" in caplog.text and "apart" in caplog.text
    for v in bn254.ints_from_limbs(w):
        assert v < 1000 or str(v) not in caplog.text


@pytest.mark.parametrize("fail", [None, 2])
def test_proof_after_an_oom_is_the_no_oom_proof(monkeypatch: pytest.MonkeyPatch, fail: int | None) -> None:
    """prove() on the GPU backend's MSM logic, an OOM at the second start (the other key must
    go, then the phase's MSMs one at a time): the proof equals the CPU backend's with the same
    blinding."""
    key = open_key(MINI_ZKEY)
    device = _Device(fail_start=fail, fits=lambda nw, n: "other" not in be._states)
    be = _backend(monkeypatch, device)
    be._states["other"] = {"a": None}
    w = read_wtns(MINI_WTNS).values
    got = prove(key, w, backend=be, blinding=BLINDING)
    want = prove(key, w, backend="cpu", blinding=BLINDING)
    assert (got.pi_a, got.pi_b, got.pi_c) == (want.pi_a, want.pi_b, want.pi_c)
    assert ("other" in be._states) == (fail is None)
    # A: two failed tries, evict; then B1, B2, C: the witness MSMs' phase. H's phase, after them,
    # overlaps again: evicting the other key forgot the plan (its memory may fit the phase now)
    assert len(device.calls) == (0 if fail is None else 6)


def test_a_key_that_ran_short_runs_its_msms_one_at_a_time_next_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the overlapped phase ran short, the key's next phases start one MSM at a time (no
    failed starts, no second release of the caches); evicting a key, any key, forgets that."""
    device = _Device(fail_start=2)
    be = _backend(monkeypatch, device)
    key = open_key(MINI_ZKEY)
    jobs = _jobs(key, be)
    want = _reference(key, jobs)
    assert be.msm_start_all(key, jobs)() == want and len(device.starts) == 2
    frees, syncs, calls = be.cp.frees, be.cp.syncs, len(device.calls)
    assert be.msm_start_all(key, jobs)() == want
    assert len(device.starts) == 2 and len(device.calls) == calls + 5
    assert (be.cp.frees, be.cp.syncs) == (frees, syncs)
    be._states["other"] = {}
    be.evict("other")
    device.fail_start = None
    assert be.msm_start_all(key, jobs)() == want and len(device.starts) == 7


def test_an_msm_that_ran_in_parts_runs_in_them_next_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parts an MSM had to be split into are remembered per key: the next call runs exactly
    those (every one fits, nothing is retried) and its sums are the one-pass sums."""
    key = open_key(MINI_ZKEY)
    device = _Device(fits=lambda nw, n: nw <= 2 and n <= 3)
    be = _backend(monkeypatch, device)
    w = read_wtns(MINI_WTNS).values
    c = be.window_width(key.n_vars, bn254.G1)
    want = CpuBackend().msm_windows(key, "A", w, c, 0, num_windows(c))
    assert be.msm_windows(key, "A", w, c, 0, num_windows(c)) == want
    first = list(device.calls)
    assert any(not device.fits(hi - lo, n) for _, lo, hi, n in first)
    assert be.msm_windows(key, "A", w, c, 0, num_windows(c)) == want
    again = device.calls[len(first):]
    assert again == [call for call in first if device.fits(call[2] - call[1], call[3])]
    assert be.msm_windows(key, "A", w, c, 1, num_windows(c)) == want[1:]  # another shape: found out anew


def test_parts_from_a_plan_add_up_and_a_bad_plan_is_refused() -> None:
    """sums_in_parts run from the parts an earlier call reported: the same sums, each part run
    once; parts that leave a gap or overlap are refused."""
    key = open_key(MUL_ZKEY)
    pts = bn254.points_from_limbs(bn254.G1, np.array(key.a[:90]))
    scalars = _scalars_with_edge_cases(len(pts), seed=5)
    c, lo, hi = 7, 0, 37
    calls: list[tuple[int, int, int, int]] = []
    run = _run_at_most(pts, scalars, c, False, 9, 40, calls)
    want = cpu_msm.msm_windows(bn254.G1, pts, scalars, c, lo, hi, False)
    ran: list[tuple[int, int, int, int]] = []
    assert sums_in_parts(bn254.G1, run, lo, hi, len(pts), _OOM, ran=ran) == want
    assert len(ran) > 1 and all(hi_ - lo_ <= 9 and stop - start <= 40 for lo_, hi_, start, stop in ran)
    calls.clear()
    again: list[tuple[int, int, int, int]] = []
    assert sums_in_parts(bn254.G1, run, lo, hi, len(pts), _OOM, plan=ran[::-1], ran=again) == want
    assert calls == ran[::-1] == again
    for bad in (ran[1:], ran + ran[:1], [(0, 37, 0, 89)]):
        with pytest.raises(ValueError, match="do not tile"):
            sums_in_parts(bn254.G1, run, lo, hi, len(pts), _OOM, plan=bad)
