"""Synthetic circuits: shape, satisfiability (vectorised and brute force), files snarkjs reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from distprove import bn254
from distprove.bn254 import R
from distprove.formats.r1cs import R1CS, read_r1cs
from distprove.formats.wtns import read_wtns
from distprove.synth import (
    BITS_UNIT_ROWS,
    field_ints,
    make_circuit,
    unsatisfied_rows,
    write_circuit,
)

CASES = [("chain", 1, 1), ("chain", 37, 3), ("bits", 99, 1), ("bits", 250, 2), ("random", 1, 0), ("random", 120, 4)]


def brute_unsatisfied(r1cs: R1CS, witness: np.ndarray) -> list[int]:
    """Row-by-row Python check of A·B = C, independent of the vectorised one."""
    w = bn254.ints_from_limbs(witness)

    def lc(m, i: int) -> int:
        lo, hi = int(m.row_ptr[i]), int(m.row_ptr[i + 1])
        coefs = bn254.ints_from_limbs(m.coef[lo:hi]) if hi > lo else []
        return sum(c * w[int(s)] for c, s in zip(coefs, m.wire[lo:hi])) % R

    return [i for i in range(r1cs.n_constraints) if lc(r1cs.A, i) * lc(r1cs.B, i) % R != lc(r1cs.C, i)]


@pytest.mark.parametrize("kind,n,k", CASES)
def test_witnesses_satisfy(kind: str, n: int, k: int) -> None:
    c = make_circuit(kind, n, k, terms=3, seed=11)
    r = c.r1cs
    assert r.n_constraints == n and c.n_public == k
    assert all(m.row_ptr.shape == (n + 1,) for m in (r.A, r.B, r.C))
    for i in range(3):
        w = c.witness(i)
        assert w.shape == (r.n_wires, 8) and w.dtype == np.uint32
        assert bn254.ints_from_limbs(w[:1]) == [1]
        assert unsatisfied_rows(r, w).size == 0
        assert brute_unsatisfied(r, w) == []
    assert not np.array_equal(c.witness(0), c.witness(1))
    assert np.array_equal(c.witness(2), make_circuit(kind, n, k, terms=3, seed=11).witness(2))


@pytest.mark.parametrize("kind,n,k", CASES)
def test_tampered_witness_is_caught(kind: str, n: int, k: int) -> None:
    c = make_circuit(kind, n, k, terms=3, seed=5)
    w = c.witness(0)
    rng = np.random.default_rng(3)
    for _ in range(5):
        bad = w.copy()
        i = int(rng.integers(1, c.r1cs.n_wires))
        bad[i] = bn254.limbs_from_ints([(bn254.ints_from_limbs(w[i : i + 1])[0] + 2) % R])[0]  # bits stay non-boolean
        expect = brute_unsatisfied(c.r1cs, bad)
        assert list(unsatisfied_rows(c.r1cs, bad)) == expect
        used = any(i in m.wire for m in (c.r1cs.A, c.r1cs.B, c.r1cs.C))
        assert bool(expect) == used


def test_chain_shape() -> None:
    c = make_circuit("chain", 1000, 3, seed=1)
    r = c.r1cs
    assert r.n_wires == 1000 + 3 + 1
    assert (r.n_pub_out, r.n_pub_in, r.n_prv_in) == (1, 2, 1)
    w = bn254.ints_from_limbs(c.witness(0))
    s = (w[2] + w[3] + w[4]) % R  # p2, p3 and the private x
    for _ in range(1000):
        s = s * s % R
    assert w[1] == s  # the public output is the 1000th square


def test_bits_are_mostly_bits() -> None:
    n = 20 * BITS_UNIT_ROWS + 7
    c = make_circuit("bits", n, 5, seed=2)
    w = c.witness(0)
    vals = field_ints(w)
    assert ((vals == 0) | (vals == 1)).mean() >= 0.9
    assert c.r1cs.n_wires == n + 1 and c.r1cs.n_pub_out == 5
    with pytest.raises(ValueError):
        make_circuit("bits", BITS_UNIT_ROWS - 1, 1)
    with pytest.raises(ValueError):
        make_circuit("bits", 3 * BITS_UNIT_ROWS, 4)


def test_random_rows_use_distinct_earlier_wires() -> None:
    t = 5
    c = make_circuit("random", 300, 2, terms=t, seed=9)
    r = c.r1cs
    first = r.n_wires - 300
    for m in (r.A, r.B):
        assert np.all(np.diff(m.row_ptr) == t)
        rows = m.wire.reshape(300, t).astype(np.int64)
        assert all(len(set(row)) == t for row in rows.tolist())
        assert np.all(rows < first + np.arange(300)[:, None])  # only wires defined before the row's output
    assert np.array_equal(r.C.wire, first + np.arange(300))
    assert (r.n_pub_out, r.n_pub_in) == (0, 2)


def test_field_ints_round_trip() -> None:
    rng = np.random.default_rng(4)
    vals = [0, 1, 2**32 - 1, 2**32, R - 1, R - 2**32 + 1, R - 2**32, R - 2**32 - 1]
    vals += [int(x) for x in rng.integers(0, 2**62, 20)] + [int.from_bytes(rng.bytes(32), "little") % R for _ in range(20)]
    limbs = bn254.limbs_from_ints(vals)
    assert [int(v) for v in field_ints(limbs)] == vals
    assert np.array_equal(bn254.limbs_from_ints(np.array(vals, dtype=object)), limbs)


@pytest.mark.parametrize("kind", ["chain", "bits", "random"])
def test_written_files_round_trip_and_snarkjs_reads_them(tmp_path: Path, kind: str, snarkjs: str) -> None:
    c = make_circuit(kind, 200, 2, terms=3, seed=3)
    meta = write_circuit(c, tmp_path, witnesses=2)
    assert json.loads((tmp_path / "circuit.json").read_text()) == meta
    r = read_r1cs(tmp_path / "circuit.r1cs")
    for a, b in ((r.A, c.r1cs.A), (r.B, c.r1cs.B), (r.C, c.r1cs.C)):
        assert np.array_equal(a.row_ptr, b.row_ptr) and np.array_equal(a.wire, b.wire) and np.array_equal(a.coef, b.coef)
    for i in range(2):
        w = read_wtns(tmp_path / f"witness_{i}.wtns").values
        assert np.array_equal(w, c.witness(i))
        assert unsatisfied_rows(r, w).size == 0
    res = subprocess.run([snarkjs, "r1cs", "info", str(tmp_path / "circuit.r1cs")], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = res.stdout + res.stderr
    assert "# of Constraints: 200" in out and f"# of Wires: {c.r1cs.n_wires}" in out
    assert f"# of Outputs: {c.r1cs.n_pub_out}" in out and f"# of Public Inputs: {c.r1cs.n_pub_in}" in out


def test_cli_synth(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "distprove.cli", "synth", "bits", "--constraints", "300", "--public", "2",
           "--out", str(tmp_path), "--witnesses", "2", "--seed", "5"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["circuit.json", "circuit.r1cs", "witness_0.wtns", "witness_1.wtns"]
    assert np.array_equal(read_wtns(tmp_path / "witness_1.wtns").values, make_circuit("bits", 300, 2, seed=5).witness(1))
    bad = subprocess.run(cmd[:5] + ["10", "--out", str(tmp_path / "x")], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
