"""The opt-in constant-work MSM mode on the CPU (docs/CONSTANT_WORK.md).

* bn254's complete projective formulas (RCB 2016 algorithms 7 and 9) against the Jacobian code,
  and the CPU MSM's fast integer versions against bn254's, on random points with random Z,
  identity, P + P and P + (-P) included.
* Constant-work window sums equal the normal mode's and a brute-force sum of digit multiples,
  for G1 and G2, window ranges, plain ints and gmpy2; the number of bucket additions per window
  is n + 2^c whatever the scalars.
* The option reaches the CPU backend (keyword and dask config), prover.prove and the CLI; a
  constant-work proof equals the normal one (same blinding) and snarkjs's r = s = 0 vector; the
  GPU backend passes the mode on to the device MSM.
"""

from __future__ import annotations

import json
import random
import types
from pathlib import Path

import dask.config
import numpy as np
import pytest
from click.testing import CliRunner

from distprove import bn254
from distprove.backends import base
from distprove.backends.cpu import CpuBackend
from distprove.backends.cpu import msm as cpu_msm
from distprove.bn254 import G1, G2, Q, R
from distprove.errors import FormatError
from distprove.stages.msm import combine, num_windows, signed_digits_array

DATA = Path(__file__).parent / "data"
GROUPS = [G1, G2]
IDS = ["G1", "G2"]


def _rand_point(g: bn254.Group, rng: random.Random) -> bn254.Affine:
    return bn254.mul(g, g.generator, rng.randrange(1, R))


def _rand_z(g: bn254.Group, rng: random.Random):
    return rng.randrange(1, Q) if g is G1 else (rng.randrange(Q), rng.randrange(1, Q))


def _scaled(g: bn254.Group, p: bn254.Affine, rng: random.Random) -> tuple:
    """p in projective coordinates (x z : y z : z) with a random z (the identity as (0 : z : 0))."""
    f = g.f
    z = _rand_z(g, rng)
    return tuple(f.mul(v, z) for v in bn254.to_projective(g, p))


def _on_curve(g: bn254.Group, p: tuple) -> bool:
    """Y^2 Z == X^3 + b Z^3, and not (0 : 0 : 0)."""
    f = g.f
    x, y, z = p
    if all(f.is_zero(v) for v in p):
        return False
    return f.mul(f.sqr(y), z) == f.add(f.mul(f.sqr(x), x), f.mul(g.b, f.mul(f.sqr(z), z)))


def _pairs(g: bn254.Group, rng: random.Random) -> list[tuple]:
    a = [_rand_point(g, rng) for _ in range(6)]
    b = [_rand_point(g, rng) for _ in range(6)]
    return list(zip(a, b)) + [(a[0], a[0]), (a[1], bn254.neg(g, a[1])), (None, b[0]), (b[1], None), (None, None)]


@pytest.mark.parametrize("g", GROUPS, ids=IDS)
def test_proj_formulas_match_jacobian(g: bn254.Group) -> None:
    rng = random.Random()
    for p, q in _pairs(g, rng):
        pp, qq = _scaled(g, p, rng), _scaled(g, q, rng)
        s = bn254.proj_add(g, pp, qq)
        assert _on_curve(g, s)
        assert bn254.proj_to_affine(g, s) == bn254.to_affine(g, bn254.jac_add(g, bn254.to_jacobian(g, p), bn254.to_jacobian(g, q)))
        d = bn254.proj_double(g, pp)
        assert _on_curve(g, d)
        assert bn254.proj_to_affine(g, d) == bn254.to_affine(g, bn254.jac_double(g, bn254.to_jacobian(g, p)))
        assert bn254.proj_to_affine(g, pp) == p
    assert bn254.proj_to_affine(g, bn254.proj_identity(g)) is None
    assert bn254.proj_b3(g) == g.f.mul(g.b, 3 if g is G1 else (3, 0))


