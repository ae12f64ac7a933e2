"""``ptau prepare`` (group iFFT) and ``ptau new --dev`` against independent references.

* GLV split and the vectorised ladder against bn254.mul on fresh random points and scalars.
* The group iFFT against the definition evaluated by brute force (bn254 Jacobian arithmetic).
* The level-29 coset construction at a tiny analogue against the Lagrange basis of H ∪ g·H
  evaluated at a known τ.
* prepare on the snarkjs fixtures: pot4 whole-file byte equality; pot12 levels ≤ 8 slice by slice
  (the whole power-12 file is a ``slow`` test); a dev ptau against snarkjs's own prepare, and
  snarkjs groth16 setup on a distprove-prepared file, proved by distprove and verified by snarkjs.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from distprove import bn254, glv
from distprove.backends.cpu import groupfft as gf
from distprove.bn254 import G1, G2, R
from distprove.cli import main
from distprove.errors import FormatError
from distprove.formats.ptau import lagrange_level, read_ptau
from distprove.ptau import LAGRANGE_SECTIONS, column_points, half_points, level_points, new_dev, prepare

from conftest import DATA_DIR, snarkjs_verify

MINI = DATA_DIR / "mini"
POT12 = DATA_DIR / "ptau" / "pot12_final.ptau"
GROUPS = [pytest.param(G1, id="G1"), pytest.param(G2, id="G2")]


def _random_points(group: bn254.Group, rng: random.Random, count: int) -> list:
    return [bn254.mul(group, group.generator, rng.randrange(1, R)) for _ in range(count)]


def _naive_idft(group: bn254.Group, pts: list, omega: int, scale: int) -> list:
    n = len(pts)
    w_inv = pow(omega, -1, R)
    out = []
    for i in range(n):
        acc = bn254.to_jacobian(group, None)
        for j, p in enumerate(pts):
            acc = bn254.jac_add(group, acc, bn254.jac_mul(group, bn254.to_jacobian(group, p), pow(w_inv, i * j, R) * scale))
        out.append(bn254.to_affine(group, acc))
    return out


def test_glv_split() -> None:
    rng = random.Random()
    lam = glv.LAMBDA
    assert pow(lam, 3, R) == 1 and lam != 1
    ks = [0, 1, 2, R - 1, R - 2, lam, R - lam, (R - 1) // 2] + [rng.randrange(R) for _ in range(2000)]
    for k in ks:
        k1, k2 = glv.split(k)
        assert (k1 + k2 * lam - k) % R == 0
        assert abs(k1) < 1 << 127 and abs(k2) < 1 << 127
        for half in (abs(k1), abs(k2)):
            digits = gf.signed_digits(half)
            assert sum(d << (gf.WINDOW * w) for w, d in enumerate(digits)) == half
            assert all(-(1 << (gf.WINDOW - 1)) < d <= 1 << (gf.WINDOW - 1) for d in digits)


@pytest.mark.parametrize("group", GROUPS)
def test_endomorphism(group: bn254.Group) -> None:
    p = _random_points(group, random.Random(), 1)[0]
    beta = gf._beta(group)
    phi = (p[0] * beta % bn254.Q, p[1]) if group is G1 else ((p[0][0] * beta % bn254.Q, p[0][1] * beta % bn254.Q), p[1])
    assert bn254.mul(group, p, glv.LAMBDA) == phi


@pytest.mark.parametrize("group", GROUPS)
def test_mul_many_matches_reference(group: bn254.Group) -> None:
    rng = random.Random()
    pts = _random_points(group, rng, 9) + [None, group.generator]
    lam = glv.LAMBDA
    ks = [0, 1, R - 1, lam, R - lam, 2, rng.randrange(1 << 64), rng.randrange(R), R + 5, rng.randrange(R), 7]
    v = gf.affine_from_limbs(group, bn254.points_to_limbs(group, pts))
    got = bn254.points_from_limbs(group, gf.affine_to_limbs(group, gf._to_affine(group, gf.mul_many(group, v, ks))))
    assert got == [bn254.mul(group, p, k) if p is not None else None for p, k in zip(pts, ks)]


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_ifft_level_matches_definition(group: bn254.Group, n: int) -> None:
    rng = random.Random()
    pts = _random_points(group, rng, n)
    if n >= 4:
        pts[1] = None  # infinity input
        pts[3] = pts[2]  # equal inputs meet in the first stage (P + P)
    p = n.bit_length() - 1
    got = bn254.points_from_limbs(group, gf.ifft_level(group, bn254.points_to_limbs(group, pts)))
    assert got == _naive_idft(group, pts, bn254.root_of_unity(p), pow(n, -1, R))


@pytest.mark.parametrize("group", GROUPS)
def test_ifft_of_constant_sequence(group: bn254.Group) -> None:
    """τ = 1 (a fresh, uncontributed ptau): every input is G, so out = [G, ∞, ∞, …] at every level."""
    for n in (2, 4, 8):
        limbs = bn254.points_to_limbs(group, [group.generator] * n)
        got = bn254.points_from_limbs(group, gf.ifft_level(group, limbs))
        assert got == [group.generator] + [None] * (n - 1)


def _lagrange_basis(tau: int, domain: list[int]) -> list[int]:
    out = []
    for x in domain:
        num = den = 1
        for y in domain:
            if y != x:
                num = num * (tau - y) % R
                den = den * (x - y) % R
        out.append(num * pow(den, -1, R) % R)
    return out


@pytest.mark.parametrize("group", GROUPS)
def test_coset_level_tiny_analogue(group: bn254.Group) -> None:
    """The level-29 construction (H = <w[28]>, g = 25) at H = <w[2]>, g = 25: Lagrange points of H ∪ gH."""
    rng = random.Random()
    tau = rng.randrange(2, R)
    k, g = 2, bn254.FR_SHIFT
    m = 1 << k
    w = bn254.root_of_unity(k)
    pts = [bn254.mul(group, group.generator, pow(tau, j, R)) for j in range(2 * m - 1)] + [None]
    domain = [pow(w, i, R) for i in range(m)] + [g * pow(w, i, R) % R for i in range(m)]
    # as at level 29 the last power is missing (infinity): out_x = Σ_{j < 2m-1} c_xj·[τ^j] with
    # c_xj the coefficients of the Lagrange polynomial L_x of the domain
    got = bn254.points_from_limbs(group, gf.coset_level(group, bn254.points_to_limbs(group, pts), k, g))
    expect = []
    for x in domain:
        coeffs = [1]
        den = 1
        for y in domain:
            if y != x:
                coeffs = [((coeffs[i - 1] if i else 0) - y * (coeffs[i] if i < len(coeffs) else 0)) % R
                          for i in range(len(coeffs) + 1)]
                den = den * (x - y) % R
        inv = pow(den, -1, R)
        scal = sum(coeffs[j] * pow(tau, j, R) for j in range(2 * m - 1)) * inv % R
        expect.append(bn254.mul(group, group.generator, scal))
    assert got == expect
    # and with the full power sequence the points are the Lagrange basis at τ
    full = [bn254.mul(group, group.generator, pow(tau, j, R)) for j in range(2 * m)]
    got = bn254.points_from_limbs(group, gf.coset_level(group, bn254.points_to_limbs(group, full), k, g))
    assert got == [bn254.mul(group, group.generator, v) for v in _lagrange_basis(tau, domain)]


def test_prepare_pot4_byte_identical(tmp_path: Path) -> None:
    out = tmp_path / "pot4_prepared.ptau"
    prepare(MINI / "pot4_0002.ptau", out, backend="cpu")
    assert out.read_bytes() == (MINI / "pot4_final.ptau").read_bytes()


def test_prepare_overwrites_existing_lagrange_sections(tmp_path: Path) -> None:
    """Preparing an already prepared file recomputes 12-15 from 2-5: same bytes again."""
    out = tmp_path / "again.ptau"
    prepare(MINI / "pot4_final.ptau", out, backend="cpu")
    assert out.read_bytes() == (MINI / "pot4_final.ptau").read_bytes()


@pytest.mark.parametrize("sid,lid,group,extra", LAGRANGE_SECTIONS, ids=["tauG1", "tauG2", "alphaTauG1", "betaTauG1"])
def test_pot12_levels_up_to_8(sid: int, lid: int, group: bn254.Group, extra: bool) -> None:
    f = read_ptau(POT12)
    src = {2: f.tau_g1, 3: f.tau_g2, 4: f.alpha_tau_g1, 5: f.beta_tau_g1}[sid]
    lag = {12: f.lagrange_tau_g1, 13: f.lagrange_tau_g2, 14: f.lagrange_alpha_tau_g1, 15: f.lagrange_beta_tau_g1}[lid]
    for p in range(9):
        assert np.array_equal(level_points(group, src, p), lagrange_level(lag, p)), f"section {lid} level {p}"


def _blocked_level(group: bn254.Group, section: np.ndarray, p: int, columns: int) -> np.ndarray:
    """Level p assembled from its two halves and ``columns`` column ranges, as the Dask tasks do."""
    halves = [half_points(group, section, p, b) for b in (0, 1)]
    half = 1 << (p - 1)
    out = np.zeros((2 * half, group.limbs), dtype="<u4")
    bounds = [half * c // columns for c in range(columns + 1)]
    for first, end in zip(bounds, bounds[1:]):
        rows = column_points(group, p, first, halves[0][first:end], halves[1][first:end])
        out[first:end], out[half + first : half + end] = rows[: end - first], rows[end - first :]
    return out


@pytest.mark.parametrize("group", GROUPS)
def test_blocked_level_equals_level(group: bn254.Group) -> None:
    """Halves + column stage == the whole level, random inputs with P + P and infinity rows."""
    rng = random.Random()
    for p, columns in ((1, 1), (2, 2), (3, 3), (4, 2)) if group is G1 else ((1, 1), (2, 1), (3, 2)):
        pts = _random_points(group, rng, 1 << p)
        if p >= 3:
            pts[2] = pts[6]  # equal points meet in the first stage of a half
            pts[5] = None
        section = bn254.points_to_limbs(group, pts)
        assert np.array_equal(_blocked_level(group, section, p, columns), level_points(group, section, p)), p


@pytest.mark.parametrize("p", [3, 5])
def test_blocked_tau_g1_extra_level(p: int) -> None:
    """tauG1's level power+1 (its last input missing, read as infinity) and a top level of a real
    ceremony file, blocked: equal to the unblocked level and to the file's Lagrange points."""
    f = read_ptau(POT12)
    section = f.tau_g1[: (1 << p) - 1]
    assert np.array_equal(_blocked_level(G1, section, p, 2), level_points(G1, section, p))
    assert np.array_equal(_blocked_level(G1, f.tau_g1, p, 2), lagrange_level(f.lagrange_tau_g1, p))
    assert np.array_equal(_blocked_level(G2, f.tau_g2, 3, 2), lagrange_level(f.lagrange_tau_g2, 3))


