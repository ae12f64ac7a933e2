"""End to end on the CPU backend: every fixture witness proves, and snarkjs and distprove agree.

Each proof is checked by ``snarkjs groth16 verify`` and by distprove's pairing check; the same
proof with one public signal changed must be rejected by both.
"""

from __future__ import annotations

import json
from pathlib import Path

import dask
import pytest

from conftest import snarkjs_verify
from distprove import bn254
from distprove.formats.jsonio import write_json_atomic
from distprove.keystore import import_key
from distprove.prover import prove
from distprove.verifier import verify, verify_many

DATA = Path(__file__).parent / "data"
FIXTURES = ["mul_chain_1k", "poseidon_k4", "bits_k16", "merkle_d20"]


def _cases() -> list[tuple[str, Path, Path]]:
    cases = [("mini", DATA / "mini" / "mini_0001.zkey", DATA / "mini" / "witness.wtns")]
    for name in FIXTURES:
        for w in sorted((DATA / name / "witnesses").glob("*.wtns")):
            cases.append((name, DATA / name / "circuit_final.zkey", w))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("keys")
    out = {}
    for name, zkey, _ in CASES:
        if name not in out:
            out[name] = import_key(zkey, root / f"{name}.zarr")
    return out


@pytest.mark.parametrize(("name", "zkey", "witness"), CASES, ids=[f"{c[0]}-{c[2].stem}" for c in CASES])
def test_proof_verifies_with_snarkjs_and_distprove(
    name: str, zkey: Path, witness: Path, stores: dict, snarkjs: str, tmp_path: Path
) -> None:
    key = stores[name]
    proof = prove(key, witness, backend="cpu")
    vk_path = DATA / name / "verification_key.json"
    proof_path, public_path = tmp_path / "proof.json", tmp_path / "public.json"
    proof.write(proof_path, public_path)

    # The public signals are the witness's w[1..nPublic].
    from distprove.formats.wtns import read_wtns

    w = bn254.ints_from_limbs(read_wtns(witness).values)
    assert proof.public == w[1 : 1 + key.n_public]

    assert verify(vk_path, public_path, proof_path)
    assert snarkjs_verify(vk_path, public_path, proof_path, snarkjs)

    # One public signal changed: both verifiers reject.
    tampered = [str((int(v) + 1) % bn254.R) if i == 0 else v for i, v in enumerate(json.loads(public_path.read_text()))]
    bad_public = tmp_path / "public_tampered.json"
    write_json_atomic(bad_public, tampered)
    assert not verify(vk_path, bad_public, proof_path)
    assert not snarkjs_verify(vk_path, bad_public, proof_path, snarkjs)


def test_fresh_blinding_every_proof(stores: dict) -> None:
    key = stores["mini"]
    witness = DATA / "mini" / "witness.wtns"
    p1, p2 = prove(key, witness, backend="cpu"), prove(key, witness, backend="cpu")
    assert p1.pi_a != p2.pi_a and p1.pi_c != p2.pi_c
    assert verify_many([(key.vk_json(), p.public_json(), p.to_json()) for p in (p1, p2)]) == [True, True]


def test_rs_zero_reproduces_reference_proof(stores: dict) -> None:
    """With r = s = 0 the proof is deterministic: SNARKJS_FORMATS.md §10.6's proof_py_rs0.json."""
    proof = prove(stores["mini"], DATA / "mini" / "witness.wtns", backend="cpu", blinding=(0, 0))
    expected = json.loads((DATA / "mini" / "proof_py_rs0.json").read_text())
    got = proof.to_json()
    for k in ("pi_a", "pi_b", "pi_c"):
        assert got[k] == expected[k], k


@pytest.mark.parametrize("mode", [{"overlap_h": False}, {"profile": True}])
def test_stage_orders_give_the_same_proof(stores: dict, mode: dict) -> None:
    """H beside the witness MSMs (the default), H first, and one MSM at a time: the same proof
    with the same blinding, and the timings name each order's stages."""
    key, witness = stores["poseidon_k4"], sorted((DATA / "poseidon_k4" / "witnesses").glob("*.wtns"))[0]
    default = prove(key, witness, backend="cpu", blinding=(5, 7))
    other = prove(key, witness, backend="cpu", blinding=(5, 7), **mode)
    assert (other.pi_a, other.pi_b, other.pi_c, other.public) == (default.pi_a, default.pi_b, default.pi_c, default.public)
    assert "ntt" not in default.timings and {"witness", "gather", "msm", "assemble"} <= set(default.timings)
    assert "ntt" in other.timings and ("msm_H" in other.timings) == ("profile" in mode)


