"""Backend.load_witness_file: the witness read of a proof, on the CPU (the GPU override is
covered on a device by tests/gpu/test_witness_gpu.py; here its host side runs with a host uploader).

Every path must raise exactly the errors of the host read (read_wtns, then the key's count), and
prove() from a path must give the proof it gives from the same values in memory.
"""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import subprocess
import sys
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import patched_wtns

from distprove import bn254
from distprove.backends.base import LoadedWitness
from distprove.backends.cpu import CpuBackend
from distprove.backends.gpu.witness import read_chunks
from distprove.bn254 import R
from distprove.errors import FormatError
from distprove.formats.container import first_false, lt_bound
from distprove.formats.wtns import read_wtns
from distprove.prover import prove

DATA = Path(__file__).parent / "data"
KERNELS = Path(__file__).resolve().parents[1] / "distprove" / "kernels"
MINI_ZKEY = DATA / "mini" / "mini_0001.zkey"
MINI_WTNS = DATA / "mini" / "witness.wtns"
CHAIN_WTNS = DATA / "mul_chain_1k" / "witnesses" / "witness_0.wtns"  # 1023 values
BAD_VALUES = {"r": R, "r+3": R + 3, "max": (1 << 256) - 1}


def _value_message(path: Path, i: int) -> str:
    return f"{path}: witness value {i} is >= r (not reduced)"


