"""snarkjs formats: real fixtures parse, decode to the values of SNARKJS_FORMATS.md §10, and
writers round-trip. References are independent: bn254.py's Python-int arithmetic, the r1cs
(for the zkey coefficients), snarkjs's own JSON files and the satisfied constraint system."""

from __future__ import annotations

import json
import os
import random
import struct
from pathlib import Path

import numpy as np
import pytest

from distprove import bn254
from distprove.bn254 import G1, G2, Q, R
from distprove.errors import FormatError
from distprove.formats import (
    CSR,
    PtauHeader,
    check_points,
    lagrange_level,
    open_container,
    proof_to_json,
    public_to_json,
    read_proof,
    read_ptau,
    read_public,
    read_r1cs,
    read_vk,
    read_wtns,
    read_zkey,
    vk_to_json,
    write_container,
    write_json_atomic,
    write_ptau,
    write_r1cs,
    write_wtns,
)
from distprove.formats.container import lt_bound

DATA = Path(__file__).parent / "data"
MINI = DATA / "mini"
FIXTURES = ["mul_chain_1k", "poseidon_k4", "bits_k16", "merkle_d20"]
R2_INV = pow(bn254.FR_MONT * bn254.FR_MONT, -1, R)


def _g1(p):
    return bn254.points_from_limbs(G1, p)[0]


def _g2(p):
    return bn254.points_from_limbs(G2, p)[0]


def _rand_g1(rng: random.Random):
    return bn254.mul(G1, G1.generator, rng.randrange(1, R))


def _rand_g2(rng: random.Random):
    return bn254.mul(G2, G2.generator, rng.randrange(1, R))


# --- zkey ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_zkey_matches_its_vk_and_witness(name: str) -> None:
    z = read_zkey(DATA / name / "circuit_final.zkey")
    vk = read_vk(DATA / name / "verification_key.json")
    assert z.n_public == vk.n_public
    assert _g1(z.alpha1) == vk.alpha1
    assert _g2(z.beta2) == vk.beta2
    assert _g2(z.gamma2) == vk.gamma2 == G2.generator
    assert _g2(z.delta2) == vk.delta2
    assert bn254.points_from_limbs(G1, z.ic) == vk.ic
    assert z.domain_size == 1 << z.power
    assert z.a.shape == z.b1.shape == (z.n_vars, 16)
    assert z.b2.shape == (z.n_vars, 32)
    assert z.c.shape == (z.n_vars - z.n_public - 1, 16)
    assert z.h.shape == (z.domain_size, 16)
    assert not z.a.flags.writeable
    w = read_wtns(DATA / name / "witnesses" / "witness_0.wtns")
    assert w.n_witness == z.n_vars


def test_mini_zkey_header_values() -> None:
    """SNARKJS_FORMATS.md §10.4."""
    z = read_zkey(MINI / "mini_0001.zkey")
    assert (z.n8q, z.n8r, z.n_vars, z.n_public, z.domain_size, z.power, z.n_coefs) == (32, 32, 6, 2, 8, 3, 9)
    assert _g1(z.alpha1) == (
        14515168906467767043633869818442091949875531310118169097753319414787358720260,
        13613094437452827367330606796816068985139768552170473179547122523055994767794,
    )
    assert _g1(z.beta1) == (
        16790254185314233936780004694193576644234686214176869686682165097344594462791,
        7966048670501676163628823274815753592348946548509420457794296832808480819075,
    )
    assert _g1(z.delta1) == (
        19250910971177904982202522540942013387562967744399281106559750574710861438999,
        9697588125371638247170747312658492318426142141274504642978369386006863382996,
    )
    assert _g2(z.gamma2) == G2.generator
    assert _g2(z.delta2)[0] == (
        13830788106782230385653568621009952407909966658400138229526044917118395112246,
        15436394462396622216206588969368951667383281576130181336781274082054064373373,
    )
    assert _g1(z.h[0]) == (
        10197747937981570915003184699521548774551959231949492596465865742840249362561,
        7071232725639990510116816215123544566831046903900606976188579072824120739051,
    )
    assert _g1(z.c[0]) == (
        20395130190778865639863382349061149417473616493733550850338260901678853752385,
        1691336075146335256803436639615186179277568490855170148742116644803215861471,
    )
    # §10.5: B1[0], B1[1], B1[5] are infinity (zero rows)
    b1 = bn254.points_from_limbs(G1, z.b1)
    assert [i for i, p in enumerate(b1) if p is None] == [0, 1, 5]