@pytest.mark.parametrize("g", GROUPS, ids=IDS)
@pytest.mark.parametrize("mpz", [False, True], ids=["int", "mpz"])
def test_cpu_proj_adder_matches_bn254(g: bn254.Group, mpz: bool) -> None:
    """The CPU MSM's integer formulas give bn254.proj_add's coordinates exactly (fully reduced)."""
    if mpz and not cpu_msm.mpz_available():
        pytest.skip("gmpy2 not installed")
    rng = random.Random()
    add = cpu_msm.proj_adder(g)
    fq = Q
    conv = (lambda v: v) if not mpz else __import__("gmpy2").mpz
    if mpz:
        fq = conv(Q)

    def to_type(p: tuple) -> tuple:
        return tuple(conv(v) if g is G1 else (conv(v[0]), conv(v[1])) for v in p)

    for p, q in _pairs(g, rng):
        pp, qq = _scaled(g, p, rng), _scaled(g, q, rng)
        got = add(to_type(pp), to_type(qq), fq)
        want = bn254.proj_add(g, pp, qq)
        flat = [int(v) for c in got for v in ((c,) if g is G1 else c)]
        assert all(0 <= v < Q for v in flat)
        assert (tuple(flat) if g is G1 else tuple(zip(flat[::2], flat[1::2]))) == want


def _case(g: bn254.Group, n: int, pattern: str, rng: random.Random) -> tuple[list, list[int]]:
    table = [_rand_point(g, rng) for _ in range(12)] + [None]
    bases = [rng.choice(table) for _ in range(n)]
    if pattern == "zero":
        scal = [0] * n
    elif pattern == "one":
        scal = [1] * n
    elif pattern == "equal":
        scal = [rng.randrange(R)] * n
    elif pattern == "bits":
        scal = [rng.choice([0, 0, 0, 1, 1, rng.randrange(R)]) for _ in range(n)]
    elif pattern == "uniform":
        scal = [rng.randrange(R) for _ in range(n)]
    else:
        specials = [0, 1, R - 1, 2, (1 << 253) + 5]
        scal = (specials + [rng.choice(specials + [rng.randrange(R)] * 3) for _ in range(n)])[:n]
    return bases, scal


def _brute(g: bn254.Group, bases: list, scal: list[int], c: int, lo: int, hi: int) -> list:
    digits = signed_digits_array(bn254.limbs_from_ints(scal), c)
    out = []
    for w in range(lo, hi):
        acc = bn254.to_jacobian(g, None)
        for i, p in enumerate(bases):
            if digits[i, w]:
                acc = bn254.jac_add(g, acc, bn254.jac_mul(g, bn254.to_jacobian(g, p), int(digits[i, w])))
        out.append(bn254.to_affine(g, acc))
    return out


@pytest.mark.parametrize(
    "g,n,c,lo,hi,pattern",
    [
        (G1, 1, 4, 0, 64, "mixed"),
        (G1, 50, 3, 0, 86, "mixed"),
        (G1, 70, 5, 10, 20, "bits"),
        (G1, 40, 2, 0, 128, "equal"),
        (G1, 30, 8, 0, 32, "zero"),
        (G1, 30, 6, 0, 43, "one"),
        (G2, 30, 4, 0, 64, "mixed"),
        (G2, 25, 6, 3, 9, "bits"),
    ],
    ids=lambda v: v.name if isinstance(v, bn254.Group) else str(v),
)
def test_window_sums_equal_normal_mode(g, n, c, lo, hi, pattern) -> None:
    rng = random.Random()
    bases, scal = _case(g, n, pattern, rng)
    limbs = bn254.limbs_from_ints(scal)
    cw = cpu_msm.msm_windows(g, bases, limbs, c, lo, hi, constant_work=True)
    assert cw == cpu_msm.msm_windows(g, bases, limbs, c, lo, hi)
    assert cw == _brute(g, bases, scal, c, lo, hi)
    if cpu_msm.mpz_available():
        assert cpu_msm.msm_windows(g, cpu_msm.to_mpz_points(g, bases), limbs, c, lo, hi, constant_work=True) == cw
    if (lo, hi) == (0, num_windows(c)):
        want = None
        for p, s in zip(bases, scal):
            want = bn254.add(g, want, bn254.mul(g, p, s))
        assert combine(g, dict(enumerate(cw)), c) == want