@pytest.mark.slow
def test_prepare_pot12_byte_identical(tmp_path: Path) -> None:
    """The whole power-12 file, on a local cluster of two CPU worker processes (about 40 s on CI's
    two cores). The in-process path is checked byte for byte on its levels up to 2^8 above and on the
    whole power-4 file, and equal to the cluster's on a power-5 file (test_ptau_dist.py)."""
    f = read_ptau(POT12)
    src = tmp_path / "pot12_unprepared.ptau"
    from distprove.formats.ptau import PtauHeader, write_ptau

    write_ptau(src, PtauHeader(12, 12), {2: f.tau_g1, 3: f.tau_g2, 4: f.alpha_tau_g1, 5: f.beta_tau_g1,
                                         6: f.beta_g2.reshape(1, -1), 7: f.contributions})
    out = tmp_path / "pot12.ptau"
    prepare(src, out, backend="cpu", n_workers=2)
    assert out.read_bytes() == POT12.read_bytes()


def test_new_dev_powers(tmp_path: Path) -> None:
    path = tmp_path / "dev.ptau"
    tau, alpha, beta = new_dev(path, 3, seed=7, device="cpu", warn=False)
    f = read_ptau(path, check_points=True)
    assert (f.power, f.ceremony_power, f.n_contributions) == (3, 3, 0)
    n = 8
    assert bn254.points_from_limbs(G1, f.tau_g1) == [bn254.mul(G1, G1.generator, pow(tau, i, R)) for i in range(2 * n - 1)]
    assert bn254.points_from_limbs(G2, f.tau_g2) == [bn254.mul(G2, G2.generator, pow(tau, i, R)) for i in range(n)]
    assert bn254.points_from_limbs(G1, f.alpha_tau_g1) == [bn254.mul(G1, G1.generator, alpha * pow(tau, i, R)) for i in range(n)]
    assert bn254.points_from_limbs(G1, f.beta_tau_g1) == [bn254.mul(G1, G1.generator, beta * pow(tau, i, R)) for i in range(n)]
    assert bn254.points_from_limbs(G2, f.beta_g2.reshape(1, -1)) == [bn254.mul(G2, G2.generator, beta)]
    # and prepare's Lagrange points are [L_i(τ)]: checked at the top level of tauG2
    prepared = tmp_path / "dev_prepared.ptau"
    prepare(path, prepared, backend="cpu")
    from distprove.devsetup import lagrange_at

    lag = bn254.points_from_limbs(G2, lagrange_level(read_ptau(prepared).lagrange_tau_g2, 3))
    assert lag == [bn254.mul(G2, G2.generator, int(v)) for v in lagrange_at(tau, 3)]