def test_mini_coefficients_decode() -> None:
    """§10.5: V·R^-2 gives -1 and 1; V·R^-1 would give the wrong values; extra public rows."""
    z = read_zkey(MINI / "mini_0001.zkey")
    v = bn254.ints_from_limbs(z.coef_value)
    coef = [x * R2_INV % R for x in v]
    assert coef[0] == R - 1 and coef[1] == 1
    assert v[1] == bn254.FR_MONT * bn254.FR_MONT % R
    assert v[0] * pow(bn254.FR_MONT, -1, R) % R == 15537367993719455909907449462855742678020201736855642022731641111541721333766
    recs = list(zip(z.coef_matrix.tolist(), z.coef_row.tolist(), z.coef_signal.tolist(), coef))
    assert recs[:2] == [(0, 0, 3, R - 1), (1, 0, 2, 1)]
    assert recs[-3:] == [(0, 3, 0, 1), (0, 4, 1, 1), (0, 5, 2, 1)]


@pytest.mark.parametrize("r1cs_path,zkey_path", [
    (MINI / "mini.r1cs", MINI / "mini_0001.zkey"),
    (DATA / "mul_chain_1k" / "circuit.r1cs", DATA / "mul_chain_1k" / "circuit_final.zkey"),
])
def test_zkey_coefficients_equal_r1cs_terms(r1cs_path: Path, zkey_path: Path) -> None:
    """groth16 setup writes, per constraint, the A then B terms of the r1cs, then the public rows."""
    r = read_r1cs(r1cs_path)
    z = read_zkey(zkey_path)
    expect = []
    for c in range(r.n_constraints):
        for m, M in ((0, r.A), (1, r.B)):
            lo, hi = M.row_ptr[c], M.row_ptr[c + 1]
            expect += [(m, c, int(s), v) for s, v in zip(M.wire[lo:hi], bn254.ints_from_limbs(M.coef[lo:hi]))]
    n_pub = r.n_pub_out + r.n_pub_in
    expect += [(0, r.n_constraints + i, i, 1) for i in range(n_pub + 1)]
    coef = [x * R2_INV % R for x in bn254.ints_from_limbs(z.coef_value)]
    got = list(zip(z.coef_matrix.tolist(), z.coef_row.tolist(), z.coef_signal.tolist(), coef))
    assert got == expect
    assert z.n_vars == r.n_wires and z.n_public == n_pub


def test_read_zkey_skip_point_check() -> None:
    z = read_zkey(MINI / "mini_0001.zkey", check_points=False)
    assert z.n_vars == 6


# --- point checks -------------------------------------------------------------------------


def test_check_points_against_bn254() -> None:
    rng = random.Random(7)
    for g, make in ((G1, _rand_g1), (G2, _rand_g2)):
        pts = [make(rng) for _ in range(12)] + [None, g.generator]
        limbs = bn254.points_to_limbs(g, pts)
        check_points("f", "S", limbs, g)
        for _ in range(6):
            bad = limbs.copy()
            i, j = rng.randrange(len(pts)), rng.randrange(g.limbs)
            bad[i, j] ^= 1 << rng.randrange(32)
            decoded = bn254.ints_from_limbs(bad[i].reshape(-1, 8))
            if any(c >= Q for c in decoded):
                want = "has a coordinate >= q"
            else:
                p = bn254.points_from_limbs(g, bad[i : i + 1])[0]
                assert not bn254.is_on_curve(g, p)
                want = "is not on the curve"
            with pytest.raises(FormatError, match=rf"^f: S point {i} {want}$"):
                check_points("f", "S", bad, g)


def test_lt_bound_matches_ints() -> None:
    rng = random.Random(3)
    vals = [0, 1, R - 1, R, R + 1, Q - 1, Q, 2**256 - 1, R - (1 << 224), R + (1 << 32)]
    vals += [rng.randrange(2**256) for _ in range(200)] + [rng.randrange(R) for _ in range(50)]
    for bound in (R, Q):  # the top limb ties with the bound's: decided by the lower limbs
        top = bound >> 224 << 224
        vals += [top + rng.randrange(1 << 224) for _ in range(40)]
    limbs = bn254.limbs_from_ints(vals)
    for bound in (R, Q):
        assert lt_bound(limbs, bound, chunk=7).tolist() == [v < bound for v in vals]


