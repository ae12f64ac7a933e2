"""distprove.verify against the snarkjs fixtures, tampered proofs and snarkjs itself."""

from __future__ import annotations

import functools
import json
import random
import secrets
from pathlib import Path

import pytest
from conftest import DATA_DIR, snarkjs_verify

from distprove import bn254, verifier as verify_mod
from distprove.errors import FormatError
from distprove.formats.jsonio import read_proof, read_public, read_vk
from distprove.verifier import alphabeta_12, verify, verify_many

FOLDERS = ["bits_k16", "merkle_d20", "mul_chain_1k", "poseidon_k4"]


def _fixture_triples() -> list[tuple[Path, Path, Path]]:
    """(vk, public, proof) paths of every genuine snarkjs proof in tests/data."""
    mini = DATA_DIR / "mini"
    out = [(mini / "verification_key.json", mini / "public.json", p) for p in sorted(mini.glob("proof*.json"))]
    for folder in FOLDERS:
        d = DATA_DIR / folder
        for proof in sorted((d / "proofs").glob("proof_*.json")):
            public = d / "public" / proof.name.replace("proof_", "public_")
            out.append((d / "verification_key.json", public, proof))
    return out


TRIPLES = _fixture_triples()
IDS = [f"{vk.parent.name}/{proof.stem}" for vk, _, proof in TRIPLES]
BAD_DIR = DATA_DIR / "bad" / "mul_chain_1k"
BAD_PROOFS = ["witness_flipped", "witness_noncanonical", "witness_truncated"]


def _random_g1() -> bn254.Affine:
    return bn254.mul(bn254.G1, bn254.G1_GEN, 1 + secrets.randbelow(bn254.R - 1))


def _tamper_public(public: list[int]) -> list[int]:
    i = random.randrange(len(public))
    return [(v + 1) % bn254.R if j == i else v for j, v in enumerate(public)]


def _tamper_pi_a(proof: tuple) -> tuple:
    new_a = _random_g1()
    assert new_a != proof[0]
    return (new_a, proof[1], proof[2])


def test_fixture_set_is_complete() -> None:
    assert len(TRIPLES) >= 1 + 3 * len(FOLDERS)
    for triple in TRIPLES:
        assert all(p.is_file() for p in triple), triple


@pytest.mark.parametrize("triple", TRIPLES, ids=IDS)
def test_fixture_proof_verifies(triple: tuple[Path, Path, Path]) -> None:
    assert verify(*triple) is True


@pytest.mark.parametrize("triple", TRIPLES, ids=IDS)
def test_public_signal_plus_one_is_rejected(triple: tuple[Path, Path, Path]) -> None:
    vk, public, proof = triple
    assert verify(read_vk(vk), _tamper_public(read_public(public)), read_proof(proof)) is False


