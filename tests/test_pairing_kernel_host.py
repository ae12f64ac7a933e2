"""Host-compiled checks of the GPU pairing module (distprove/kernels/pairing.cu, batchcheck.cu)
against pairing.py and verifier.py.

The module builds as plain C++ (DP_INLINE is ``inline`` off the GPU), so a harness runs the
per-thread code on the CPU, in both product builds of field.cuh (CIOS, and the FP64-pipe product
the device uses on sm_90): the Miller loop's Fq12 limbs must equal :func:`pairing.miller_loop`'s,
and the batch check's subgroup answers and ρ multiples verifier.py's, bit for bit on fresh random
inputs. Skipped when no C++ compiler is found.
"""

from __future__ import annotations

import ctypes
import random
from pathlib import Path

import numpy as np
import pytest

from distprove import bn254
from distprove import pairing as pr
from distprove.backends.gpu import pairing as gp
from distprove.backends.gpu import batchcheck as gb
from distprove.formats.jsonio import read_proof, read_public, read_vk
from distprove.verifier import GLV_LAMBDA, _cpub, _negated_multiples, _rho_terms, in_g2_subgroup

from hostbuild import BUILDS, build_harness, ptr
from test_pairing import twist_point_outside_g2

DATA = Path(__file__).resolve().parent / "data" / "mul_chain_1k"

HARNESS = r"""
extern "C" void host_miller(const u32* g1, const u32* g2, u32* out, u32* flags, int k) {
    for (int i = 0; i < k; i++) {
        bool degenerate;
        fq12_store(out + 96 * i, pairing_miller_row(g1, g2, (u64)i, &degenerate));
        flags[i] = degenerate;
    }
}
// The kernels as the host runs them (a block's tree becomes a fold: the product is the same).
extern "C" void host_miller_product(const u32* g1, const u32* g2, u32* out, u32* flags, int k, int block) {
    for (int b = 0; b * block < k; b++) {
        Fq12 acc = fq12_one();
        for (int i = b * block; i < k && i < (b + 1) * block; i++) {
            bool degenerate;
            acc = fq12_mul(acc, pairing_miller_row(g1, g2, (u64)i, &degenerate));
            flags[i] = degenerate;
        }
        fq12_store(out + 96 * b, acc);
    }
}
extern "C" void host_block_product(const u32* in, u32* out, int n, int block) {
    for (int b = 0; b * block < n; b++) {
        Fq12 acc = fq12_one();
        for (int i = b * block; i < n && i < (b + 1) * block; i++) acc = fq12_mul(acc, fq12_load(in + 96 * i));
        fq12_store(out + 96 * b, acc);
    }
}
extern "C" void host_batchcheck(const u32* a, const u32* b, const u32* c, const u32* rho, u32* neg_a, u32* rho_c,
                                u32* inside, int n) {
    for (int i = 0; i < n; i++) batchcheck_row(a, b, c, rho, neg_a, rho_c, inside, (u64)i);
}
extern "C" void host_fq12_product(const u32* in, u32* out, int n) {
    Fq12 acc = fq12_one();
    for (int i = 0; i < n; i++) acc = fq12_mul(acc, fq12_load(in + 96 * i));
    fq12_store(out, acc);
}
"""

@pytest.fixture(scope="module", params=list(BUILDS))
def lib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    built = build_harness(tmp_path_factory.mktemp("pairing_host"), "pairing", HARNESS, request.param)
    if built is None:
        pytest.skip("no C++ compiler to build the host harness")
    return built


def host_miller(lib: ctypes.CDLL, pairs: list[gp.Pair]) -> tuple[list[pr.Fq12], list[int]]:
    """The kernel's per-thread Miller loop over the pairs: the values and the degenerate flags."""
    g1, g2 = gp.pairs_to_limbs(pairs)
    out = np.full((len(pairs), gp.FQ12_WORDS), 0xDEADBEEF, dtype="<u4")
    flags = np.full(len(pairs), 7, dtype="<u4")
    lib.host_miller(ptr(g1), ptr(g2), ptr(out), ptr(flags), ctypes.c_int(len(pairs)))
    assert all(v < bn254.Q for v in bn254.ints_from_limbs(out.reshape(-1, 8))), "not fully reduced"
    return gp.fq12_from_limbs(out), flags.tolist()