# --- wtns -----------------------------------------------------------------------------------


def test_mini_witness_values() -> None:
    w = read_wtns(MINI / "witness.wtns")
    assert w.n_witness == 6
    assert bn254.ints_from_limbs(w.values) == [1, 3278, 11, 3, 33, 1089]


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_witnesses_and_public(name: str) -> None:
    z = read_zkey(DATA / name / "circuit_final.zkey", check_points=False)
    for k in range(3):
        w = read_wtns(DATA / name / "witnesses" / f"witness_{k}.wtns")
        vals = bn254.ints_from_limbs(w.values[: z.n_public + 1])
        assert vals[0] == 1
        assert vals[1:] == read_public(DATA / name / "public" / f"public_{k}.json")


def test_write_wtns_roundtrip(tmp_path: Path) -> None:
    rng = random.Random(11)
    vals = [1, 0, R - 1, 2**64, 2**128 - 1] + [rng.randrange(R) for _ in range(100)]
    write_wtns(tmp_path / "w.wtns", vals)
    assert bn254.ints_from_limbs(read_wtns(tmp_path / "w.wtns").values) == vals
    src = read_wtns(MINI / "witness.wtns")
    write_wtns(tmp_path / "m.wtns", src.values)
    assert (tmp_path / "m.wtns").read_bytes() == (MINI / "witness.wtns").read_bytes()
    with pytest.raises(ValueError):
        write_wtns(tmp_path / "bad.wtns", [1, R])
    with pytest.raises(ValueError):
        write_wtns(tmp_path / "bad.wtns", bn254.limbs_from_ints([1, 2**256 - 1]))
    assert not (tmp_path / "bad.wtns").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.wtns", "w.wtns"]


def test_wtns_huge_size_field_accepted_only_when_length_matches(tmp_path: Path) -> None:
    """circom_runtime's size bug is only tolerated for >= 4 GiB data; below that a wrong size fails."""
    data = bytearray((MINI / "witness.wtns").read_bytes())
    # section 2's size field: after header(12) + sec1 entry(12) + 40 bytes + id(4)
    off = 12 + 12 + 40 + 4
    assert struct.unpack_from("<Q", data, off)[0] == 192
    struct.pack_into("<Q", data, off, 191)
    p = tmp_path / "w.wtns"
    p.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="section 2 states 191 bytes, expected nWitness \\* 32 = 192"):
        read_wtns(p)


# --- r1cs -----------------------------------------------------------------------------------


def test_mini_r1cs_decodes() -> None:
    """§10.2."""
    r = read_r1cs(MINI / "mini.r1cs")
    assert (r.n_wires, r.n_pub_out, r.n_pub_in, r.n_prv_in, r.n_labels, r.n_constraints) == (6, 1, 1, 1, 6, 3)
    assert open_container(MINI / "mini.r1cs", "r1cs", 1).order == [2, 1, 3]

    def rows(M: CSR) -> list[list[tuple[int, int]]]:
        co = [c if c < 2**128 else c - R for c in bn254.ints_from_limbs(M.coef)]
        return [list(zip(M.wire[a:b].tolist(), co[a:b])) for a, b in zip(M.row_ptr[:-1], M.row_ptr[1:])]

    assert rows(r.A) == [[(3, -1)], [(4, -1)], [(5, -1)]]
    assert rows(r.B) == [[(2, 1)], [(4, 1)], [(3, 1)]]
    assert rows(r.C) == [[(4, -1)], [(5, -1)], [(1, -1), (2, 1)]]


@pytest.mark.parametrize("r1cs_path,wtns_path", [
    (MINI / "mini.r1cs", MINI / "witness.wtns"),
    (DATA / "mul_chain_1k" / "circuit.r1cs", DATA / "mul_chain_1k" / "witnesses" / "witness_1.wtns"),
])
def test_r1cs_satisfied_by_witness(r1cs_path: Path, wtns_path: Path) -> None:
    r = read_r1cs(r1cs_path)
    w = bn254.ints_from_limbs(read_wtns(wtns_path).values)

    def evals(M: CSR) -> list[int]:
        co = bn254.ints_from_limbs(M.coef)
        wire = M.wire.tolist()
        return [sum(co[t] * w[wire[t]] for t in range(a, b)) % R for a, b in zip(M.row_ptr[:-1], M.row_ptr[1:])]

    a, b, c = evals(r.A), evals(r.B), evals(r.C)
    assert all(x * y % R == z for x, y, z in zip(a, b, c))
    assert len(a) == r.n_constraints


