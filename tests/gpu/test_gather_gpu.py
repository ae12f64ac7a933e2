"""GPU gather and H step against the CPU backend: random CSR matrices and the fixture keys."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from distprove import bn254
from distprove.backends.cpu import CpuBackend
from distprove.backends.cpu import gather as cpu_gather
from distprove.bn254 import FR_MONT, FR_MONT_INV, R

pytestmark = pytest.mark.gpu

DATA = Path(__file__).parents[1] / "data"
FIXTURES = ["mini/mini_0001.zkey"] + [
    f"{name}/circuit_final.zkey" for name in ("mul_chain_1k", "poseidon_k4", "bits_k16", "merkle_d20")
]


def _witness(zkey: str) -> Path:
    d = (DATA / zkey).parent
    return d / "witness.wtns" if (d / "witness.wtns").exists() else d / "witnesses" / "witness_0.wtns"


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def gpu(cp):
    from distprove.backends.gpu import GpuBackend

    return GpuBackend()


def random_csr(rng: random.Random, n_rows: int, n_vars: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    lens = [0 if rng.random() < 0.45 else rng.choice([1, 1, 2, 3, 40]) for _ in range(n_rows)]
    ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.uint32)
    sig = np.array([rng.randrange(n_vars) for _ in range(int(ptr[-1]))], dtype=np.uint32)
    coefs = [rng.choice([1, R - 1, 2, rng.randrange(R)]) for _ in range(len(sig))]
    val = bn254.limbs_from_ints([c * FR_MONT * FR_MONT % R for c in coefs])
    return ptr, sig, val, coefs


@pytest.mark.parametrize("n_rows", [1, 255, 256, 257, 5000])
def test_gather_random_csr(cp, n_rows: int) -> None:
    from distprove.backends.gpu.gather import DeviceCsr, gather

    rng = random.Random(n_rows)
    n_vars = 300
    w = [1] + [rng.choice([0, 1, R - 1, rng.randrange(R)]) for _ in range(n_vars - 1)]
    mats = [random_csr(rng, n_rows, n_vars) for _ in range(2)]
    dev = [DeviceCsr(cp.asarray(p), cp.asarray(s), cp.asarray(v)) for p, s, v, _ in mats]
    a, b, c = gather(dev[0], dev[1], cp.asarray(bn254.limbs_from_ints(w)))
    ref = [cpu_gather.evaluate_rows(p, s, cf, w) for p, s, _, cf in mats]
    dec = [[v * FR_MONT_INV % R for v in bn254.ints_from_limbs(cp.asnumpy(x))] for x in (a, b, c)]
    assert dec[0] == ref[0]
    assert dec[1] == ref[1]
    assert dec[2] == cpu_gather.pointwise_product(ref[0], ref[1])


@pytest.mark.parametrize("zkey", FIXTURES)
def test_gather_and_h_match_cpu_on_fixture(cp, gpu, zkey: str) -> None:
    from distprove.formats.wtns import read_wtns
    from distprove.keystore import open_key

    key = open_key(DATA / zkey)
    values = read_wtns(_witness(zkey)).values
    cpu = CpuBackend()
    ev_cpu = cpu.gather(key, values)
    ev_gpu = gpu.gather(key, gpu.load_witness(key, values))
    for name, x, y in zip("abc", ev_gpu, ev_cpu):
        assert np.array_equal(gpu.to_host(x), cpu.to_host(y)), f"gather {name}"
    hs_gpu = gpu.to_host(gpu.h_scalars(key, ev_gpu))  # in place: ev_gpu is overwritten
    assert np.array_equal(hs_gpu, cpu.to_host(cpu.h_scalars(key, ev_cpu)))