@pytest.mark.parametrize("pattern", ["zero", "one", "bits", "uniform", "equal"])
def test_bucket_additions_do_not_depend_on_scalars(monkeypatch: pytest.MonkeyPatch, pattern: str) -> None:
    """Each window costs n bucket additions plus 2 * 2^(c-1) in the reduction, for any scalars;
    the normal mode's work does depend on them (checked on the zero pattern: no work at all)."""
    calls = {"n": 0}
    real = cpu_msm.proj_adder

    def counting(g: bn254.Group):
        add = real(g)

        def wrapped(p: tuple, q: tuple, m: int) -> tuple:
            calls["n"] += 1
            return add(p, q, m)

        return wrapped

    monkeypatch.setattr(cpu_msm, "proj_adder", counting)
    rng = random.Random()
    n, c, lo, hi = 37, 4, 5, 12
    bases, scal = _case(G1, n, pattern, rng)
    limbs = bn254.limbs_from_ints(scal)
    sums = cpu_msm.msm_windows(G1, bases, limbs, c, lo, hi, constant_work=True)
    assert calls["n"] == (hi - lo) * (n + 2 * (1 << (c - 1)))
    assert sums == cpu_msm.msm_windows(G1, bases, limbs, c, lo, hi)


def test_validation_applies_to_both_modes() -> None:
    bases = [G1.generator] * 3
    limbs = bn254.limbs_from_ints([1, 2, 3])
    with pytest.raises(ValueError):
        cpu_msm.msm_windows(G1, bases, limbs, 4, 0, 99, constant_work=True)
    with pytest.raises(ValueError):
        cpu_msm.msm_windows(G1, bases[:2], limbs, 4, 0, 1, constant_work=True)


# --- the option through backend, config, prover and CLI --------------------------------------


def test_resolve_constant_work_reads_config() -> None:
    assert base.resolve_constant_work(None) is False
    assert base.resolve_constant_work(True) is True
    with dask.config.set({"distprove.msm.constant-work": True}):
        assert base.resolve_constant_work(None) is True
        assert base.resolve_constant_work(False) is False
    with dask.config.set({"distprove.msm.constant-work": "maybe"}):
        with pytest.raises(FormatError, match="distprove.msm.constant-work"):
            base.resolve_constant_work(None)


@pytest.fixture(scope="module")
def mini_store(tmp_path_factory: pytest.TempPathFactory):
    from distprove.keystore import import_key

    zkey = DATA / "mini" / "mini_0001.zkey"
    if not zkey.is_file():
        pytest.skip("tests/data/mini not copied yet")
    return import_key(zkey, tmp_path_factory.mktemp("cw") / "mini.zarr")


def _spy(monkeypatch: pytest.MonkeyPatch) -> list:
    seen: list = []
    real = cpu_msm.msm_windows_constant_work

    def spy(*args, **kwargs):
        seen.append(args[4:6])
        return real(*args, **kwargs)

    monkeypatch.setattr(cpu_msm, "msm_windows_constant_work", spy)
    return seen


def test_cpu_backend_keyword_and_config(mini_store, monkeypatch: pytest.MonkeyPatch) -> None:
    from distprove.formats.wtns import read_wtns

    seen = _spy(monkeypatch)
    be = CpuBackend()
    w = read_wtns(DATA / "mini" / "witness.wtns").values
    c = 3
    for which in ("A", "B2", "C"):
        normal = be.msm_windows(mini_store, which, w, c, 0, num_windows(c))
        assert not seen
        assert be.msm_windows(mini_store, which, w, c, 0, num_windows(c), constant_work=True) == normal
        assert len(seen) == 1
        with dask.config.set({"distprove.msm.constant-work": True}):
            assert be.msm_windows(mini_store, which, w, c, 2, 7) == normal[2:7]
        assert len(seen) == 2
        seen.clear()