def _rewrite(r, path: Path, labels=None) -> None:
    write_r1cs(path, r.n_wires, r.n_pub_out, r.n_pub_in, r.n_prv_in, r.n_labels, r.A, r.B, r.C,
               r.labels if labels is None else labels)


@pytest.mark.parametrize("path", [MINI / "mini.r1cs", DATA / "mul_chain_1k" / "circuit.r1cs"])
def test_r1cs_rewrite_is_byte_identical(path: Path, tmp_path: Path) -> None:
    r = read_r1cs(path)
    _rewrite(r, tmp_path / "x.r1cs")
    assert (tmp_path / "x.r1cs").read_bytes() == path.read_bytes()


def _random_csr(rng: random.Random, n_rows: int, n_wires: int, max_terms: int) -> CSR:
    counts = [rng.randrange(max_terms + 1) for _ in range(n_rows)]
    row_ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    nnz = int(row_ptr[-1])
    wire = np.array([rng.randrange(n_wires) for _ in range(nnz)], dtype="<u4")
    coef = bn254.limbs_from_ints([rng.choice([0, 1, R - 1, rng.randrange(R)]) for _ in range(nnz)]).reshape(-1, 8)
    return CSR(row_ptr, wire, coef)


def test_r1cs_random_roundtrip_and_unaligned_sections(tmp_path: Path) -> None:
    rng = random.Random(5)
    n_wires, n_rows = 40, 300
    A, B, C = (_random_csr(rng, n_rows, n_wires, 5) for _ in range(3))
    p = tmp_path / "r.r1cs"
    write_r1cs(p, n_wires, 2, 3, 4, 55, A, B, C)
    r = read_r1cs(p)
    assert (r.n_wires, r.n_pub_out, r.n_pub_in, r.n_prv_in, r.n_labels, r.n_constraints) == (n_wires, 2, 3, 4, 55, n_rows)
    assert r.labels.tolist() == list(range(n_wires))
    for got, want in zip((r.A, r.B, r.C), (A, B, C)):
        assert np.array_equal(got.row_ptr, want.row_ptr)
        assert np.array_equal(got.wire, want.wire)
        assert np.array_equal(got.coef, want.coef)
    # an unknown 3-byte section first makes every later section start off a 4-byte boundary
    c = open_container(p, "r1cs", 1)
    q = tmp_path / "u.r1cs"
    write_container(q, "r1cs", 1, [(99, b"xyz")] + [(s, c.raw(s, "")) for s in c.order])
    assert read_container_offset_mod4(q, 2) != 0
    u = read_r1cs(q)
    for got, want in zip((u.A, u.B, u.C), (A, B, C)):
        assert np.array_equal(got.wire, want.wire) and np.array_equal(got.coef, want.coef)


def read_container_offset_mod4(path: Path, sid: int) -> int:
    return open_container(path, path.suffix[1:], 2).sections[sid].offset % 4


# --- ptau -----------------------------------------------------------------------------------