@pytest.mark.parametrize("triple", TRIPLES[:: len(TRIPLES) // 5], ids=IDS[:: len(TRIPLES) // 5])
def test_other_pi_a_is_rejected(triple: tuple[Path, Path, Path]) -> None:
    vk, public, proof = triple
    assert verify(vk, public, _tamper_pi_a(read_proof(proof))) is False


@pytest.mark.parametrize("name", BAD_PROOFS)
def test_proof_of_unsatisfying_witness_is_rejected(name: str) -> None:
    vk = DATA_DIR / "mul_chain_1k" / "verification_key.json"
    assert verify(vk, BAD_DIR / f"public_{name}.json", BAD_DIR / f"proof_{name}.json") is False


def test_parsed_inputs_and_json_objects_are_accepted() -> None:
    vk, public, proof = TRIPLES[0]
    as_json = (json.loads(vk.read_text()), json.loads(public.read_text()), json.loads(proof.read_text()))
    assert verify(*as_json) is True
    assert verify(read_vk(vk), read_public(public), read_proof(proof)) is True


def test_points_at_infinity_are_rejected_not_crashing() -> None:
    vk, public, proof = TRIPLES[0]
    assert verify(vk, public, (None, None, None)) is False
    _, pi_b, pi_c = read_proof(proof)
    assert verify(vk, public, (None, pi_b, pi_c)) is False


def test_malformed_inputs_raise_format_error(tmp_path: Path) -> None:
    vk, public, proof = TRIPLES[0]
    pub = read_public(public)
    pi_a, pi_b, pi_c = read_proof(proof)

    with pytest.raises(FormatError, match="public signal"):
        verify(vk, [bn254.R] + pub[1:], proof)
    with pytest.raises(FormatError, match=r"public\.json: 3 public signals.*nPublic = 2"):
        bad = tmp_path / "public.json"
        bad.write_text(json.dumps([str(v) for v in pub + [7]]))
        verify(vk, bad, proof)
    with pytest.raises(FormatError, match="pi_a is not on"):
        verify(vk, public, ((pi_a[0], (pi_a[1] + 1) % bn254.Q), pi_b, pi_c))
    with pytest.raises(FormatError, match="pi_b is not on"):
        verify(vk, public, (pi_a, (pi_b[0], (pi_b[1][1], pi_b[1][0])), pi_c))
    broken = tmp_path / "proof.json"
    broken.write_text(proof.read_text()[:-20])
    with pytest.raises(FormatError, match="proof.json: not valid JSON"):
        verify(vk, public, broken)
    off = json.loads(proof.read_text())
    off["pi_c"][1] = str((int(off["pi_c"][1]) + 1) % bn254.Q)
    with pytest.raises(FormatError, match="pi_c"):
        verify(vk, public, off)


@pytest.mark.parametrize("vk_path", sorted(DATA_DIR.glob("*/verification_key.json")), ids=lambda p: p.parent.name)
def test_alphabeta_12_matches_snarkjs(vk_path: Path) -> None:
    vk = read_vk(vk_path)
    assert alphabeta_12(vk.alpha1, vk.beta2) == json.loads(vk_path.read_text())["vk_alphabeta_12"]


def test_alphabeta_12_is_bilinear() -> None:
    """Checks the basis change on fresh points: e(k·a, b) == e(a, k·b), and differs from e(a, b)."""
    a = _random_g1()
    b = bn254.mul(bn254.G2, bn254.G2_GEN, 1 + secrets.randbelow(bn254.R - 1))
    k = 2 + secrets.randbelow(1000)
    left = alphabeta_12(bn254.mul(bn254.G1, a, k), b)
    assert left == alphabeta_12(a, bn254.mul(bn254.G2, b, k))
    assert left != alphabeta_12(a, b)
    assert all(0 <= int(c) < bn254.Q for row in left for pair in row for c in pair)


def _mixed_batch() -> tuple[list[tuple], list[bool]]:
    """Genuine proofs of several keys plus tampered ones (public+1, other pi_a, unsatisfying witness), shuffled."""
    items, expected = [], []
    for i, (vk, public, proof) in enumerate(TRIPLES):
        items.append((vk, public, proof))
        expected.append(True)
        if i % 4 == 1:
            items.append((read_vk(vk), _tamper_public(read_public(public)), proof))
            expected.append(False)
        if i % 4 == 3:
            items.append((vk, public, _tamper_pi_a(read_proof(proof))))
            expected.append(False)
    mul_chain_vk = DATA_DIR / "mul_chain_1k" / "verification_key.json"
    items.append((mul_chain_vk, BAD_DIR / "public_witness_flipped.json", BAD_DIR / "proof_witness_flipped.json"))
    expected.append(False)
    order = list(range(len(items)))
    random.shuffle(order)
    return [items[i] for i in order], [expected[i] for i in order]


@pytest.fixture(scope="module")
def pairing_harness(tmp_path_factory: pytest.TempPathFactory):
    """The GPU Miller kernels built for the host (tests/test_pairing_kernel_host.py), or None."""
    from hostbuild import build_harness
    from test_pairing_kernel_host import HARNESS

    return build_harness(tmp_path_factory.mktemp("pairing_host"), "pairing", HARNESS, "f64_mul")


@pytest.fixture(params=["cpu", "gpu"])
def device(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where BatchCheck runs the batch's Miller loop: the host, or the GPU path with numpy standing
    in for CuPy and pairing.cu's kernels run on the host (skipped without a C++ compiler)."""
    if request.param == "gpu":
        from test_pairing_kernel_host import emulate

        lib = request.getfixturevalue("pairing_harness")
        if lib is None:
            pytest.skip("no C++ compiler to build the pairing kernels for the host")
        emulate(lib, monkeypatch)
    return request.param


def test_verify_many_names_the_failing_proofs(device: str) -> None:
    items, expected = _mixed_batch()
    assert 0 < expected.count(False) < len(expected)
    assert verify_many(items, device=device) == expected


def test_verify_many_valid_batch_needs_no_individual_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """An all-valid batch of several keys passes the one batched check (no per-proof fallback)."""
    calls = []
    monkeypatch.setattr(verify_mod, "_check", lambda *a: calls.append(a) or True)
    assert verify_many(TRIPLES) == [True] * len(TRIPLES)
    assert calls == []


def _batch_holds(triples: list) -> bool:
    batch = verify_mod.BatchCheck()
    for t in triples:
        batch.add(*t)
    return batch._batch_holds(range(len(triples)))


def test_batch_check_fails_when_any_proof_is_bad() -> None:
    loaded = [verify_mod._load(*t) for t in TRIPLES[:4]]
    assert _batch_holds(loaded) is True
    key, public, proof = loaded[2]
    assert _batch_holds(loaded[:2] + [(key, _tamper_public(public), proof)] + loaded[3:]) is False
    assert _batch_holds(loaded[:2] + [(key, public, _tamper_pi_a(proof))] + loaded[3:]) is False


def test_batch_check_streams_and_keeps_bad_inputs_out() -> None:
    """Proofs added one at a time give verify_many's results; a malformed one raises in add and
    leaves the batch as it was."""
    items, expected = _mixed_batch()
    batch = verify_mod.BatchCheck()
    for i, item in enumerate(items):
        batch.add(*item)
        if i == 1:
            vk, public, proof = item
            with pytest.raises(FormatError):
                batch.add(vk, [0] * (len(read_public(public)) + 1), proof)
    assert len(batch) == len(items)
    assert batch.results() == expected


def test_verify_many_edge_sizes() -> None:
    assert verify_many([]) == []
    vk, public, proof = TRIPLES[0]
    assert verify_many([(vk, public, proof)]) == [True]
    assert verify_many([(vk, _tamper_public(read_public(public)), proof)]) == [False]


def test_snarkjs_agrees(snarkjs: str, tmp_path: Path) -> None:
    vk, public, proof = TRIPLES[0]
    assert snarkjs_verify(vk, public, proof, snarkjs) is True
    assert verify(vk, public, proof) is True

    tampered = tmp_path / "public.json"
    tampered.write_text(json.dumps([str(v) for v in _tamper_public(read_public(public))]))
    assert snarkjs_verify(vk, tampered, proof, snarkjs) is False
    assert verify(vk, tampered, proof) is False



# --- the batch check: ρ on the G1 side, one shared Miller loop --------------------------------

MINI = DATA_DIR / "mini"
MUL_CHAIN = DATA_DIR / "mul_chain_1k"


@functools.lru_cache(maxsize=1)
def _g2_small_order() -> bn254.Affine:
    """A twist point of order 10069, the smallest prime factor of the G2 cofactor 2q - r."""
    from test_pairing import twist_point_outside_g2

    cofactor = 2 * bn254.Q - bn254.R
    assert cofactor % 10069 == 0
    pt, acc = twist_point_outside_g2(random.Random(41)), None
    for bit in bin(bn254.R * (cofactor // 10069))[2:]:  # bn254.mul reduces its scalar mod r
        acc = bn254.add(bn254.G2, acc, acc)
        if bit == "1":
            acc = bn254.add(bn254.G2, acc, pt)
    assert acc is not None
    return acc


def _in_g2_by_definition(q: bn254.Affine) -> bool:
    return bn254.mul(bn254.G2, q, bn254.R - 1) == bn254.neg(bn254.G2, q)


def test_g2_subgroup_check_agrees_with_its_definition() -> None:
    """The endomorphism test says what r·q == O says: for points of G2, random twist points, and
    points of G2 plus a point of small order (the case a cheap test could miss)."""
    from test_pairing import twist_point_outside_g2

    rng = random.Random(43)
    small = _g2_small_order()
    g2 = [bn254.mul(bn254.G2, bn254.G2_GEN, rng.randrange(1, bn254.R)) for _ in range(3)]
    points = g2 + [twist_point_outside_g2(rng) for _ in range(2)] + [small] + [bn254.add(bn254.G2, q, small) for q in g2]
    assert [verify_mod.in_g2_subgroup(q) for q in points] == [_in_g2_by_definition(q) for q in points]
    assert [verify_mod.in_g2_subgroup(q) for q in points] == [True] * 3 + [False] * 6
    assert verify_mod.in_g2_subgroup(None)


def _rerandomized(proof: tuple, t: int) -> tuple:
    """(t·pi_a, t⁻¹·pi_b, pi_c): another proof that verifies exactly when ``proof`` does."""
    from distprove import curve

    pi_a, pi_b, pi_c = proof
    (a,) = curve.to_affine(bn254.G1, [curve.combination(bn254.G1, (), [(t, pi_a)])])
    (b,) = curve.to_affine(bn254.G2, [curve.combination(bn254.G2, (), [(pow(t, -1, bn254.R), pi_b)])])
    return (a, b, pi_c)


@pytest.fixture(scope="module")
def proved() -> dict[str, tuple]:
    """(vk, public, proof) triples, parsed: proofs made by distprove.prove of mini's witness (three
    blindings) and of that witness with one value changed; snarkjs's mul_chain_1k proofs of three
    witnesses and of witness_flipped (one value changed)."""
    import numpy as np

    from distprove import prove
    from distprove.formats.wtns import read_wtns
    from distprove.prover import open_key

    key = open_key(MINI / "mini_0001.zkey")
    vk = read_vk(MINI / "verification_key.json")
    out = {f"mini{i}": (vk, list(p.public), (p.pi_a, p.pi_b, p.pi_c))
           for i, p in enumerate(prove(key, MINI / "witness.wtns", "cpu", blinding=(3 + i, 5 + 7 * i)) for i in range(3))}
    values = np.array(read_wtns(MINI / "witness.wtns").values)
    values[-1, 0] ^= 1  # the last wire, not a public signal
    p = prove(key, values, "cpu")
    out["mini_changed"] = (vk, list(p.public), (p.pi_a, p.pi_b, p.pi_c))
    vk = read_vk(MUL_CHAIN / "verification_key.json")
    for i in range(3):
        out[f"chain{i}"] = (vk, read_public(MUL_CHAIN / "public" / f"public_{i}.json"), read_proof(MUL_CHAIN / "proofs" / f"proof_{i}.json"))
    out["chain_flipped"] = (vk, read_public(BAD_DIR / "public_witness_flipped.json"), read_proof(BAD_DIR / "proof_witness_flipped.json"))
    return out


def _large_batch(proved: dict[str, tuple], n: int = 64) -> list[tuple]:
    """n valid triples: the genuine proofs of ``proved``, rerandomized, in turn."""
    good = [proved[k] for k in ("mini0", "mini1", "mini2", "chain0", "chain1", "chain2")]
    return [(vk, public, _rerandomized(proof, 2 + i)) for i, (vk, public, proof) in
            ((i, good[i % len(good)]) for i in range(n))]


def _corrupted(kind: str, proved: dict[str, tuple], batch: list[tuple], at: int) -> tuple:
    vk, public, (pi_a, pi_b, pi_c) = batch[at]
    if kind == "unsatisfied_distprove":
        return proved["mini_changed"]
    if kind == "unsatisfied_snarkjs":
        return proved["chain_flipped"]
    if kind == "coordinate":  # y of pi_c negated: still on the curve
        return (vk, public, (pi_a, pi_b, bn254.neg(bn254.G1, pi_c)))
    if kind == "swapped_b":  # pi_b of the next proof (same key)
        return (vk, public, (pi_a, batch[at + 6][2][1], pi_c))
    if kind == "a_c_exchanged":
        return (vk, public, (pi_c, pi_b, pi_a))
    if kind == "public":
        return (vk, _tamper_public(public), (pi_a, pi_b, pi_c))
    raise AssertionError(kind)


KINDS = ["unsatisfied_distprove", "unsatisfied_snarkjs", "coordinate", "swapped_b", "a_c_exchanged", "public"]


def test_proved_fixtures_verify_as_expected(proved: dict[str, tuple]) -> None:
    expect = {k: not k.endswith(("changed", "flipped")) for k in proved}
    assert {k: verify(*t) for k, t in proved.items()} == expect
    assert verify_many(list(proved.values())) == list(expect.values())


def test_large_valid_batch_holds_without_individual_checks(
    proved: dict[str, tuple], monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    batch = _large_batch(proved)
    calls = []
    monkeypatch.setattr(verify_mod, "_check", lambda *a: calls.append(a) or True)
    assert verify_many(batch, device=device) == [True] * len(batch)
    assert calls == []


def test_gpu_batch_is_one_miller_product_without_host_lines(
    proved: dict[str, tuple], monkeypatch: pytest.MonkeyPatch, pairing_harness
) -> None:
    """On the GPU path the host computes no per-proof point and no Miller loop of the batch: one
    batchcheck launch for the 64 proofs (subgroup tests, ρ multiples), then every pair of the batch
    equation, 64 proofs' (-ρ·pi_a, pi_b) and (ρ·pi_c, δ₂) and the two keys' fixed pairs, in one
    Miller launch and one product launch; a pair the kernel flags as degenerate has its rows read
    back and is looped on the host: the valid batch still holds, no proof checked alone."""
    from test_pairing_kernel_host import _EmuModule, emulate

    from distprove import pairing as pr
    from distprove.backends.gpu import batchcheck as gb
    from distprove.backends.gpu import pairing as gp

    if pairing_harness is None:
        pytest.skip("no C++ compiler to build the pairing kernels for the host")

    class Flagging(_EmuModule):  # the kernel's degenerate case for pair 5: value 1, flag set
        def get_function(self, name: str):
            launch = super().get_function(name)
            if name != "pairing_miller_product":
                return launch

            def flagged(grid: tuple, block: tuple, args: tuple) -> None:
                g1, g2, out, flags, n = args
                g1 = g1.copy()
                g1[5] = 0
                launch(grid, block, (g1, g2, out, flags, n))
                flags[5] = 1
            return flagged

    emulate(pairing_harness, monkeypatch)
    emu = Flagging(pairing_harness)
    for m in (gp, gb):
        monkeypatch.setattr(m, "get_module", lambda name: emu)
    host_loops, other_loops, alone = [], [], []
    real_loop, real_prepared = pr.miller_loop, pr.prepared_miller_loop

    def loop(p: bn254.Affine, q: bn254.Affine) -> pr.Fq12:
        host_loops.append((p, q))
        with monkeypatch.context() as m:
            m.setattr(pr, "prepared_miller_loop", real_prepared)
            return real_loop(p, q)

    monkeypatch.setattr(pr, "miller_loop", loop)
    monkeypatch.setattr(pr, "prepared_miller_loop", lambda pairs: other_loops.append(pairs) or real_prepared(pairs))
    monkeypatch.setattr(verify_mod, "_check", lambda *a: alone.append(a) or True)
    batch = _large_batch(proved)
    checker = verify_mod.BatchCheck(device="gpu")
    for t in batch:
        checker.add(*t)
    assert all(t is not None and t[1] is None and t[2] is None for t in checker._terms)  # ρ only
    assert checker.results() == [True] * len(batch)
    assert alone == [] and other_loops == []
    assert emu.launches == [("batchcheck_points", 1), ("pairing_miller_product", 3), ("pairing_fq12_product", 1)]  # 2 * 64 + 2 * 2 pairs
    rho, pi_a, pi_b = checker._terms[5][0], batch[5][2][0], batch[5][2][1]
    assert host_loops == [(verify_mod._negated_multiples([(rho, pi_a)])[0], pi_b)]


def test_unknown_device_is_refused() -> None:
    with pytest.raises(ValueError, match="device"):
        verify_mod.BatchCheck(device="tpu")



@pytest.mark.parametrize("kind", KINDS)
def test_one_bad_proof_in_a_large_batch_is_named(proved: dict[str, tuple], kind: str, device: str) -> None:
    """64 proofs of two keys with one bad proof in the middle: exactly that one is False, as
    verify says (compared one by one for the bad one and its neighbours)."""
    batch = _large_batch(proved)
    at = len(batch) // 2
    batch[at] = _corrupted(kind, proved, batch, at)
    expect = [i != at for i in range(len(batch))]
    assert verify_many(batch, device=device) == expect
    assert [verify(*batch[i]) for i in (at - 1, at, at + 1)] == [True, False, True]


@pytest.mark.parametrize("n", [1, 2, 8])
def test_small_batches_equal_verify_one_by_one(proved: dict[str, tuple], n: int) -> None:
    """Every kind of bad proof, alone or among a few valid ones, gives verify's answer."""
    for kind in KINDS[:: 1 if n == 8 else 3]:
        batch = _large_batch(proved, max(n, 7))[:n]
        batch[n // 2] = _corrupted(kind, proved, _large_batch(proved, 13), 6)
        assert verify_many(batch) == [verify(*t) for t in batch], kind


def test_pi_b_outside_g2_is_checked_alone(proved: dict[str, tuple], monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    """A pi_b outside G2 (snarkjs checks no subgroup) keeps the proof out of the batched
    equation, which needs bilinearity in G1: it is checked on its own, and a batch of valid
    proofs beside it still holds."""
    small = _g2_small_order()
    batch = _large_batch(proved, 8)
    vk, public, (pi_a, pi_b, pi_c) = batch[3]
    batch[3] = (vk, public, (pi_a, bn254.add(bn254.G2, pi_b, small), pi_c))
    alone = []
    check = verify_mod._check
    monkeypatch.setattr(verify_mod, "_check", lambda *a: alone.append(a[2]) or check(*a))
    checker = verify_mod.BatchCheck(device=device)
    for t in batch:
        checker.add(*t)
    assert (checker._terms[3] is None) is (device == "cpu")  # the GPU tests pi_b in results()
    assert checker.results() == [True, True, True, False, True, True, True, True]
    assert checker._terms[3] is None and all(t is not None for i, t in enumerate(checker._terms) if i != 3)
    assert alone == [batch[3][2]]


@pytest.fixture(scope="module")
def pool():
    return verify_mod.check_pool(2)


def test_check_pool_is_kept_and_none_where_processes_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    pool = verify_mod.check_pool(2)
    assert pool is not None and verify_mod.check_pool(2) is pool and verify_mod.check_pool(0) is None
    monkeypatch.setattr(multiprocessing.current_process(), "daemon", True)  # a Dask worker by default
    assert verify_mod.check_pool(2) is None


def test_batch_check_on_a_process_pool(proved: dict[str, tuple], pool, device: str) -> None:
    """With an executor the chunks' work runs in the pool (on the GPU path the device does it, and
    the pool checks the proofs left alone) and gives the same answers: a valid batch of 20 holds
    (chunks of 8, 8 and 4), and one with an unsatisfied proof, a proof whose pi_b is outside G2 and
    a key-less infinity pi_a names exactly those."""
    batch = _large_batch(proved, 20)
    assert verify_many(batch, pool, device) == [True] * 20
    vk, public, (pi_a, pi_b, pi_c) = batch[9]
    batch[9] = (vk, public, (pi_a, bn254.add(bn254.G2, pi_b, _g2_small_order()), pi_c))
    batch[4] = proved["mini_changed"]
    vk, public, (_, pi_b, pi_c) = batch[17]
    batch[17] = (vk, public, (None, pi_b, pi_c))
    checker = verify_mod.BatchCheck(pool, chunk=8, device=device)
    for t in batch:
        checker.add(*t)
    assert len(checker._sent) == (2 if device == "cpu" else 0)  # two chunks sent while adding, the rest at results()
    assert checker.results() == [i not in (4, 9, 17) for i in range(20)]


def test_the_final_exponentiation_runs_on_the_executor(proved: dict[str, tuple], device: str) -> None:
    """With an executor the batch's final exponentiation (pure Python that would hold the GIL
    against the proving thread) runs there, on the device path too, and a batch with a bad proof
    still fails there and names it."""
    from concurrent.futures import ThreadPoolExecutor

    ran: list[str] = []

    class Recording(ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
            ran.append(fn.__name__)
            return super().submit(fn, *args, **kwargs)

    batch = _large_batch(proved, 6)
    with Recording(2) as ex:
        assert verify_many(batch, ex, device) == [True] * 6
        assert ran.count("_final_is_one") == 1
        ran.clear()
        batch[2] = proved["mini_changed"]
        assert verify_many(batch, ex, device) == [i != 2 for i in range(6)]
        assert ran.count("_final_is_one") == 1


def test_rho_halves_give_distinct_coefficients_and_right_multiples() -> None:
    """φ(x, y) = (β·x, y) is multiplication by λ on G1; the shortest nonzero (a, b) with
    a + λ·b ≡ 0 (mod r) (Lagrange-Gauss reduction) is longer than 2^126, so 64-bit halves give
    2^128 - 1 distinct nonzero ρ; and -ρ·P computed from the halves is -(ρ₁ + λ·ρ₂)·P."""
    from fractions import Fraction

    r, lam, beta = bn254.R, verify_mod.GLV_LAMBDA, verify_mod.GLV_BETA
    g = bn254.G1_GEN
    assert (lam * lam + lam + 1) % r == 0 and pow(beta, 3, bn254.Q) == 1 != beta
    assert bn254.mul(bn254.G1, g, lam) == (beta * g[0] % bn254.Q, g[1])
    u, v = (r, 0), (-lam % r, 1)
    norm = lambda w: w[0] * w[0] + w[1] * w[1]  # noqa: E731
    while True:
        if norm(u) < norm(v):
            u, v = v, u
        m = round(Fraction(u[0] * v[0] + u[1] * v[1], norm(v)))
        u = (u[0] - m * v[0], u[1] - m * v[1])
        if norm(u) >= norm(v):
            break
    assert (v[0] + lam * v[1]) % r == 0 and norm(v) > 1 << 252
    for _ in range(3):
        rho = verify_mod._rho()
        assert 0 <= rho[0] < 1 << 64 and 0 <= rho[1] < 1 << 64 and verify_mod._rho_value(rho) != 0
        p = _random_g1()
        assert verify_mod._negated_multiples([(rho, p)]) == [bn254.mul(bn254.G1, p, r - verify_mod._rho_value(rho))]