def test_prepare_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ptau"
    bad.write_bytes((MINI / "pot4_0002.ptau").read_bytes()[:500])
    with pytest.raises(FormatError) as exc:
        prepare(bad, tmp_path / "out.ptau", backend="cpu")
    assert str(bad) in str(exc.value) and "\n" not in str(exc.value)
    assert not (tmp_path / "out.ptau").exists()
    res = CliRunner().invoke(main, ["ptau", "prepare", str(bad), str(tmp_path / "out.ptau"), "--backend", "cpu"])
    assert res.exit_code == 1 and "error:" in res.output


def test_gpu_backend_without_device(tmp_path: Path) -> None:
    from distprove.backends.gpu import available
    from distprove.errors import BackendUnavailable

    if available():
        pytest.skip("a GPU is present")
    with pytest.raises(BackendUnavailable):
        prepare(MINI / "pot4_0002.ptau", tmp_path / "out.ptau", backend="gpu")
    res = CliRunner().invoke(main, ["ptau", "prepare", str(MINI / "pot4_0002.ptau"), str(tmp_path / "o.ptau"), "--backend", "gpu"])
    assert res.exit_code == 1 and "error:" in res.output and not (tmp_path / "o.ptau").exists()


def test_cli_new_dev_requires_flag(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["ptau", "new", "--power", "2", str(tmp_path / "x.ptau")])
    assert res.exit_code != 0 and not (tmp_path / "x.ptau").exists()