def test_pot4_final_sections() -> None:
    """§10.3: section sizes, generator, tauG1[1], every point on its curve, Lagrange layout."""
    p = read_ptau(MINI / "pot4_final.ptau", check_points=True)
    assert (p.power, p.ceremony_power) == (4, 4)
    c = open_container(MINI / "pot4_final.ptau", "ptau", 1)
    sizes = {s: c.sections[s].size for s in c.order}
    assert sizes == {1: 44, 2: 1984, 3: 2048, 4: 1024, 5: 1024, 6: 128, 7: 3027, 12: 4032, 13: 3968, 14: 1984, 15: 1984}
    assert p.tau_g1.shape == (31, 16) and p.tau_g2.shape == (16, 32)
    assert p.alpha_tau_g1.shape == p.beta_tau_g1.shape == (16, 16) and p.beta_g2.shape == (32,)
    assert p.lagrange_tau_g1.shape == (63, 16) and p.lagrange_tau_g2.shape == (31, 32)
    assert p.lagrange_alpha_tau_g1.shape == p.lagrange_beta_tau_g1.shape == (31, 16)
    tau = bn254.points_from_limbs(G1, p.tau_g1[:2])
    assert tau[0] == G1.generator
    assert tau[1] == (
        628076130051295735731908724394342714069594662631320653744707550443432493689,
        17857655707609282897480098690977815174682222022994082500483283706656879521437,
    )
    assert p.contributions.shape == (3027,) and p.n_contributions == 2
    # independent of check_points: decode and test every point with bn254
    for arr, g in ((p.tau_g1, G1), (p.tau_g2, G2), (p.lagrange_tau_g1, G1), (p.lagrange_tau_g2, G2),
                   (p.beta_g2, G2)):
        assert all(bn254.is_on_curve(g, q) for q in bn254.points_from_limbs(g, arr))
    # level 0 is the identity transform; the level-3 Lagrange points sum to the generator
    assert np.array_equal(lagrange_level(p.lagrange_tau_g1, 0)[0], p.tau_g1[0])
    total = None
    for q in bn254.points_from_limbs(G1, lagrange_level(p.lagrange_tau_g1, 3)):
        total = bn254.add(G1, total, q)
    assert total == G1.generator
    # prepare phase2 copies sections 2-7 unchanged
    before = read_ptau(MINI / "pot4_0002.ptau")
    assert before.lagrange_tau_g1 is None
    assert np.array_equal(before.tau_g1, p.tau_g1) and np.array_equal(before.contributions, p.contributions)


@pytest.mark.parametrize("name", ["pot4_final.ptau", "pot4_0002.ptau"])
def test_write_ptau_byte_identical(name: str, tmp_path: Path) -> None:
    src = MINI / name
    p = read_ptau(src)
    c = open_container(src, "ptau", 1)
    secs: dict = {sid: c.raw(sid, "") for sid in c.order if sid != 1}
    # stream one section in chunks, give another as a limb array
    secs[2] = (p.tau_g1[i : i + 5] for i in range(0, p.tau_g1.shape[0], 5))
    secs[3] = p.tau_g2
    write_ptau(tmp_path / "o.ptau", PtauHeader(p.power, p.ceremony_power), secs)
    assert (tmp_path / "o.ptau").read_bytes() == src.read_bytes()


# --- container ------------------------------------------------------------------------------


def test_container_any_section_order(tmp_path: Path) -> None:
    src = MINI / "mini_0001.zkey"
    c = open_container(src, "zkey", 2)
    assert c.order == list(range(1, 11))
    order = [1, 2, 4, 3, 9, 8, 5, 6, 7, 10]  # groth16 setup's order
    write_container(tmp_path / "o.zkey", "zkey", 1, [(s, c.raw(s, "")) for s in reversed(order)])
    a, b = read_zkey(src), read_zkey(tmp_path / "o.zkey")
    for f in ("alpha1", "ic", "coef_value", "coef_row", "a", "b2", "c", "h"):
        assert np.array_equal(getattr(a, f), getattr(b, f))
    assert open_container(tmp_path / "o.zkey", "zkey", 2).order == list(reversed(order))


# --- JSON -----------------------------------------------------------------------------------


def _fixture_jsons(kind: str) -> list[Path]:
    out = [MINI / f"{kind}.json"] if kind != "verification_key" else [MINI / "verification_key.json"]
    for name in FIXTURES:
        if kind == "verification_key":
            out.append(DATA / name / "verification_key.json")
        else:
            out += sorted((DATA / name / ("proofs" if kind == "proof" else "public")).glob("*.json"))
    return out


def test_json_fixture_roundtrips() -> None:
    for p in _fixture_jsons("proof") + [MINI / "proof_py_rs0.json"]:
        assert proof_to_json(*read_proof(p)) == json.loads(p.read_text())
        assert read_proof(json.loads(p.read_text())) == read_proof(p)
    for p in _fixture_jsons("public"):
        assert public_to_json(read_public(p)) == json.loads(p.read_text())
    for p in _fixture_jsons("verification_key"):
        obj = json.loads(p.read_text())
        vk = read_vk(p)
        assert len(vk.ic) == vk.n_public + 1
        assert vk_to_json(vk.n_public, vk.alpha1, vk.beta2, vk.gamma2, vk.delta2, vk.ic, obj["vk_alphabeta_12"]) == obj