def host_product(lib: ctypes.CDLL, values: list[pr.Fq12]) -> pr.Fq12:
    rows = gp.fq12_to_limbs(values)
    out = np.zeros((1, gp.FQ12_WORDS), dtype="<u4")
    lib.host_fq12_product(ptr(rows), ptr(out), ctypes.c_int(len(values)))
    return gp.fq12_from_limbs(out)[0]


def _g1(rng: random.Random) -> bn254.Affine:
    return bn254.mul(bn254.G1, bn254.G1_GEN, rng.randrange(1, bn254.R))


def _g2(rng: random.Random) -> bn254.Affine:
    return bn254.mul(bn254.G2, bn254.G2_GEN, rng.randrange(1, bn254.R))


def test_miller_loop_equals_pairing_py(lib: ctypes.CDLL) -> None:
    rng = random.Random()  # fresh pairs every run; the seed is in the failure message
    seed = rng.randrange(1 << 32)
    rng.seed(seed)
    p, q = _g1(rng), _g2(rng)
    pairs = [(_g1(rng), _g2(rng)) for _ in range(4)]
    pairs += [
        (bn254.G1_GEN, bn254.G2_GEN),
        (bn254.neg(bn254.G1, p), q),  # P = -P'
        (p, bn254.neg(bn254.G2, q)),  # Q = -Q'
        (None, q), (p, None), (None, None),  # infinity: f = 1
        (p, twist_point_outside_g2(rng)),  # snarkjs takes pi_b off G2's subgroup too
    ]
    got, flags = host_miller(lib, pairs)
    assert flags == [0] * len(pairs)
    for i, (pair, f) in enumerate(zip(pairs, got)):
        assert f == pr.miller_loop(*pair), f"pair {i}, seed {seed}"
    assert got[7] == got[8] == got[9] == pr.ONE
    assert pr.final_exponentiation_fast(pr.mul(got[5], pr.miller_loop(p, q))) == pr.ONE  # e(-P, Q) e(P, Q) = 1


def test_degenerate_pair_is_flagged(lib: ctypes.CDLL) -> None:
    """A Q with y = 0 makes the first tangent vertical (pairing.py goes to py_ecc's loop): the kernel
    writes 1 and flags the pair for the host."""
    p = bn254.mul(bn254.G1, bn254.G1_GEN, 5)
    got, flags = host_miller(lib, [(p, ((3, 4), (0, 0))), (p, bn254.G2_GEN)])
    assert flags == [1, 0]
    assert got[0] == pr.ONE and got[1] == pr.miller_loop(p, bn254.G2_GEN)


def test_fq12_product_equals_pairing_py(lib: ctypes.CDLL) -> None:
    rng = random.Random()
    vals = [tuple(tuple((pr.P.__class__(rng.randrange(bn254.Q)), pr.P.__class__(rng.randrange(bn254.Q)))
                        for _ in range(3)) for _ in range(2)) for _ in range(5)]
    want = pr.ONE
    for v in vals:
        want = pr.mul(want, v)
    assert host_product(lib, vals) == want
    assert gp.fq12_from_limbs(gp.fq12_to_limbs(vals)) == vals


@pytest.mark.parametrize("corrupt", [False, True])
def test_groth16_proof_check(lib: ctypes.CDLL, corrupt: bool) -> None:
    """The kernel's values for a snarkjs proof's pairs, with the key's fixed pairs from the host,
    pass pairing.product_is_one; a corrupted pi_a fails."""
    key = read_vk(DATA / "verification_key.json")
    public = read_public(DATA / "public" / "public_0.json")
    pi_a, pi_b, pi_c = read_proof(DATA / "proofs" / "proof_0.json")
    if corrupt:
        pi_a = bn254.add(bn254.G1, pi_a, bn254.G1_GEN)
    device_pairs = [(bn254.neg(bn254.G1, pi_a), pi_b), (pi_c, key.delta2)]
    got, flags = host_miller(lib, device_pairs)
    assert flags == [0, 0]
    fixed = pr.multi_miller_loop([(_cpub(key, public), key.gamma2), (key.alpha1, key.beta2)])
    assert pr.product_is_one([host_product(lib, got), fixed]) is not corrupt