class _HostUploader:
    """Stands in for the GPU's WitnessUploader: the same chunked reader, the check on the host."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(3)
        self.calls = 0

    def upload(self, path: str, offset: int, dest: np.ndarray) -> int | None:
        self.calls += 1
        with open(path, "rb", buffering=0) as f:
            read_chunks(f.fileno(), offset, dest, lambda lo, hi: None, chunk_bytes=96, pool=self.pool)
        return first_false(lt_bound(dest, R))


@pytest.fixture
def fake_gpu() -> Any:
    """A GpuBackend without a device: host arrays for device ones, the host uploader."""
    from distprove.backends.gpu.backend import GpuBackend

    be = object.__new__(GpuBackend)
    be.cp = SimpleNamespace(
        empty=lambda shape, dtype: np.empty(shape, np.uint32),
        uint32=np.uint32,
        cuda=SimpleNamespace(memory=SimpleNamespace(OutOfMemoryError=MemoryError),
                             get_current_stream=lambda: SimpleNamespace(synchronize=lambda: None)),
    )
    be._states, be._lanes, be._plans, be._witness = OrderedDict(), {}, {}, _HostUploader()
    return be


def _key(n_vars: int) -> SimpleNamespace:
    return SimpleNamespace(n_vars=n_vars, path="/keys/chain.zkey", content_hash="h")


# --- the default (CPU) path -------------------------------------------------------------------


def test_default_load_reads_and_checks() -> None:
    key = SimpleNamespace(n_vars=6, path=str(MINI_ZKEY))
    loaded = CpuBackend().load_witness_file(key, MINI_WTNS)
    assert isinstance(loaded, LoadedWitness)
    assert np.array_equal(loaded.values, read_wtns(MINI_WTNS).values)
    assert loaded.vector is loaded.values


@pytest.mark.parametrize("kind", sorted(BAD_VALUES))
@pytest.mark.parametrize("index", [0, 3, 5])
def test_prove_names_the_first_bad_value(tmp_path: Path, index: int, kind: str) -> None:
    bad = patched_wtns(tmp_path, MINI_WTNS, {index: BAD_VALUES[kind], 5: R + 1} if index < 5 else {5: BAD_VALUES[kind]})
    with pytest.raises(FormatError) as e:
        prove(MINI_ZKEY, bad, backend="cpu")
    assert str(e.value) == _value_message(bad, index)


def test_prove_count_error_and_a_bad_value_first(tmp_path: Path) -> None:
    with pytest.raises(FormatError) as e:
        prove(MINI_ZKEY, CHAIN_WTNS, backend="cpu")
    assert str(e.value) == f"{CHAIN_WTNS}: witness has 1023 values but the key mini_0001.zkey expects 6 (nVars)"
    bad = patched_wtns(tmp_path, CHAIN_WTNS, {700: R})
    with pytest.raises(FormatError) as e:
        prove(MINI_ZKEY, bad, backend="cpu")
    assert str(e.value) == _value_message(bad, 700)


class _Recording(CpuBackend):
    def __init__(self) -> None:
        super().__init__()
        self.files: list[Any] = []

    def load_witness_file(self, key: Any, path: Any) -> LoadedWitness:
        self.files.append(path)
        return super().load_witness_file(key, path)


def test_proof_from_path_equals_proof_from_values() -> None:
    blinding = (123456789, 987654321)
    be = _Recording()
    from_path = prove(MINI_ZKEY, MINI_WTNS, backend=be, blinding=blinding)
    assert be.files == [MINI_WTNS]
    from_values = prove(MINI_ZKEY, np.array(read_wtns(MINI_WTNS).values), backend=be, blinding=blinding)
    assert be.files == [MINI_WTNS]
    assert (from_path.pi_a, from_path.pi_b, from_path.pi_c) == (from_values.pi_a, from_values.pi_b, from_values.pi_c)
    assert from_path.public == from_values.public == bn254.ints_from_limbs(read_wtns(MINI_WTNS).values[1:3])
    assert {"witness", "gather"} <= set(from_path.timings)


# --- the GPU override's host side ---------------------------------------------------------------


def test_gpu_override_loads_the_file(fake_gpu: Any) -> None:
    values, vector = fake_gpu.load_witness_file(_key(1023), CHAIN_WTNS)
    ref = read_wtns(CHAIN_WTNS).values
    assert np.array_equal(values, ref) and np.array_equal(vector, ref)


@pytest.mark.parametrize("kind", sorted(BAD_VALUES))
@pytest.mark.parametrize("index", [0, 511, 1022])
def test_gpu_override_errors_equal_the_host_read(fake_gpu: Any, tmp_path: Path, index: int, kind: str) -> None:
    bad = patched_wtns(tmp_path, CHAIN_WTNS, {index: BAD_VALUES[kind], 1022: R} if index < 1022 else {1022: BAD_VALUES[kind]})
    key = _key(1023)
    with pytest.raises(FormatError) as host:
        CpuBackend().load_witness_file(key, bad)
    with pytest.raises(FormatError) as dev:
        fake_gpu.load_witness_file(key, bad)
    assert str(dev.value) == str(host.value) == _value_message(bad, index)


def test_gpu_override_count_errors_equal_the_host_read(fake_gpu: Any, tmp_path: Path) -> None:
    bad = patched_wtns(tmp_path, CHAIN_WTNS, {9: R})
    for path, key in ((CHAIN_WTNS, _key(1024)), (bad, _key(6))):
        with pytest.raises(FormatError) as host:
            CpuBackend().load_witness_file(key, path)
        with pytest.raises(FormatError) as dev:
            fake_gpu.load_witness_file(key, path)
        assert str(dev.value) == str(host.value)
        assert "expects 1024 (nVars)" in str(dev.value) if path == CHAIN_WTNS else "witness value 9" in str(dev.value)
    assert fake_gpu._witness.calls == 0  # nothing uploaded for a witness of the wrong size


def test_gpu_read_ahead_of_a_group(fake_gpu: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU's read ahead of a group: a small witness read into host memory, unloaded and
    unchecked (its group's load checks it: a bad value passes here), nothing uploaded; the count
    errors are the host read's; past DEFER_WITNESS_BYTES the witness is uploaded and checked now."""
    from distprove.backends.gpu import backend as gpu_backend

    key = _key(1023)
    bad = patched_wtns(tmp_path, CHAIN_WTNS, {9: R})
    for path in (CHAIN_WTNS, bad):
        values, vector = fake_gpu.read_witness_file(key, path)
        assert vector is None and np.array_equal(values, read_wtns(path, check_values=False).values)
    assert fake_gpu._witness.calls == 0
    for path, k in ((CHAIN_WTNS, _key(1024)), (bad, _key(6))):
        with pytest.raises(FormatError) as host:
            CpuBackend().load_witness_file(k, path)
        with pytest.raises(FormatError) as dev:
            fake_gpu.read_witness_file(k, path)
        assert str(dev.value) == str(host.value)
    monkeypatch.setattr(gpu_backend, "DEFER_WITNESS_BYTES", 1023 * 32 - 1)
    values, vector = fake_gpu.read_witness_file(key, CHAIN_WTNS)
    assert vector is not None and np.array_equal(vector, values) and fake_gpu._witness.calls == 1
    with pytest.raises(FormatError, match="witness value 9 is >= r"):
        fake_gpu.read_witness_file(key, bad)