class _Steps:
    """start and finish for pipelined()'s tests, each call logged: item 2's start raises, item 4's
    waiter and item 5's finish; ``live`` holds the items started and not yet waited for, ``most``
    the most it held."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.live: set[int] = set()
        self.most = 0

    def start(self, i: int):
        self.log.append(f"start {i}")
        if i == 2:
            raise ValueError("bad witness 2")
        self.live.add(i)
        self.most = max(self.most, len(self.live))

        def wait() -> int:
            self.log.append(f"wait {i}")
            self.live.discard(i)
            if i == 4:
                raise RuntimeError("device 4")
            return 10 * i

        return wait

    def finish(self, i: int, r: int) -> str:
        self.log.append(f"finish {i}")
        if i == 5:
            raise KeyError("host 5")
        return f"ok {i} {r}"


def test_pipelined_order_overlap_and_failures() -> None:
    """pipelined(): item i's finish runs after item i + 1 has started and before item i + 1's
    waiter; results come in item order; a failing start, waiter or finish fails its item alone;
    a failed() that raises stops the run there."""
    from distprove.prover import pipelined

    steps = _Steps()
    log, start, finish = steps.log, steps.start, steps.finish
    out = list(pipelined(range(7), start, finish, lambda i, e: f"failed {i}: {type(e).__name__}"))
    assert out == ["ok 0 0", "ok 1 10", "failed 2: ValueError", "ok 3 30", "failed 4: RuntimeError",
                   "failed 5: KeyError", "ok 6 60"]
    assert log[:6] == ["start 0", "wait 0", "start 1", "finish 0", "wait 1", "start 2"]
    for i in (1, 3, 5):  # the next item starts before this one's host work
        assert log.index(f"start {i + 1}") < log.index(f"finish {i}")

    def raising(i: int, e: Exception) -> str:
        raise e

    gen = pipelined(range(7), start, finish, raising)
    assert [next(gen), next(gen)] == ["ok 0 0", "ok 1 10"]
    with pytest.raises(ValueError, match="bad witness 2"):
        next(gen)


def test_pipelined_two_deep_starts_the_next_item_before_waiting_and_fails_items_alone() -> None:
    """pipelined(depth=2): item i + 1 starts (after its prefetch) before item i's waiter is
    called, and item i's finish runs after item i + 2's start; results still come in item order,
    a failing prefetch, start, waiter or finish fails its item alone, and the last items drain."""
    from distprove.prover import pipelined

    steps = _Steps()
    log = steps.log

    def prefetch(i: int) -> int:
        log.append(f"prefetch {i}")
        if i == 6:
            raise ValueError("bad witness 6")
        return i

    out = list(pipelined(range(9), steps.start, steps.finish, lambda i, e: f"failed {i}: {type(e).__name__}", prefetch,
                         depth=2))
    assert out == ["ok 0 0", "ok 1 10", "failed 2: ValueError", "ok 3 30", "failed 4: RuntimeError",
                   "failed 5: KeyError", "failed 6: ValueError", "ok 7 70", "ok 8 80"]
    assert log[:8] == ["prefetch 0", "start 0", "prefetch 1", "start 1", "prefetch 2", "wait 0", "start 2", "finish 0"]
    assert steps.most == 2 and not steps.live
    for i in (0, 3, 7):
        assert log.index(f"start {i + 1}") < log.index(f"wait {i}") < log.index(f"finish {i}")
    for i in (0, 1, 3):
        assert log.index(f"start {i + 2}") < log.index(f"finish {i}")
    assert "start 6" not in log
    with pytest.raises(ValueError, match="depth"):
        list(pipelined(range(2), steps.start, steps.finish, lambda i, e: e, depth=0))


def test_pipelined_prefetch_runs_beside_the_item_before_and_fails_its_item_alone() -> None:
    """With prefetch: start gets prefetch(item); item i + 1's prefetch runs after item i's start
    and item i - 1's finish (and the consumer's handling of it), before item i's waiter; a
    prefetch that raises fails its own item, at its turn, and nothing else."""
    from distprove.prover import pipelined

    log: list[str] = []

    def prefetch(i: int) -> str:
        log.append(f"prefetch {i}")
        if i == 3:
            raise ValueError("bad witness 3")
        return f"loaded {i}"

    def start(ready: str):
        log.append(f"start {ready}")
        i = int(ready.split()[-1])
        return lambda: (log.append(f"wait {i}"), 10 * i)[1]

    def finish(i: int, r: int) -> str:
        log.append(f"finish {i}")
        return f"ok {i} {r}"

    out = []
    for res in pipelined(range(6), start, finish, lambda i, e: f"failed {i}: {e}", prefetch):
        log.append(f"consumed {res.split()[1].rstrip(':')}")
        out.append(res)
    assert out == ["ok 0 0", "ok 1 10", "ok 2 20", "failed 3: bad witness 3", "ok 4 40", "ok 5 50"]
    assert log[:8] == ["prefetch 0", "start loaded 0", "prefetch 1", "wait 0",
                       "start loaded 1", "finish 0", "consumed 0", "prefetch 2"]
    for i in (1, 2, 4):
        assert log.index(f"start loaded {i}") < log.index(f"prefetch {i + 1}") < log.index(f"wait {i}")
        assert log.index(f"consumed {i - 1}") < log.index(f"prefetch {i + 1}")
    assert "start loaded 3" not in " ".join(log)


def test_prove_many_proves_each_witness_in_order(stores: dict, tmp_path: Path) -> None:
    """prove_many: every witness's proof, in order, each verifying with its own public signals
    and fresh blinding; a bad witness raises when its turn comes, after the ones before it."""
    from distprove.prover import prove_many

    key = stores["mul_chain_1k"]
    witnesses = sorted((DATA / "mul_chain_1k" / "witnesses").glob("*.wtns"))
    proofs = list(prove_many(key, witnesses + witnesses[:1], backend="cpu"))
    assert len(proofs) == len(witnesses) + 1
    assert verify_many([(key.vk_json(), p.public_json(), p.to_json()) for p in proofs]) == [True] * len(proofs)
    assert [p.public for p in proofs] == [prove(key, w, backend="cpu").public for w in witnesses + witnesses[:1]]
    assert proofs[0].pi_a != proofs[-1].pi_a
    assert {"witness", "gather", "msm", "assemble", "total"} <= set(proofs[0].timings)

    bad = tmp_path / "short.wtns"
    bad.write_bytes(witnesses[0].read_bytes()[:-32])
    gen = prove_many(key, [witnesses[0], bad, witnesses[1]], backend="cpu")
    first = next(gen)
    assert verify_many([(key.vk_json(), first.public_json(), first.to_json())]) == [True]
    with pytest.raises(Exception, match="short.wtns"):
        next(gen)


def test_window_widths_follow_the_witness(stores: dict) -> None:
    """The witness MSMs ask the backend for the width of the witness's live share (scalars other
    than 0 and 1), H for dense scalars; a backend that narrows its windows on witness-like scalars
    still gives a proof that verifies."""
    from distprove.backends.cpu import CpuBackend
    from distprove.formats.wtns import read_wtns
    from distprove.stages.msm import live_fraction

    calls: list[tuple[int, str, float]] = []

    class Recording(CpuBackend):
        def window_width(self, n: int, group: bn254.Group, live: float = 1.0) -> int:
            calls.append((n, group.name, live))
            return 3 if live < 0.5 else 5

    key = stores["bits_k16"]
    witness = sorted((DATA / "bits_k16" / "witnesses").glob("*.wtns"))[0]
    live = live_fraction(read_wtns(witness).values)
    assert live < 0.5  # a bit decomposition: mostly zeros and ones
    be = Recording()
    proof = prove(key, witness, backend=be)
    want = sorted([(key.n_vars, "G1", live)] * 3 + [(key.n_vars, "G2", live)] + [(key.domain_size, "G1", 1.0)])
    assert sorted(calls) == want
    assert verify(key.vk_json(), proof.public_json(), proof.to_json())
    # Dense widths: with distprove.msm.live-widths off, and in constant-work mode.
    dense = sorted([(key.n_vars, "G1", 1.0)] * 3 + [(key.n_vars, "G2", 1.0)] + [(key.domain_size, "G1", 1.0)])
    calls.clear()
    with dask.config.set({"distprove.msm.live-widths": False}):
        prove(key, witness, backend=be)
    assert sorted(calls) == dense
    calls.clear()
    prove(key, witness, backend=be, constant_work=True)
    assert sorted(calls) == dense


GROUPED = [("mul_chain_1k", 2), ("mul_chain_1k", 3), ("mul_chain_1k", 5), ("poseidon_k4", 3), ("bits_k16", 5)]
_ONE_AT_A_TIME: dict[str, list] = {}


def _grouped_case(name: str, stores: dict) -> tuple:
    """Five witnesses of fixture ``name`` (its three, cycled), fixed blindings, and their proofs
    one at a time (computed once per fixture)."""
    from distprove.prover import prove_many

    key = stores[name]
    witnesses = sorted((DATA / name / "witnesses").glob("*.wtns"))
    witnesses = (witnesses * 2)[:5]
    blindings = [(1000 + 7 * i, 2000 + 11 * i) for i in range(len(witnesses))]
    if name not in _ONE_AT_A_TIME:
        _ONE_AT_A_TIME[name] = list(prove_many(key, witnesses, backend="cpu", group=1, blindings=blindings))
    return key, witnesses, blindings, _ONE_AT_A_TIME[name]


@pytest.mark.parametrize(("name", "size"), GROUPED, ids=[f"{n}-g{s}" for n, s in GROUPED])
def test_grouped_proofs_equal_one_at_a_time(name: str, size: int, stores: dict) -> None:
    """prove_many in groups (the group's MSMs in one msm_start_combined call, assembly from the
    combined points) gives the very proofs of one at a time with the same (r, s), in order (a
    last group shorter than the others included), and each verifies; the per-proof stage
    seconds are there."""
    from distprove.prover import prove_many

    key, witnesses, blindings, reference = _grouped_case(name, stores)
    proofs = list(prove_many(key, witnesses, backend="cpu", group=size, blindings=blindings))
    assert [p.points for p in proofs] == [p.points for p in reference]
    assert [p.public for p in proofs] == [p.public for p in reference]
    assert verify_many([(key.vk_json(), p.public_json(), p.to_json()) for p in proofs]) == [True] * len(proofs)
    assert all({"witness", "gather", "ntt", "msm", "assemble", "total"} <= set(p.timings) for p in proofs)


def test_grouped_bad_witness_fails_alone_and_in_turn(stores: dict, tmp_path: Path) -> None:
    """A bad witness in the middle of a group raises when its turn comes, after the proofs before
    it (which verify); a witness failing in the group's own load (not a file: no prefetch) too.
    A group size from the config (distprove.msm.group-proofs) is taken when none is given."""
    import numpy as np
    from distprove.prover import prove_many

    key = stores["mul_chain_1k"]
    witnesses = sorted((DATA / "mul_chain_1k" / "witnesses").glob("*.wtns"))
    bad = tmp_path / "short.wtns"
    bad.write_bytes(witnesses[0].read_bytes()[:-32])
    calls: list[int] = []
    from distprove.backends.cpu import CpuBackend

    class Counting(CpuBackend):
        def msm_start_combined(self, key, jobs, **kw):
            calls.append(len(jobs))
            return super().msm_start_combined(key, jobs, **kw)

    with dask.config.set({"distprove.msm.group-proofs": 3}):
        gen = prove_many(key, [witnesses[0], bad, witnesses[1]], backend=Counting())
        first = next(gen)
        with pytest.raises(Exception, match="short.wtns"):
            next(gen)
    assert calls == [2]  # the group went on without the bad witness
    assert verify_many([(key.vk_json(), first.public_json(), first.to_json())]) == [True]
    gen = prove_many(key, [witnesses[0], np.zeros((3, 8), np.uint32)], backend="cpu", group=2)
    assert verify_many([(key.vk_json(), (p := next(gen)).public_json(), p.to_json())]) == [True]
    with pytest.raises(Exception, match="<witness>"):
        next(gen)