@pytest.mark.parametrize("power", [4, 5])
def test_dev_ptau_prepare_matches_snarkjs(snarkjs: str, tmp_path: Path, power: int) -> None:
    dev = tmp_path / "dev.ptau"
    runner = CliRunner()
    res = runner.invoke(main, ["ptau", "new", "--dev", "--power", str(power), str(dev), "--backend", "cpu"])
    assert res.exit_code == 0, res.output
    assert "WARNING: distprove ptau new --dev: INSECURE" in res.output  # the stderr warning (mixed in here)
    ours = tmp_path / "ours.ptau"
    res = runner.invoke(main, ["ptau", "prepare", str(dev), str(ours), "--backend", "cpu"])
    assert res.exit_code == 0, res.output
    theirs = tmp_path / "theirs.ptau"
    subprocess.run([snarkjs, "powersoftau", "prepare", "phase2", str(dev), str(theirs)], check=True,
                   capture_output=True, timeout=300)
    assert ours.read_bytes() == theirs.read_bytes()


def test_groth16_setup_on_prepared_dev_ptau(snarkjs: str, tmp_path: Path) -> None:
    from distprove.keystore import open_key
    from distprove.prover import prove

    dev, prepared = tmp_path / "dev6.ptau", tmp_path / "dev6_final.ptau"
    new_dev(dev, 6, device="cpu", warn=False)
    prepare(dev, prepared, backend="cpu")
    zkey, vk = tmp_path / "mini.zkey", tmp_path / "vk.json"
    for cmd in (["groth16", "setup", str(MINI / "mini.r1cs"), str(prepared), str(zkey)],
                ["zkey", "export", "verificationkey", str(zkey), str(vk)]):
        subprocess.run([snarkjs, *cmd], check=True, capture_output=True, timeout=300)
    proof = prove(open_key(zkey), str(MINI / "witness.wtns"), backend="cpu")
    proof.write(tmp_path / "proof.json", tmp_path / "public.json")
    assert snarkjs_verify(vk, tmp_path / "public.json", tmp_path / "proof.json", snarkjs)