def test_proof_json_random_points_and_infinity(tmp_path: Path) -> None:
    rng = random.Random(13)
    for _ in range(5):
        pts = (_rand_g1(rng), _rand_g2(rng), _rand_g1(rng))
        write_json_atomic(tmp_path / "p.json", proof_to_json(*pts))
        assert read_proof(tmp_path / "p.json") == pts
    obj = proof_to_json(None, None, G1.generator)
    assert obj["pi_a"] == ["0", "1", "0"]
    assert obj["pi_b"] == [["0", "0"], ["1", "0"], ["0", "0"]]
    assert read_proof(obj) == (None, None, G1.generator)


def test_json_jacobian_z_converted_like_snarkjs() -> None:
    rng = random.Random(17)
    a, b, c = _rand_g1(rng), _rand_g2(rng), _rand_g1(rng)
    z1 = rng.randrange(2, Q)
    z2 = (rng.randrange(Q), rng.randrange(1, Q))
    f2 = G2.f
    obj = proof_to_json(a, b, c)
    obj["pi_a"] = [str(a[0] * z1 * z1 % Q), str(a[1] * pow(z1, 3, Q) % Q), str(z1)]
    zz = f2.sqr(z2)
    bx, by = f2.mul(b[0], zz), f2.mul(b[1], f2.mul(zz, z2))
    obj["pi_b"] = [[str(bx[0]), str(bx[1])], [str(by[0]), str(by[1])], [str(z2[0]), str(z2[1])]]
    assert read_proof(obj) == (a, b, c)


def test_public_and_vk_validation() -> None:
    assert read_public(["0", str(R - 1), 5]) == [0, R - 1, 5]
    with pytest.raises(FormatError, match=r"^<public>: public signal 1 = .* is >= r$"):
        read_public(["1", str(R)])
    with pytest.raises(ValueError):
        public_to_json([R])
    vk = json.loads((MINI / "verification_key.json").read_text())
    vk["IC"] = vk["IC"][:-1]
    with pytest.raises(FormatError, match=r"^<vk>: IC has 2 points, expected nPublic \+ 1 = 3$"):
        read_vk(vk)


@pytest.mark.parametrize("mutate,words", [
    (lambda o: o["pi_a"].__setitem__(0, str(Q)), ["pi_a[0]", ">= q"]),
    (lambda o: o["pi_a"].__setitem__(0, str(int(o["pi_a"][0]) ^ 1)), ["pi_a", "not on the G1 curve"]),
    (lambda o: o["pi_b"][1].__setitem__(1, str(int(o["pi_b"][1][1]) ^ 1)), ["pi_b", "not on the G2 curve"]),
    (lambda o: o["pi_c"].pop(), ["pi_c", "3 coordinates"]),
    (lambda o: o["pi_b"].__setitem__(0, ["1"]), ["pi_b[0]", "pair"]),
    (lambda o: o["pi_a"].__setitem__(1, "0x12"), ["pi_a[1]", "decimal"]),
    (lambda o: o["pi_a"].__setitem__(1, -1), ["pi_a[1]", "negative"]),
    (lambda o: o.__setitem__("protocol", "plonk"), ["protocol", "groth16"]),
    (lambda o: o.pop("pi_c"), ["missing pi_c"]),
])
def test_read_proof_rejects(mutate, words) -> None:
    obj = json.loads((MINI / "proof.json").read_text())
    mutate(obj)
    with pytest.raises(FormatError) as e:
        read_proof(obj)
    msg = str(e.value)
    assert msg.startswith("<proof>: ") and "\n" not in msg
    for w in words:
        assert w in msg