def test_prove_constant_work_reproduces_reference(mini_store, monkeypatch: pytest.MonkeyPatch) -> None:
    """r = s = 0 gives SNARKJS_FORMATS.md §10.6's proof_py_rs0.json in constant-work mode too."""
    from distprove.prover import prove

    seen = _spy(monkeypatch)
    proof = prove(mini_store, DATA / "mini" / "witness.wtns", backend="cpu", blinding=(0, 0), constant_work=True)
    assert len(seen) == 5
    expected = json.loads((DATA / "mini" / "proof_py_rs0.json").read_text())
    got = proof.to_json()
    for k in ("pi_a", "pi_b", "pi_c"):
        assert got[k] == expected[k], k


def test_prove_constant_work_equals_normal_on_fixture(tmp_path: Path) -> None:
    from distprove.keystore import import_key
    from distprove.prover import prove

    zkey = DATA / "mul_chain_1k" / "circuit_final.zkey"
    witness = DATA / "mul_chain_1k" / "witnesses" / "witness_0.wtns"
    if not witness.is_file():
        pytest.skip("tests/data/mul_chain_1k not copied yet")
    key = import_key(zkey, tmp_path / "k.zarr")
    rng = random.Random()
    rs = (rng.randrange(R), rng.randrange(R))
    normal = prove(key, witness, backend="cpu", blinding=rs)
    cw = prove(key, witness, backend="cpu", blinding=rs, constant_work=True)
    assert cw.to_json() == normal.to_json()
    assert cw.public == normal.public


def test_cli_constant_work_option(mini_store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``distprove prove --constant-work`` proves in that mode, and the proof verifies."""
    from distprove.cli import main

    seen = _spy(monkeypatch)
    res = CliRunner().invoke(main, ["prove", str(mini_store.path), str(DATA / "mini" / "witness.wtns"),
                                    "--out", str(tmp_path), "--backend", "cpu", "--constant-work"])
    assert res.exit_code == 0, res.output
    assert len(seen) == 5
    assert (tmp_path / "witness.proof.json").is_file()
    seen.clear()
    res = CliRunner().invoke(main, ["prove", str(mini_store.path), str(DATA / "mini" / "witness.wtns"),
                                    "--out", str(tmp_path), "--backend", "cpu", "--no-verify"])
    assert res.exit_code == 0, res.output
    assert not seen


def test_gpu_backend_passes_constant_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """GpuBackend.msm_windows hands the resolved mode to gpu.msm.msm_windows (no device needed:
    numpy stands in for CuPy and the device MSM is replaced by a recorder)."""
    from distprove.backends.gpu import backend as gb

    be = object.__new__(gb.GpuBackend)
    oom = types.SimpleNamespace(memory=types.SimpleNamespace(OutOfMemoryError=type("OutOfMemoryError", (MemoryError,), {})))
    be.cp = types.SimpleNamespace(asarray=lambda a, dtype=None: np.asarray(a, dtype=dtype), uint32=np.uint32, cuda=oom)
    be._states, be._plans = {}, {}
    # stand-in bases: one row per scalar, named after the array (C has the private signals only)
    monkeypatch.setattr(be, "_array", lambda key, attr: np.array([attr] * (2 if attr == "c" else 4)), raising=False)
    seen: list = []
    monkeypatch.setattr(gb.gpu_msm, "msm_windows", lambda *a, **k: seen.append((a, k)) or [None])
    key = types.SimpleNamespace(content_hash="h", n_public=1)
    w = np.zeros((4, 8), dtype=np.uint32)
    be.msm_windows(key, "C", w, 4, 0, 2, constant_work=True)
    args, kwargs = seen[-1]
    assert kwargs == {"constant_work": True} and list(args[1]) == ["c"] * 2 and args[2].shape == (2, 8) and args[3:] == (4, 0, 2)
    be.msm_windows(key, "B2", w, 4, 0, 2)
    assert seen[-1][1] == {"constant_work": False} and seen[-1][0][0] is G2
    with dask.config.set({"distprove.msm.constant-work": True}):
        be.msm_windows(key, "A", w, 4, 0, 2)
    assert seen[-1][1] == {"constant_work": True}