def test_gpu_override_file_shrunk_after_the_header(fake_gpu: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import distprove.formats.wtns as wtns

    real = wtns.read_wtns
    short = tmp_path / "short.wtns"
    shutil.copy(CHAIN_WTNS, short)

    def then_truncate(path: Any, **kw: Any) -> Any:
        w = real(path, **kw)
        os.truncate(short, os.path.getsize(short) - 40)
        return w

    monkeypatch.setattr(wtns, "read_wtns", then_truncate)
    with pytest.raises(FormatError) as e:
        fake_gpu.load_witness_file(_key(1023), short)
    assert str(e.value).startswith(f"{short}: cannot read the witness values: file ends 40 bytes short")


# --- the chunked reader -----------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [0, 3])
@pytest.mark.parametrize(("size", "chunk"), [(1000, 96), (960, 96), (50, 96), (0, 96)])
def test_read_chunks_in_order(tmp_path: Path, threads: int, size: int, chunk: int) -> None:
    data = np.random.default_rng(size).integers(0, 256, size + 37, dtype=np.uint8)
    path = tmp_path / "blob"
    path.write_bytes(data.tobytes())
    dest = np.zeros(size, np.uint8)
    seen: list[tuple[int, int]] = []

    def on_chunk(lo: int, hi: int) -> None:
        assert np.array_equal(dest[:hi], data[37 : 37 + hi])  # this chunk and all before it landed
        seen.append((lo, hi))

    pool = ThreadPoolExecutor(threads) if threads else None
    with open(path, "rb", buffering=0) as f:
        read_chunks(f.fileno(), 37, dest, on_chunk, chunk_bytes=chunk, pool=pool)
    assert np.array_equal(dest, data[37:])
    assert seen == [(lo, min(size, lo + chunk)) for lo in range(0, size, chunk)]


@pytest.mark.parametrize("threads", [0, 3])
def test_read_chunks_short_file(tmp_path: Path, threads: int) -> None:
    path = tmp_path / "blob"
    path.write_bytes(bytes(500))
    pool = ThreadPoolExecutor(threads) if threads else None
    with open(path, "rb", buffering=0) as f, pytest.raises(EOFError, match="40 bytes short"):
        read_chunks(f.fileno(), 100, np.zeros(440, np.uint8), lambda lo, hi: None, chunk_bytes=64, pool=pool)
    with open(path, "rb", buffering=0) as f, pytest.raises(ValueError, match="contiguous"):
        read_chunks(f.fileno(), 0, np.zeros((4, 8), np.uint32)[:, :4], lambda lo, hi: None)


# --- the kernel body, built as host C++ --------------------------------------------------------------

HARNESS = r"""
#include "field.cuh"
#include "witness.cu"
extern "C" void host_below_r(const u32* w, u32 n, unsigned char* out) {
    for (u32 i = 0; i < n; i++) out[i] = witness_below_r(w + (u64)i * 8u);
}
"""


def test_kernel_range_check_matches_lt_bound(tmp_path: Path) -> None:
    cxx = next((shutil.which(c) for c in ("c++", "g++", "clang++") if shutil.which(c)), None)
    if cxx is None:
        pytest.skip("no C++ compiler")
    src, so = tmp_path / "harness.cpp", tmp_path / "harness.so"
    src.write_text(HARNESS)
    res = subprocess.run([cxx, "-O1", "-std=c++17", "-shared", "-fPIC", "-I", str(KERNELS), str(src), "-o", str(so)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-4000:]
    lib = ctypes.CDLL(str(so))
    rng = random.Random(6)
    top = R >> 224
    vals = [0, 1, R - 1, R, R + 1, (1 << 256) - 1, top << 224, (top << 224) - 1, (top + 1) << 224]
    vals += [R - rng.randrange(1 << 200) for _ in range(50)] + [R + rng.randrange(1 << 200) for _ in range(50)]
    vals += [rng.randrange(1 << 256) for _ in range(200)] + [rng.randrange(R) for _ in range(200)]
    limbs = np.ascontiguousarray(bn254.limbs_from_ints(vals).reshape(-1, 8), dtype=np.uint32)
    out = np.zeros(len(vals), np.uint8)
    lib.host_below_r(limbs.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint32(len(vals)), out.ctypes.data_as(ctypes.c_void_p))
    assert out.astype(bool).tolist() == lt_bound(limbs, R).tolist() == [v < R for v in vals]


# --- the uploader's host side, with stand-ins for the device ----------------------------------------


class _FakeStream:
    def __init__(self) -> None:
        self.copies: list[tuple[int, int]] = []
        self.syncs = 0

    def synchronize(self) -> None:
        self.syncs += 1


class _FakeDevicePtr:
    """A device pointer stand-in over a host array: ``+ offset`` and copy_from_host_async."""

    def __init__(self, arr: np.ndarray, offset: int = 0) -> None:
        self.arr, self.offset = arr, offset

    def __add__(self, k: int) -> "_FakeDevicePtr":
        return _FakeDevicePtr(self.arr, self.offset + k)

    def copy_from_host_async(self, src: int, size: int, stream: _FakeStream) -> None:
        assert self.offset + size <= self.arr.nbytes
        ctypes.memmove(self.arr.ctypes.data + self.offset, src, size)
        stream.copies.append((self.offset, size))


def test_uploader_copies_each_chunk_from_the_pinned_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs without CuPy: the uploader's two CuPy calls (a pinned buffer, the current stream) come
    from stand-ins put in sys.modules, so the test needs no GPU package."""
    from distprove.backends.gpu import witness as gw

    stream = _FakeStream()
    fake_cupy = SimpleNamespace(cuda=SimpleNamespace(get_current_stream=lambda: stream,
                                                     alloc_pinned_memory=lambda nbytes: bytearray(nbytes)))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setattr(gw, "first_bad", lambda dest: first_false(lt_bound(dest.arr, R)))
    up = gw.WitnessUploader(chunk_bytes=4096, threads=3)
    for path in (MINI_WTNS, CHAIN_WTNS, MINI_WTNS):  # the buffer grows once, then is reused
        w = read_wtns(path)
        dest = SimpleNamespace(arr=np.zeros((w.n_witness, 8), np.uint32), nbytes=w.n_witness * 32)
        dest.data = _FakeDevicePtr(dest.arr)
        stream.copies.clear()
        assert up.upload(w.path, w.offset, dest) is None
        assert np.array_equal(dest.arr, w.values)
        assert stream.copies == [(lo, min(dest.nbytes, lo + 4096) - lo) for lo in range(0, dest.nbytes, 4096)]
    assert up._staging is not None and up._staging.nbytes == 1023 * 32 and stream.syncs == 3
