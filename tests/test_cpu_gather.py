"""CPU gather on mini (§10.6) and on random CSR coefficients, plus csr_from_coefficients."""

from __future__ import annotations

import random
import secrets
import types

import numpy as np
import pytest

from distprove import bn254
from distprove.backends.cpu import CpuBackend
from distprove.bn254 import FR_MONT, R
from distprove.errors import FormatError
from distprove.formats.zkey import read_zkey
from distprove.stages.gather import csr_from_coefficients

from test_vectors import A_EVALS, B_EVALS, C_EVALS, MINI, mini_key, mini_witness


def test_gather_on_mini_matches_snarkjs() -> None:
    be = CpuBackend()
    evals = be.gather(mini_key(), mini_witness())
    assert list(evals.a) == A_EVALS
    assert list(evals.b) == B_EVALS
    assert list(evals.c) == C_EVALS
    assert bn254.ints_from_limbs(be.to_host(evals.c)) == C_EVALS


def test_mini_csr_keeps_record_order() -> None:
    z = read_zkey(MINI / "mini_0001.zkey")
    for which in (0, 1):
        row_ptr, signal, value = csr_from_coefficients(
            z.coef_matrix, z.coef_row, z.coef_signal, z.coef_value, which, z.domain_size
        )
        recs = [
            (int(r), int(s), bytes(v.tobytes()))
            for m, r, s, v in zip(z.coef_matrix, z.coef_row, z.coef_signal, z.coef_value)
            if m == which
        ]
        expected = sorted(recs, key=lambda t: t[0])  # Python's sort is stable
        got = [
            (row, int(signal[j]), bytes(value[j].tobytes()))
            for row in range(z.domain_size)
            for j in range(int(row_ptr[row]), int(row_ptr[row + 1]))
        ]
        assert got == expected
        assert row_ptr.dtype == np.uint32 and signal.dtype == np.uint32 and value.dtype == "<u4"


def test_gather_random_coefficients() -> None:
    """Shuffled random records (repeated (row, signal) pairs, empty rows) against a direct sum."""
    seed = secrets.randbits(32)
    rng = random.Random(seed)
    domain, n_vars, m = 16, 7, 60
    matrix = [rng.randrange(2) for _ in range(m)]
    rows = [rng.randrange(domain - 3) for _ in range(m)]  # the top rows stay empty
    signals = [rng.randrange(n_vars) for _ in range(m)]
    coefs = [rng.choice([1, R - 1, rng.randrange(R)]) for _ in range(m)]
    stored = [c * FR_MONT * FR_MONT % R for c in coefs]
    w = [1] + [rng.choice([0, 1, R - 1, rng.randrange(R)]) for _ in range(n_vars - 1)]
    key = types.SimpleNamespace(n_vars=n_vars, n_public=1, domain_size=domain, content_hash=f"g{seed}")
    for name, which in (("a", 0), ("b", 1)):
        row_ptr, sig, val = csr_from_coefficients(
            np.array(matrix, dtype="<u4"),
            np.array(rows, dtype="<u4"),
            np.array(signals, dtype="<u4"),
            bn254.limbs_from_ints(stored),
            which,
            domain,
        )
        setattr(key, f"{name}_row_ptr", row_ptr)
        setattr(key, f"{name}_signal", sig)
        setattr(key, f"{name}_value", val)
    expected = [[0] * domain, [0] * domain]
    for mt, r, s, c in zip(matrix, rows, signals, coefs):
        expected[mt][r] = (expected[mt][r] + c * w[s]) % R
    evals = CpuBackend().gather(key, bn254.limbs_from_ints(w))
    assert list(evals.a) == expected[0], f"seed={seed}"
    assert list(evals.b) == expected[1], f"seed={seed}"
    assert list(evals.c) == [x * y % R for x, y in zip(*expected)], f"seed={seed}"


def test_csr_rejects_row_outside_domain() -> None:
    with pytest.raises(FormatError, match="mini.zkey: coefficient row 8 outside the domain of size 8"):
        csr_from_coefficients(
            np.array([0, 0]), np.array([1, 8]), np.array([0, 1]), np.zeros((2, 8), "<u4"), 0, 8, "mini.zkey"
        )
    with pytest.raises(ValueError):
        csr_from_coefficients(np.array([0]), np.array([0]), np.array([0]), np.zeros((1, 8), "<u4"), 2, 8)


def test_gather_rejects_wrong_witness_length() -> None:
    with pytest.raises(ValueError):
        CpuBackend().gather(mini_key(), mini_witness()[:5])


@pytest.mark.parametrize("layout", ["blocks", "interleaved", "shuffled"])
def test_csr_any_record_order_matches_a_stable_sort(layout: str) -> None:
    # snarkjs writes A then B in row order (the fast path, no sort); any other order is sorted.
    rng = np.random.default_rng(7)
    n, domain = 500, 64
    matrix = np.repeat(np.array([0, 1], dtype=np.uint32), [300, 200])
    row = np.concatenate([np.sort(rng.integers(0, domain, 300)), np.sort(rng.integers(0, domain, 200))]).astype(np.uint32)
    if layout == "interleaved":
        matrix = (np.arange(n) % 2).astype(np.uint32)
    elif layout == "shuffled":
        row = rng.permutation(row)
    signal = rng.integers(0, 1000, n).astype(np.uint32)
    value = rng.integers(0, 2**32, (n, 8), dtype=np.uint64).astype(np.uint32)
    for which in (0, 1):
        sel = np.flatnonzero(matrix == which)
        order = sel[np.argsort(row[sel], kind="stable")]
        row_ptr, sig, val = csr_from_coefficients(matrix, row, signal, value, which, domain)
        assert np.array_equal(row_ptr, np.concatenate([[0], np.cumsum(np.bincount(row[sel], minlength=domain))]))
        assert np.array_equal(sig, signal[order]) and np.array_equal(val, value[order])
        assert sig.flags.c_contiguous and val.flags.c_contiguous and row_ptr.dtype == np.uint32