class _EmuModule:
    """pairing.cu's kernels as backends/gpu/pairing.py launches them, run by the host harness."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.launches: list[tuple[str, int]] = []

    def get_function(self, name: str):
        def launch(grid: tuple, block: tuple, args: tuple) -> None:
            self.launches.append((name, grid[0]))
            arrays, n = [ptr(a) for a in args[:-1]], ctypes.c_int(int(args[-1]))
            if name == "pairing_miller":
                self.lib.host_miller(*arrays, n)
            elif name == "pairing_miller_product":
                self.lib.host_miller_product(*arrays, n, ctypes.c_int(block[0]))
            elif name == "batchcheck_points":
                self.lib.host_batchcheck(*arrays, n)
            else:
                assert name == "pairing_fq12_product"
                self.lib.host_block_product(*arrays, n, ctypes.c_int(block[0]))
        return launch


def emulate(lib: ctypes.CDLL, monkeypatch: pytest.MonkeyPatch) -> _EmuModule:
    """backends/gpu/pairing.py and batchcheck.py with numpy for CuPy and the host harness for the kernels."""
    import sys
    import types

    from conftest import host_cupy

    fake = types.SimpleNamespace(**vars(host_cupy()), asarray=np.asarray, zeros=np.zeros, concatenate=np.concatenate)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    mod = _EmuModule(lib)
    for m in (gp, gb):
        monkeypatch.setattr(m, "get_module", lambda name: mod)
    return mod


@pytest.fixture
def emulated(lib: ctypes.CDLL, monkeypatch: pytest.MonkeyPatch) -> _EmuModule:
    return emulate(lib, monkeypatch)


@pytest.mark.parametrize("k", [1, 7, 70])
def test_host_side_emulated(emulated: _EmuModule, monkeypatch: pytest.MonkeyPatch, k: int) -> None:
    """miller_loops / miller_product: limbs up, one Miller launch, product launches of fan-in 64
    down to one row, flagged pairs from the host; here one degenerate pair among k."""
    rng = random.Random(k)
    p, dp, q = _g1(rng), _g1(rng), _g2(rng)
    pairs = []
    for _ in range(k):
        pairs.append((p, q))
        p = bn254.add(bn254.G1, p, dp)
    bad = (pairs[k // 2][0], ((3, 4), (0, 0)))
    pairs[k // 2] = bad
    marker: pr.Fq12 = ((pr.F2_ONE, pr.F2_ONE, pr.F2_ZERO), pr.F6_ZERO)  # stands for py_ecc's value there
    real_loop = pr.miller_loop
    monkeypatch.setattr(pr, "miller_loop", lambda a, b: marker if (a, b) == bad else real_loop(a, b))
    want = [pr.miller_loop(a, b) for a, b in pairs]
    assert gp.miller_loops(pairs) == want
    emulated.launches.clear()
    prod = pr.ONE
    for f in want:
        prod = pr.mul(prod, f)
    assert gp.miller_product(pairs) == prod
    blocks = -(-k // gp.BLOCK)
    assert emulated.launches == [("pairing_miller_product", blocks)] + ([("pairing_fq12_product", 1)] if blocks > 1 else [])
    assert gp.miller_loops([]) == [] and gp.miller_product([]) == pr.ONE


def test_pairs_to_limbs_equals_points_to_limbs() -> None:
    """The vectorised Montgomery encoding gives bn254's per-integer one: edge values of Fq, random
    points as ints and as gmpy2 integers, infinity on either side."""
    rng = random.Random()
    edges = [0, 1, 2, bn254.Q - 1, bn254.Q - 2, bn254.FQ_MONT_INV, (1 << 253) - 1, (1 << 253) + 1]
    values = edges + [rng.randrange(bn254.Q) for _ in range(3000)]
    assert (gp.mont_limbs(values) == bn254.limbs_from_ints([bn254.fq_to_mont(v) for v in values])).all()
    assert gp.mont_limbs([]).shape == (0, 8)
    pairs: list[gp.Pair] = [(_g1(rng), _g2(rng)) for _ in range(3)]
    pairs += [(None, pairs[0][1]), (pairs[1][0], None), (None, None)]
    mpz = pr.P.__class__
    as_mpz = [(None if p is None else (mpz(p[0]), mpz(p[1])), q) for p, q in pairs]
    for ps in (pairs, as_mpz):
        g1, g2 = gp.pairs_to_limbs(ps)
        assert (g1 == bn254.points_to_limbs(bn254.G1, [p for p, _ in pairs])).all()
        assert (g2 == bn254.points_to_limbs(bn254.G2, [q for _, q in pairs])).all()


# --- the batch check's per-proof step (batchcheck.cu) ----------------------------------------


def host_batchcheck(lib: ctypes.CDLL, proofs: list, rhos: list) -> tuple[list[bool], list, list]:
    """The kernel's per-thread step over (pi_a, pi_b, pi_c) proofs and (ρ₁, ρ₂) coefficients: the
    subgroup answers, -ρ·pi_a and ρ·pi_c as affine points."""
    a, b, c, rho = gb.proof_rows(proofs, rhos)
    n = len(proofs)
    neg_a, rho_c = (np.full((n, 16), 0xDEADBEEF, dtype="<u4") for _ in range(2))
    inside = np.full(n, 7, dtype="<u4")
    lib.host_batchcheck(ptr(a), ptr(b), ptr(c), ptr(rho), ptr(neg_a), ptr(rho_c), ptr(inside), ctypes.c_int(n))
    assert set(inside.tolist()) <= {0, 1}
    assert all(v < bn254.Q for v in bn254.ints_from_limbs(np.concatenate([neg_a, rho_c]).reshape(-1, 8))), "not fully reduced"
    return ([bool(v) for v in inside], bn254.points_from_limbs(bn254.G1, neg_a), bn254.points_from_limbs(bn254.G1, rho_c))


def _rho_multiple(rho: tuple[int, int], p: bn254.Affine) -> bn254.Affine:
    from distprove import curve

    return curve.to_affine(bn254.G1, [curve.combination(bn254.G1, (), _rho_terms(rho, p))])[0]


def test_batchcheck_equals_verifier_py(lib: ctypes.CDLL) -> None:
    """Per proof, the kernel's pi_b subgroup answer is verifier.in_g2_subgroup's and its rows are
    verifier.py's -ρ·pi_a (_negated_multiples) and ρ·pi_c, zero rows where pi_b is outside G2: on
    fresh random points, pi_b in G2, random twist points, a point of order 10069 and G2 points
    plus it, infinity (pi_b, pi_a, pi_c), and ρ halves 0, 1, 2^64 - 1 and random. (No twist point
    but infinity has an order dividing x: gcd(x, 2q - r) = 1, so [x]Q is never infinity here.)"""
    from test_verify import _g2_small_order

    rng = random.Random()
    seed = rng.randrange(1 << 32)
    rng.seed(seed)
    small = _g2_small_order()
    g2 = [_g2(rng) for _ in range(4)]
    bs = g2 + [twist_point_outside_g2(rng) for _ in range(2)] + [small, bn254.add(bn254.G2, g2[0], small), None,
                                                                 bn254.neg(bn254.G2, g2[1])]
    top = (1 << 64) - 1
    halves = {0: (0, 1), 1: (1, 0), 2: (1, 1), 3: (0, rng.randrange(1 << 64)), 8: (0, 0), 9: (top, top),
              11: (rng.randrange(1 << 64), 0)}
    proofs, rhos = [], []
    for i, b in enumerate(bs + g2[:3]):
        a, c = _g1(rng), _g1(rng)
        if i == len(bs):
            a = None
        if i in (2, len(bs) + 1):
            c = None
        proofs.append((a, b, c))
        rhos.append(halves.get(i) or (rng.randrange(1 << 64), rng.randrange(1 << 64)))
    inside, neg_a, rho_c = host_batchcheck(lib, proofs, rhos)
    want_inside = [in_g2_subgroup(b) for _, b, _ in proofs]
    assert want_inside == [True] * 4 + [False] * 4 + [True] * 5, seed
    assert inside == want_inside, seed
    for i, ((a, _, c), rho, ok) in enumerate(zip(proofs, rhos, want_inside)):
        want_a = _negated_multiples([(rho, a)])[0] if ok else None
        want_c = _rho_multiple(rho, c) if ok else None
        assert (neg_a[i], rho_c[i]) == (want_a, want_c), f"proof {i}, seed {seed}"
    assert neg_a[3] == bn254.mul(bn254.G1, bn254.neg(bn254.G1, proofs[3][0]), rhos[3][1] * GLV_LAMBDA % bn254.R)
    assert neg_a[8] is None and rho_c[2] is None and rho_c[11] is None  # ρ = 0, pi_c infinity
