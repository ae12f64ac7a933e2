"""The whole CPU pipeline on the mini fixture against SNARKJS_FORMATS.md §10.6 (r = s = 0).

Also home of :func:`mini_key` / :func:`mini_witness`, the in-memory mini key the other CPU
stage tests share.
"""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

from distprove import bn254
from distprove.backends.cpu import CpuBackend
from distprove.backends.cpu import msm as cpu_msm
from distprove.bn254 import G1, G2, R
from distprove.formats.jsonio import read_proof
from distprove.formats.wtns import read_wtns
from distprove.formats.zkey import read_zkey
from distprove.groth16 import MSM_NAMES, msm_group
from distprove.stages.assemble import assemble
from distprove.stages.gather import csr_from_coefficients
from distprove.stages.msm import combine, default_window, num_windows, split_windows

MINI = Path(__file__).parent / "data" / "mini"

# SNARKJS_FORMATS.md §10.6 (computed by snarkjs's own pipeline, standard form).
A_EVALS = [R - 3, R - 33, R - 1089, 1, 3278, 11, 0, 0]
B_EVALS = [11, 33, 3, 0, 0, 0, 0, 0]
C_EVALS = [R - 33, R - 1089, R - 3267, 0, 0, 0, 0, 0]
HS = [
    18997034122432618719033972709991166449468395402579575836192166551046375454380,
    15863768149815087380992357873277241754967900804831566667275718473033957578205,
    19949499178164639350434585865237504046692395248128738502853100062563962933586,
    13520904491886016880880043915809997345968743997052069440225219084441329436338,
    10073397726290756119698005777343129207088954001054290138124319088233880534254,
    16271724388049243941349852464550706694344436425578726254452986603613685429057,
    17596443072543876271756430714747032443526827758619541614617622802361922969598,
    2640503947973956252648380841643916272821259464339671850674439314227880300788,
]
MSM_RESULTS = {
    "A": (
        8917963452648694978664691925539717467810351446792365815711087179485883063846,
        17928256421373442263301107922509718589391902129227194845197273323419504260426,
    ),
    "B1": (
        14546409428230813611257312774358558034409978206558698934224343969866272318242,
        14560048483400221146662975974991622390800731786429810799742018405215554918946,
    ),
    "B2": (
        (
            2048123182764412195671249417509024533730992615146155573536754671267157649909,
            1893088333536357454905568053524092145456997384521356186945457713757868380665,
        ),
        (
            20263068594928484057518570518529323475120459567486665314733619637653850474258,
            2183994620960937364265152763761412742597528510861218339602191528487194926231,
        ),
    ),
    "C": (
        10041595454828868158038661550121863343275698991868034203683928394803387551162,
        14366220875402224337729199020330233451711790965610912689798490354589876238313,
    ),
    "H": (
        12015799720012271695542076247887673258524014628689072352276857127063126328175,
        16491891066478485305297700438717684084453125214837430103982590714289289112753,
    ),
}


def mini_key() -> types.SimpleNamespace:
    """The mini zkey as the duck-typed key object the backends take (in memory, CSR built here)."""
    z = read_zkey(MINI / "mini_0001.zkey")
    key = types.SimpleNamespace(
        n_vars=z.n_vars,
        n_public=z.n_public,
        domain_size=z.domain_size,
        content_hash="mini_0001",
        a=z.a,
        b1=z.b1,
        b2=z.b2,
        c=z.c,
        h=z.h,
        points={
            name: bn254.points_from_limbs(G2 if name.endswith("2") else G1, getattr(z, name))[0]
            for name in ("alpha1", "beta1", "beta2", "delta1", "delta2")
        },
    )
    for m, which in (("a", 0), ("b", 1)):
        row_ptr, signal, value = csr_from_coefficients(
            z.coef_matrix, z.coef_row, z.coef_signal, z.coef_value, which, z.domain_size
        )
        setattr(key, f"{m}_row_ptr", row_ptr)
        setattr(key, f"{m}_signal", signal)
        setattr(key, f"{m}_value", value)
    return key


def mini_witness() -> np.ndarray:
    """mini's witness.wtns as (n_vars, 8) uint32 standard form."""
    return np.array(read_wtns(MINI / "witness.wtns").values)


def run_msms(backend: CpuBackend, key, witness: np.ndarray, hs: np.ndarray, parts: int) -> dict:
    """The five MSMs, each split into ``parts`` window ranges and combined on the host."""
    out = {}
    for which in MSM_NAMES:
        group = msm_group(which)
        scalars, n = (hs, key.domain_size) if which == "H" else (witness, key.n_vars)
        c = default_window(n, group)
        sums: dict = {}
        for lo, hi in split_windows(num_windows(c), parts):
            sums.update(zip(range(lo, hi), backend.msm_windows(key, which, scalars, c, lo, hi)))
        out[which] = combine(group, sums, c)
    return out


@pytest.mark.parametrize("parts,use_gmpy2", [(1, False), (3, False), (2, True)])
def test_mini_pipeline_matches_snarkjs_vectors(parts: int, use_gmpy2: bool) -> None:
    if use_gmpy2 and not cpu_msm.mpz_available():
        pytest.skip("gmpy2 not installed")
    key, w = mini_key(), mini_witness()
    be = CpuBackend(use_gmpy2=use_gmpy2)
    evals = be.gather(key, be.load_witness(key, w))
    assert list(evals.a) == A_EVALS
    assert list(evals.b) == B_EVALS
    assert list(evals.c) == C_EVALS
    hs = be.h_scalars(key, evals)
    assert bn254.ints_from_limbs(be.to_host(hs)) == HS
    results = run_msms(be, key, w, hs, parts)
    for which in MSM_NAMES:
        assert results[which] == MSM_RESULTS[which], which
    proof = assemble(key.points, results, 0, 0)
    assert proof == read_proof(MINI / "proof_py_rs0.json")


def test_assemble_blinding_matches_formula() -> None:
    """Random (r, s): assemble equals §7.5 evaluated independently with bn254.mul/add."""
    import secrets

    key = mini_key()
    r, s = secrets.randbelow(R), secrets.randbelow(R)
    vk, m = key.points, MSM_RESULTS
    pi_a, pi_b, pi_c = assemble(vk, m, r, s)

    def add(g, *pts):
        acc = None
        for p in pts:
            acc = bn254.add(g, acc, p)
        return acc

    exp_a = add(G1, m["A"], vk["alpha1"], bn254.mul(G1, vk["delta1"], r))
    exp_b = add(G2, m["B2"], vk["beta2"], bn254.mul(G2, vk["delta2"], s))
    b1 = add(G1, m["B1"], vk["beta1"], bn254.mul(G1, vk["delta1"], s))
    exp_c = add(
        G1,
        m["C"],
        m["H"],
        bn254.mul(G1, exp_a, s),
        bn254.mul(G1, b1, r),
        bn254.neg(G1, bn254.mul(G1, vk["delta1"], r * s % R)),
    )
    assert (pi_a, pi_b, pi_c) == (exp_a, exp_b, exp_c), f"r={r} s={s}"
