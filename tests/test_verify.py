"""distprove.verify against the snarkjs fixtures, tampered proofs and snarkjs itself."""

from __future__ import annotations

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


def test_verify_many_names_the_failing_proofs() -> None:
    items, expected = _mixed_batch()
    assert 0 < expected.count(False) < len(expected)
    assert verify_many(items) == expected


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