def test_json_reader_file_errors(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_text('{"pi_a": [')
    with pytest.raises(FormatError, match=rf"^{p}: not valid JSON"):
        read_proof(p)
    with pytest.raises(FormatError, match="cannot read"):
        read_public(tmp_path / "absent.json")


def test_write_json_atomic_never_partial(tmp_path: Path) -> None:
    p = tmp_path / "out.json"
    write_json_atomic(p, {"a": 1})
    assert json.loads(p.read_text()) == {"a": 1}
    assert oct(os.stat(p).st_mode & 0o777) == oct(0o644)
    with pytest.raises(TypeError):
        write_json_atomic(p, {"a": object()})
    assert json.loads(p.read_text()) == {"a": 1}
    write_json_atomic(p, ["x"])
    assert json.loads(p.read_text()) == ["x"]
    assert [q.name for q in tmp_path.iterdir()] == ["out.json"]


# --- snarkjs reads what we write ------------------------------------------------------------


def _snarkjs(cmd: str, *args: str | os.PathLike[str]) -> tuple[int, str]:
    import subprocess

    res = subprocess.run([cmd, *map(os.fspath, args)], capture_output=True, text=True, timeout=300)
    return res.returncode, res.stdout + res.stderr


def test_snarkjs_reads_written_r1cs_and_wtns(snarkjs: str, tmp_path: Path) -> None:
    """A random satisfiable system: C row i is 1·w[n_in + i] with w[n_in + i] = (A_i·w)(B_i·w)."""
    rng = random.Random(23)
    n_in, n_c = 8, 12
    n_wires = n_in + n_c
    w = [1] + [rng.randrange(R) for _ in range(n_in - 1)]
    rows: dict[str, list[list[tuple[int, int]]]] = {"A": [], "B": [], "C": []}
    for i in range(n_c):
        for m in "AB":
            # distinct wires per linear combination, as circom writes them (snarkjs keeps one term per wire)
            wires = rng.sample(range(n_in + i), rng.randrange(1, 4))
            terms = [(s, rng.choice([1, R - 1, rng.randrange(R)])) for s in wires]
            rows[m].append(terms)
        a, b = (sum(c * w[s] for s, c in rows[m][i]) % R for m in "AB")
        w.append(a * b % R)
        rows["C"].append([(n_in + i, 1)])

    def csr(rs: list[list[tuple[int, int]]]) -> CSR:
        ptr = np.concatenate(([0], np.cumsum([len(r) for r in rs]))).astype(np.int64)
        flat = [t for r in rs for t in r]
        return CSR(ptr, np.array([s for s, _ in flat], dtype="<u4"), bn254.limbs_from_ints([c for _, c in flat]))

    write_r1cs(tmp_path / "c.r1cs", n_wires, 1, 2, 3, n_wires, csr(rows["A"]), csr(rows["B"]), csr(rows["C"]))
    write_wtns(tmp_path / "w.wtns", w)
    rc, out = _snarkjs(snarkjs, "r1cs", "info", tmp_path / "c.r1cs")
    assert rc == 0, out
    for label, value in (("Wires", n_wires), ("Constraints", n_c), ("Private Inputs", 3), ("Public Inputs", 2),
                         ("Outputs", 1)):
        assert f"# of {label}: {value}" in out, out
    rc, out = _snarkjs(snarkjs, "wtns", "check", tmp_path / "c.r1cs", tmp_path / "w.wtns")
    assert rc == 0 and "WITNESS IS CORRECT" in out, out
    rc, _ = _snarkjs(snarkjs, "wtns", "export", "json", tmp_path / "w.wtns", tmp_path / "w.json")
    assert rc == 0 and json.loads((tmp_path / "w.json").read_text()) == [str(v) for v in w]
    w[n_in + 3] = (w[n_in + 3] + 1) % R  # negative control: snarkjs must notice a wrong value
    write_wtns(tmp_path / "w.wtns", w)
    rc, out = _snarkjs(snarkjs, "wtns", "check", tmp_path / "c.r1cs", tmp_path / "w.wtns")
    assert "WITNESS IS CORRECT" not in out


def test_snarkjs_verifies_rewritten_proof(snarkjs: str, tmp_path: Path) -> None:
    name = "mul_chain_1k"
    pts = read_proof(DATA / name / "proofs" / "proof_0.json")
    write_json_atomic(tmp_path / "proof.json", proof_to_json(*pts))
    write_json_atomic(tmp_path / "public.json", public_to_json(read_public(DATA / name / "public" / "public_0.json")))
    vk = read_vk(DATA / name / "verification_key.json")
    ab = json.loads((DATA / name / "verification_key.json").read_text())["vk_alphabeta_12"]
    write_json_atomic(tmp_path / "vk.json", vk_to_json(vk.n_public, vk.alpha1, vk.beta2, vk.gamma2, vk.delta2, vk.ic, ab))
    rc, out = _snarkjs(snarkjs, "groth16", "verify", tmp_path / "vk.json", tmp_path / "public.json", tmp_path / "proof.json")
    assert rc == 0 and "OK" in out, out
