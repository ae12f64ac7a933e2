"""GpuBackend.load_witness_file on the device: pinned chunked upload and the device range check.

The device copy must equal the file's values; a value >= r anywhere must give exactly the host
read's error (first bad index named), across chunk and block boundaries; and prove() from a path
(this override) must give the proof prove() gives from the values in memory and the CPU's.
"""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import patched_wtns

from distprove import bn254
from distprove.backends.cpu import CpuBackend
from distprove.bn254 import R
from distprove.errors import FormatError
from distprove.formats.wtns import read_wtns, write_wtns
from distprove.prover import prove

pytestmark = pytest.mark.gpu

DATA = Path(__file__).parents[1] / "data"
CHAIN_ZKEY = DATA / "mul_chain_1k" / "circuit_final.zkey"
CHAIN_WTNS = DATA / "mul_chain_1k" / "witnesses" / "witness_0.wtns"
N = 100_003  # values of the synthetic witness: 390+ blocks, many 64 KiB chunks, a ragged tail


@pytest.fixture(scope="module")
def gpu():
    pytest.importorskip("cupy")
    from distprove.backends.gpu import GpuBackend
    from distprove.backends.gpu.witness import WitnessUploader

    be = GpuBackend()
    be._witness = WitnessUploader(chunk_bytes=64 << 10, threads=3)  # many chunks at this size
    return be


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(6)
    limbs = rng.integers(0, 1 << 32, (N, 8), dtype=np.uint64).astype(np.uint32)
    limbs[:, 7] %= (R >> 224)  # top limb below r's: every value < r
    limbs[N // 2] = bn254.limbs_from_ints([R - 1]).reshape(8)  # a tie on every limb but the last
    path = tmp_path_factory.mktemp("wtns") / "big.wtns"
    write_wtns(path, limbs)
    return path


def _key(n: int) -> SimpleNamespace:
    return SimpleNamespace(n_vars=n, path="/keys/big.zkey", content_hash="witness-test")


def test_upload_equals_the_file(gpu, big: Path) -> None:
    import cupy

    for _ in range(2):  # the second load reuses the pinned buffer
        values, dev = gpu.load_witness_file(_key(N), big)
        assert np.array_equal(values, read_wtns(big).values)
        assert np.array_equal(cupy.asnumpy(dev), read_wtns(big).values)
    _, dev = gpu.load_witness_file(_key(1023), CHAIN_WTNS)  # smaller than the buffer
    assert np.array_equal(cupy.asnumpy(dev), read_wtns(CHAIN_WTNS).values)


@pytest.mark.parametrize("index", [0, 2047, N // 2, N - 1])
@pytest.mark.parametrize("value", [R, R + 3, (1 << 256) - 1], ids=["r", "r+3", "max"])
def test_bad_value_error_equals_the_host_read(gpu, big: Path, tmp_path: Path, index: int, value: int) -> None:
    bad = patched_wtns(tmp_path, big, {index: value, N - 1: R} if index < N - 1 else {index: value})
    with pytest.raises(FormatError) as host:
        CpuBackend().load_witness_file(_key(N), bad)
    with pytest.raises(FormatError) as dev:
        gpu.load_witness_file(_key(N), bad)
    assert str(dev.value) == str(host.value) == f"{bad}: witness value {index} is >= r (not reduced)"


def test_count_errors_equal_the_host_read(gpu, big: Path, tmp_path: Path) -> None:
    bad = patched_wtns(tmp_path, big, {77: R})
    for path, n in ((big, N + 1), (bad, 6)):
        with pytest.raises(FormatError) as host:
            CpuBackend().load_witness_file(_key(n), path)
        with pytest.raises(FormatError) as dev:
            gpu.load_witness_file(_key(n), path)
        assert str(dev.value) == str(host.value)


def test_proof_from_path_equals_values_and_cpu(gpu, tmp_path: Path) -> None:
    rng = random.Random("witness")
    blinding = (rng.randrange(1, 1 << 250), rng.randrange(1, 1 << 250))
    from_path = prove(CHAIN_ZKEY, CHAIN_WTNS, backend=gpu, blinding=blinding)
    from_values = prove(CHAIN_ZKEY, np.array(read_wtns(CHAIN_WTNS).values), backend=gpu, blinding=blinding)
    on_cpu = prove(CHAIN_ZKEY, CHAIN_WTNS, backend="cpu", blinding=blinding)
    for p in (from_values, on_cpu):
        assert (from_path.pi_a, from_path.pi_b, from_path.pi_c, from_path.public) == (p.pi_a, p.pi_b, p.pi_c, p.public)
    bad = patched_wtns(tmp_path, CHAIN_WTNS, {500: R})
    with pytest.raises(FormatError) as e:
        prove(CHAIN_ZKEY, bad, backend=gpu)
    assert str(e.value) == f"{bad}: witness value 500 is >= r (not reduced)"
