"""Small proofs in one task (issue #4's Dask overhead): ``work.prove_whole`` and the planner's
``distprove.planner.fuse-below``, and the per-batch and per-proof costs the data-mode path no
longer pays (the key's description made once per resident key, public signals taken where the
witness is read, each proof's stages recorded once in the metrics).

The batches themselves (fused and not, failures, reruns, killed workers, the client's pool) run
in tests/test_batch.py; these need no cluster.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import dask
import pytest
from prometheus_client import REGISTRY

import distprove
from distprove import config
from distprove.cluster import output, work
from distprove.cluster import state as dist_state
from distprove.errors import FormatError
from distprove.formats.jsonio import read_public
from distprove.cluster.planner import GROUP_DOMAIN, Plan
from distprove.keystore import ZkeyKey, import_key
from distprove.prover import prove
from distprove.cluster.state import ProverState
from distprove.cluster.tasks import Assembled, Collected, KeyInfo, ProofSpec
from test_worker_cache import FakeWorker, counting_state

DATA = Path(__file__).parent / "data"
MINI_ZKEY = DATA / "mini" / "mini_0001.zkey"
MINI_WTNS = DATA / "mini" / "witness.wtns"
MUL_ZKEY = DATA / "mul_chain_1k" / "circuit_final.zkey"
BAD = DATA / "bad"
BLINDING = (12345, 67890)


@pytest.fixture
def st(monkeypatch: pytest.MonkeyPatch) -> ProverState:
    """A CPU ProverState that ``distprove.cluster.state.state()`` returns (as if the task ran on its worker), counting uploads."""
    state = counting_state()
    monkeypatch.setattr(dist_state, "state", lambda: state)
    return state


def spec_for(tmp_path: Path, witness: Path = MINI_WTNS) -> ProofSpec:
    key = distprove.open_key(MINI_ZKEY)
    return ProofSpec("m", str(witness), str(MINI_ZKEY), key.content_hash, str(tmp_path / "m.proof.json"), str(tmp_path / "m.public.json"))


def stage_count(stage: str) -> float:
    return REGISTRY.get_sample_value("distprove_stage_seconds_count", {"stage": stage}) or 0.0


# --- configuration and planner ---------------------------------------------------------------------


def test_fuse_below_setting() -> None:
    assert config.settings().fuse_below == 1 << 23
    for null in (None, "null", "None"):
        with dask.config.set({"distprove.planner.fuse-below": null}):
            assert config.settings().fuse_below is None
    for bad in (0, "lots", True):
        with dask.config.set({"distprove.planner.fuse-below": bad}), pytest.raises(FormatError) as err:
            config.settings()
        assert str(err.value) == f"distprove.planner.fuse-below: must be an integer >= 1 or null (got {bad!r})"


def test_plan_fuses_small_keys_in_data_mode_only() -> None:
    info = KeyInfo("k", "h", 10, 1, 1 << 13, {}, "cpu", False)
    assert Plan("data", ("w",), fuse_below=1 << 18).fuses(info)
    assert not Plan("data", ("w",), fuse_below=1 << 13).fuses(info)  # below, not at
    assert not Plan("data", ("w",), fuse_below=None).fuses(info)
    assert not Plan("data", ("w",)).fuses(info)  # a Plan made without the setting never fuses
    assert not Plan("split", ("w",), fuse_below=1 << 18).fuses(info)


def test_proofs_per_task_groups_small_fused_proofs_and_leaves_tasks_to_balance() -> None:
    assert config.settings().proofs_per_task == 32
    small, mid, big = (KeyInfo("k", "h", 10, 1, d, {}, "cpu", False) for d in (1 << 13, 1 << 20, 1 << 22))
    two = Plan("data", ("a", "b"), verify=False, fuse_below=1 << 23, max_proofs_per_task=8)
    assert two.proofs_per_task(small, 64) == 4  # 64 proofs leave 8 tasks on each of 2 workers
    assert two.proofs_per_task(small, 1000) == 8  # at most the setting
    assert two.proofs_per_task(small, 20) == 1  # too few to group and still balance
    assert two.proofs_per_task(mid, 1000) == 8  # 2^23 domain points a group (and the setting's 8)
    assert two.proofs_per_task(big, 1000) == 2  # beyond them: two, for the pipelining
    assert two.proofs_per_task(big, 20) == 1
    # Checked in the task: a group's end also pays the batched check, so groups go larger.
    checked = Plan("data", ("a", "b"), fuse_below=1 << 23, max_proofs_per_task=32)
    assert checked.writes_in_task and checked.verify
    assert checked.proofs_per_task(mid, 64) == 8  # 4 tasks a worker, up to 2^24 domain points
    assert checked.proofs_per_task(mid, 1000) == 16 and checked.proofs_per_task(big, 1000) == 4
    pooled = Plan("data", ("a", "b"), assemble_on_workers=False, fuse_below=1 << 23, max_proofs_per_task=32)
    assert pooled.proofs_per_task(mid, 64) == 4  # checked in the client's pool: task ends stay cheap
    assert Plan("data", ("a",), fuse_below=1 << 18, max_proofs_per_task=8).proofs_per_task(small, 64) == 8
    assert Plan("data", ("a",), fuse_below=1 << 12, max_proofs_per_task=8).proofs_per_task(small, 64) == 1  # not fused
    assert Plan("split", ("a",), fuse_below=1 << 18, max_proofs_per_task=8).proofs_per_task(small, 64) == 1
    # planner.group-domain sets the unchecked groups' cap (not the checked ones')
    assert config.settings().group_domain == GROUP_DOMAIN
    narrow = Plan("data", ("a",), verify=False, fuse_below=1 << 23, max_proofs_per_task=32, group_domain=1 << 22)
    assert narrow.proofs_per_task(mid, 64) == 4 and narrow.proofs_per_task(mid, 1000) == 4 and narrow.proofs_per_task(big, 1000) == 2
    assert two.proofs_per_task(mid, 128) == 8 and narrow.proofs_per_task(small, 1000) == 32
    with dask.config.set({"distprove.planner.group-domain": 1 << 21}):
        assert config.settings().group_domain == 1 << 21


def test_tasks_that_write_their_proofs_stream_and_go_large_for_small_keys() -> None:
    """A task that checks and writes its proofs streams them out, so its cap is
    planner.proofs-per-writing-task (1024), not proofs-per-task: at 2^12 the cap binds, at 2^16
    the 2^24 domain points, at 2^20 too (16), and every worker still gets 4 tasks to balance.
    Tasks whose proofs go to the client's pool keep proofs-per-task."""
    settings = config.settings()
    assert (settings.proofs_per_task, settings.proofs_per_writing_task) == (32, 1024)
    k12, k16, k20 = (KeyInfo("k", "h", 10, 1, 1 << d, {}, "gpu", False) for d in (12, 16, 20))
    one, two = (Plan("data", workers, fuse_below=1 << 23, max_proofs_per_task=32, max_proofs_per_writing_task=1024)
                for workers in (("a",), ("a", "b")))
    sizes = {(d, n, len(p.workers)): p.proofs_per_task(info, n)
             for d, info in ((12, k12), (16, k16), (20, k20)) for n in (256, 4096) for p in (one, two)}
    assert sizes == {(12, 256, 1): 64, (12, 256, 2): 32, (12, 4096, 1): 1024, (12, 4096, 2): 512,
                     (16, 256, 1): 64, (16, 256, 2): 32, (16, 4096, 1): 256, (16, 4096, 2): 256,
                     (20, 256, 1): 16, (20, 256, 2): 16, (20, 4096, 1): 16, (20, 4096, 2): 16}
    unchecked = Plan("data", ("a",), verify=False, fuse_below=1 << 23, max_proofs_per_task=32, max_proofs_per_writing_task=1024)
    assert unchecked.proofs_per_task(k12, 1 << 16) == 1024 and unchecked.proofs_per_task(k12, 4096) == 512  # 8 tasks a worker
    pooled = Plan("data", ("a",), assemble_on_workers=False, fuse_below=1 << 23, max_proofs_per_task=32,
                  max_proofs_per_writing_task=1024)
    assert pooled.proofs_per_task(k12, 4096) == 32
    assert Plan("data", ("a",), fuse_below=1 << 23, max_proofs_per_task=32).proofs_per_task(k12, 4096) == 32  # None: the same cap
    with dask.config.set({"distprove.planner.proofs-per-writing-task": 0}), pytest.raises(FormatError) as err:
        config.settings()
    assert "planner.proofs-per-writing-task" in str(err.value)


def test_split_hands_h_over_only_on_cpu_keys() -> None:
    """A GPU worker recomputes H for its split H tasks; CPU workers receive the prepare's copy."""
    cpu, gpu = (KeyInfo("k", "h", 10, 1, 1 << 20, {}, be, False) for be in ("cpu", "gpu"))
    split, data = Plan("split", ("a", "b")), Plan("data", ("a", "b"))
    assert split.hands_h_over(cpu) and not split.hands_h_over(gpu)
    assert not data.hands_h_over(cpu) and not data.hands_h_over(gpu)


def test_auto_mode_splits_only_large_keys_with_few_proofs() -> None:
    from distprove.cluster.planner import choose_mode

    assert choose_mode("auto", 1, 4, 1 << 24, 1 << 22, 1) == "split"  # one large proof, several workers
    assert choose_mode("auto", 4, 4, 1 << 24, 1 << 22, 1) == "data"  # a proof per worker
    assert choose_mode("auto", 1, 1, 1 << 24, 1 << 22, 1) == "data"  # nothing to split over
    assert choose_mode("auto", 1, 4, 1 << 20, 1 << 22, 1) == "data"  # small key
    assert choose_mode("auto", 1, 4, 1 << 24, None, 1) == "data"  # GPU workers by default: never
    assert choose_mode("split", 64, 4, 1 << 10, None, 1) == "split"


# --- the fused task ----------------------------------------------------------------------------


def test_prove_group_fails_a_bad_witness_alone(st: ProverState, tmp_path: Path) -> None:
    """A prove-group task's bad witness becomes a Failed item with its one-line reason; the
    proofs before and after it are made, and verify-write writes those and reports the failure."""
    from distprove.verifier import verify

    good = spec_for(tmp_path)
    other = ProofSpec("m2", good.witness, good.key_path, good.content_hash, str(tmp_path / "m2.proof.json"), str(tmp_path / "m2.public.json"))
    bad = ProofSpec("t", str(BAD / "truncated.wtns"), good.key_path, good.content_hash, str(tmp_path / "t.proof.json"), str(tmp_path / "t.public.json"))
    results = work.prove_group([good, bad, other], work.plan_key(str(MINI_ZKEY)).widths)
    assert [type(r).__name__ for r in results] == ["Assembled", "Failed", "Assembled"]
    assert results[1].reason.startswith(f"{BAD / 'truncated.wtns'}: ") and "\n" not in results[1].reason
    vk = st.vk(st.key(str(MINI_ZKEY)))
    assert all(verify(vk, r.proof.public, (r.proof.pi_a, r.proof.pi_b, r.proof.pi_c)) for r in (results[0], results[2]))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dist_state, "get_worker", lambda: FakeWorker())
        outcomes = {o.name: o for o in output.verify_write([results])}
    assert {n: o.status for n, o in outcomes.items()} == {"m": "proved", "t": "failed", "m2": "proved"}
    assert outcomes["t"].reason == results[1].reason
    assert Path(good.proof_path).exists() and Path(other.proof_path).exists() and not Path(bad.proof_path).exists()




def test_prove_group_hands_each_proof_to_its_finisher_beside_the_next_ones_device_work(
    st: ProverState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``write``, a task proving one at a time hands its proofs to its finisher thread as they
    are assembled (here one a batch): proofs 1 and 2 and the bad witness's failure are handed over
    before proof 3 starts, and proof 1 is on disk by then (the third handover waited for the first
    group: the finisher holds two at most); a bad witness fails alone; the outcomes come in order."""
    good = spec_for(tmp_path)
    bad = ProofSpec("t", str(BAD / "truncated.wtns"), good.key_path, good.content_hash, str(tmp_path / "t.proof.json"),
                    str(tmp_path / "t.public.json"))
    third = ProofSpec("m3", good.witness, good.key_path, good.content_hash, str(tmp_path / "m3.proof.json"),
                      str(tmp_path / "m3.public.json"))
    seen: dict[str, tuple[list[str], bool]] = {}
    handed: list[str] = []
    start, submit = work._start_whole, work._Finisher.submit

    def spy(spec: ProofSpec, widths: dict, witness=None):
        seen[spec.name] = (list(handed), Path(good.proof_path).exists())
        return start(spec, widths, witness)

    monkeypatch.setattr(work, "_start_whole", spy)
    monkeypatch.setattr(work, "SOLO_BATCH", 1)
    monkeypatch.setattr(work._Finisher, "submit", lambda self, items: handed.extend(i.spec.name for i in items) or submit(self, items))
    monkeypatch.setattr(dist_state, "get_worker", lambda: FakeWorker())
    second = ProofSpec("m2", good.witness, good.key_path, good.content_hash, str(tmp_path / "m2.proof.json"),
                       str(tmp_path / "m2.public.json"))
    outcomes = work.prove_group([good, second, bad, third], work.plan_key(str(MINI_ZKEY)).widths, write=True)
    assert [(o.name, o.status) for o in outcomes] == [("m", "proved"), ("m2", "proved"), ("t", "failed"), ("m3", "proved")]
    assert seen == {"m": ([], False), "m2": ([], False), "m3": (["m", "m2", "t"], True)}  # t failed loading, before any start
    assert all(Path(sp.proof_path).exists() for sp in (good, second, third)) and not Path(bad.proof_path).exists()


def test_checked_group_checks_its_proofs_together_before_writing_them(
    st: ProverState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``write`` and ``check``, a batch of the task's proofs is checked once (no proof alone
    when all hold), and nothing is written before the check: an unsatisfied witness fails with
    "does not verify" and only then is each proof checked alone; a truncated one fails alone."""
    from distprove import verifier

    good = spec_for(tmp_path)

    def named(name: str, witness: Path = MINI_WTNS) -> ProofSpec:
        return ProofSpec(name, str(witness), good.key_path, good.content_hash, str(tmp_path / f"{name}.proof.json"),
                         str(tmp_path / f"{name}.public.json"))

    alone: list[object] = []
    add, check_alone = verifier.BatchCheck.add, verifier._check
    monkeypatch.setattr(verifier, "_check", lambda *a: alone.append(a) or check_alone(*a))
    monkeypatch.setattr(dist_state, "get_worker", lambda: FakeWorker())
    monkeypatch.setattr(st, "check_executor", lambda: None)  # the spies above live in this process only
    widths = work.plan_key(str(MINI_ZKEY)).widths
    outcomes = work.prove_group([good, named("m2"), named("m3")], widths, write=True, check=True)
    assert [(o.name, o.status) for o in outcomes] == [("m", "proved"), ("m2", "proved"), ("m3", "proved")]
    assert alone == [] and all("check" in o.seconds and "write" in o.seconds for o in outcomes)
    assert verifier.verify_many([(st.vk(st.key(str(MINI_ZKEY))), tmp_path / f"{n}.public.json", tmp_path / f"{n}.proof.json")
                                 for n in ("m", "m2", "m3")]) == [True] * 3
    for p in tmp_path.glob("*.json"):
        p.unlink()
    group = [good, named("u", BAD / "unsatisfied.wtns"), named("t", BAD / "truncated.wtns"), named("m4")]
    outcomes = {o.name: o for o in work.prove_group(group, widths, write=True, check=True)}
    assert {n: o.status for n, o in outcomes.items()} == {"m": "proved", "u": "failed", "t": "failed", "m4": "proved"}
    assert outcomes["u"].reason == output.NOT_VALID and outcomes["t"].reason.startswith(f"{BAD / 'truncated.wtns'}: ")
    assert len(alone) == 3  # the batch failed: each assembled proof checked on its own
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["m.proof.json", "m.public.json", "m4.proof.json", "m4.public.json"]
    # A proof the check cannot even read (FormatError in add) fails alone too.
    for p in tmp_path.glob("*.json"):
        p.unlink()

    calls: list[int] = []

    def add_or_refuse(self, vk, public, points):
        calls.append(1)
        if len(calls) == 2:
            raise FormatError("<proof>", "pi_a is not on the G1 curve")
        return add(self, vk, public, points)

    monkeypatch.setattr(verifier.BatchCheck, "add", add_or_refuse)
    outcomes = {o.name: o for o in work.prove_group([good, named("m2"), named("m3")], widths, write=True, check=True)}
    assert {n: o.status for n, o in outcomes.items()} == {"m": "proved", "m2": "failed", "m3": "proved"}
    assert outcomes["m2"].reason == "<proof>: pi_a is not on the G1 curve"
    assert not (tmp_path / "m2.proof.json").exists() and (tmp_path / "m3.proof.json").exists()


def test_prove_whole_gives_the_proof_of_prove(st: ProverState, tmp_path: Path) -> None:
    spec = spec_for(tmp_path)
    info = work.plan_key(str(MINI_ZKEY))
    done = work.prove_whole(spec, info.widths, True, BLINDING)
    assert isinstance(done, Assembled) and not done.done_before
    assert st.uploads == 1 and st.resident_proofs == []  # one upload; nothing left in the proof cache
    assert done.proof == prove(MINI_ZKEY, MINI_WTNS, "cpu", blinding=BLINDING)
    assert done.proof.public == read_public(DATA / "mini" / "public.json")
    assert {"witness", "gather", "msm", "assemble"} <= set(done.seconds)  # msm includes the NTTs (overlapped)
    # For the client's pool: the window sums, which assemble to the same proof there.
    collected = work.prove_whole(spec, info.widths, False)
    assert isinstance(collected, Collected) and st.resident_proofs == []
    again = work.assemble_proof(spec, collected.parts, info.points, info.n_public, BLINDING)
    assert again.proof == done.proof
    assert {"witness", "gather", "msm", "assemble"} <= set(again.seconds)


def test_prove_whole_after_the_proof_was_written_writes_nothing_new(st: ProverState, tmp_path: Path) -> None:
    """A fused task run again (its worker died after the proof was written) reports the earlier write."""
    spec = spec_for(tmp_path)
    widths = work.plan_key(str(MINI_ZKEY)).widths
    first = work.prove_whole(spec, widths, True, BLINDING)
    assert output.write_once(first.proof.to_json(), first.proof.public_json(), spec.proof_path, spec.public_path)
    second = work.prove_whole(spec, widths, True)
    assert second.done_before and second.proof is None


@pytest.mark.parametrize("name, words", [("truncated.wtns", "truncated"), ("value_ge_r.wtns", "witness value 3 is >= r")])
def test_prove_whole_of_a_bad_witness_raises_its_one_line_error(st: ProverState, tmp_path: Path, name: str, words: str) -> None:
    spec = spec_for(tmp_path, BAD / name)
    label = {"key": "mini_0001.zkey"}
    failed = REGISTRY.get_sample_value("distprove_proofs_failed_total", label) or 0.0
    with pytest.raises(FormatError) as err:
        work.prove_whole(spec, work.plan_key(str(MINI_ZKEY)).widths)
    assert str(err.value).startswith(f"{BAD / name}: ") and words in str(err.value) and "\n" not in str(err.value)
    assert REGISTRY.get_sample_value("distprove_proofs_failed_total", label) == failed + 1


# --- per-batch and per-proof costs ------------------------------------------------------------------


def test_plan_key_is_made_once_per_resident_key(st: ProverState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = ZkeyKey.vk_json

    def counted(self: ZkeyKey) -> dict:
        calls.append(self.path)
        return real(self)

    monkeypatch.setattr(ZkeyKey, "vk_json", counted)
    first = work.plan_key(str(MINI_ZKEY))
    assert work.plan_key(str(MINI_ZKEY)) is first
    assert first.vk == {} and calls == []  # the planner needs no vk: a .zkey's costs a pairing
    with_vk = work.plan_key(str(MINI_ZKEY), with_vk=True)  # for checks made off the workers
    assert with_vk.vk["nPublic"] == first.n_public and work.plan_key(str(MINI_ZKEY)) is with_vk
    assert st.vk(st.key(str(MINI_ZKEY))).n_public == first.n_public
    assert len(calls) == 1  # the vk's pairing, once for the planner and the checks
    # The same key read from another path: that path, the rest as made.
    store = import_key(MINI_ZKEY, tmp_path / "mini.zarr").path
    other = work.plan_key(str(store))
    assert other.path == str(store) and other.content_hash == first.content_hash and other.vk == with_vk.vk
    made = len(calls)  # (the import made the store's vk)
    # An evicted key is described again when it comes back.
    evicting = ProverState("cpu", max_keys=1)
    evicting.setup(FakeWorker())
    monkeypatch.setattr(dist_state, "state", lambda: evicting)
    work.plan_key(str(MINI_ZKEY))
    work.plan_key(str(MUL_ZKEY), with_vk=True)
    assert work.plan_key(str(MINI_ZKEY)) == first and len(calls) == made + 1


def test_public_signals_travel_with_the_parts(st: ProverState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The prepare task takes the public signals from the witness it read; the reducer does not read the file again."""
    spec = spec_for(tmp_path)
    prepared = work.prepare(spec, True, host_h=False)
    assert prepared.public == read_public(DATA / "mini" / "public.json")
    parts = work.msm_proof(spec, prepared, work.plan_key(str(MINI_ZKEY)).widths)
    monkeypatch.setattr(work, "public_signals", lambda *a: pytest.fail("the reducer read the witness again"))
    assert work.reduce_assemble(spec, parts, BLINDING).proof == prove(MINI_ZKEY, MINI_WTNS, "cpu", blinding=BLINDING)


def test_stages_are_recorded_once_per_proof(st: ProverState, tmp_path: Path) -> None:
    """The prepare task does not record its stages: the proof's seconds reach verify-write (or,
    with the client's pool, the reducer), which records every stage of the proof once."""
    spec = spec_for(tmp_path)
    before = {s: stage_count(s) for s in ("witness", "ntt", "msm")}
    prepared = work.prepare(spec, True, host_h=False)
    assert {s: stage_count(s) for s in before} == before
    work.collect_parts(spec, work.msm_proof(spec, prepared, work.plan_key(str(MINI_ZKEY)).widths))
    assert {s: stage_count(s) for s in before} == {s: n + 1 for s, n in before.items()}


def test_verify_write_without_the_check_makes_no_vk(st: ProverState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """verify=False: the proof is written and no verification key is made (a .zkey's costs a
    pairing on each worker's first use: 0.77 s of a 2 s two-GPU batch on the H200)."""
    spec = spec_for(tmp_path)
    done = work.prove_whole(spec, work.plan_key(str(MINI_ZKEY)).widths, True, BLINDING)
    monkeypatch.setattr(ProverState, "vk", lambda self, key: pytest.fail("vk made without a check"))
    monkeypatch.setattr(dist_state, "get_worker", lambda: FakeWorker())
    (out,) = output.verify_write([done], check=False)
    assert out.status == "proved" and Path(spec.proof_path).exists()
    assert read_public(spec.public_path) == done.proof.public


def test_whole_proof_tasks_choose_widths_per_witness(st: ProverState, tmp_path: Path) -> None:
    """Without planned widths, msm_proof takes the widths for the prepare's measured live share
    and prove_whole the prover's own choice: the parts carry them and the proofs equal prove()'s."""
    from distprove.formats.wtns import read_wtns
    from distprove.prover import witness_widths
    from distprove.stages.msm import live_fraction

    spec = spec_for(tmp_path)
    prepared = work.prepare(spec, True, host_h=False)
    assert prepared.live == live_fraction(read_wtns(MINI_WTNS).values)
    key = st.key(spec.key_path, spec.content_hash)
    parts = work.msm_proof(spec, prepared)
    assert {p.which: p.c for p in parts} == witness_widths(st.backend, key, prepared.live)
    want = prove(MINI_ZKEY, MINI_WTNS, "cpu", blinding=BLINDING)
    assert work.reduce_assemble(spec, parts, BLINDING).proof == want
    assert work.prove_whole(spec, None, True, BLINDING).proof == want


def test_prove_group_in_groups_fails_a_bad_witness_alone(st: ProverState, tmp_path: Path) -> None:
    """With distprove.msm.group-proofs = 3 a task's proofs run in groups (one grouped MSM call,
    metered as msm; the stages witness, gather, ntt and assemble metered too): a bad witness in
    the middle of a group fails alone, and the others are the proofs of one at a time with the
    same blinding, and verify."""
    from distributed.metrics import context_meter

    from distprove.verifier import verify

    good = spec_for(tmp_path)

    def named(name: str, witness: Path = MINI_WTNS) -> ProofSpec:
        return ProofSpec(name, str(witness), good.key_path, good.content_hash, str(tmp_path / f"{name}.proof.json"),
                         str(tmp_path / f"{name}.public.json"))

    specs = [good, named("t", BAD / "truncated.wtns"), named("m2"), named("m3")]
    blindings = [(11, 13), (17, 19), (23, 29), (31, 37)]
    widths = work.plan_key(str(MINI_ZKEY)).widths
    metered: list[str] = []
    calls: list[int] = []
    combined = st.backend.msm_start_combined
    st.backend.msm_start_combined = lambda key, jobs, **kw: calls.append(len(jobs)) or combined(key, jobs, **kw)
    with dask.config.set({"distprove.msm.group-proofs": 3}), context_meter.add_callback(
            lambda label, value, unit: metered.append(label)):
        grouped = work.prove_group(specs, widths, blindings=blindings)
    assert calls == [2, 1]
    assert [type(r).__name__ for r in grouped] == ["Assembled", "Failed", "Assembled", "Assembled"]
    assert grouped[1].reason.startswith(f"{BAD / 'truncated.wtns'}: ")
    assert {"witness", "gather", "ntt", "msm", "assemble"} <= set(metered)
    assert all({"witness", "gather", "ntt", "msm", "assemble"} <= set(r.seconds) for r in grouped if isinstance(r, Assembled))
    with dask.config.set({"distprove.msm.group-proofs": 1}):
        alone = work.prove_group(specs, widths, blindings=blindings)
    assert calls == [2, 1]
    assert [r.proof.points for r in grouped if isinstance(r, Assembled)] == [r.proof.points for r in alone if isinstance(r, Assembled)]
    vk = st.vk(st.key(str(MINI_ZKEY)))
    assert all(verify(vk, r.proof.public, r.proof.points) for r in grouped if isinstance(r, Assembled))


def test_streamed_prove_group_computes_its_inputs_and_a_bad_one_fails_alone(st: ProverState, tmp_path: Path) -> None:
    """A proof task of an input batch whose witness task never ran here (specs with a source, no
    pool off a worker) computes each input's witness itself, byte for byte the fixture's, and
    proves it: the same proofs as from the fixture witness with the same blindings; an input the
    circuit refuses fails alone with its one line naming the input."""
    from distprove.cluster.tasks import Failed
    from distprove.witness.pool import WitnessSource, forget_batch

    good = spec_for(tmp_path)
    bad_input = tmp_path / "bad.json"
    bad_input.write_text(json.dumps({"nope": 1}))

    def from_input(name: str, input_path: Path) -> ProofSpec:
        return ProofSpec(name, str(tmp_path / "scratch" / f"{name}.wtns"), good.key_path, good.content_hash,
                         str(tmp_path / f"{name}.proof.json"), str(tmp_path / f"{name}.public.json"),
                         WitnessSource(str(DATA / "mini" / "mini.wasm"), str(input_path), False, "streamed-test"))

    specs = [from_input("a", DATA / "mini" / "input.json"), from_input("b", bad_input), from_input("c", DATA / "mini" / "input.json")]
    blindings = [(11, 13), (17, 19), (23, 29)]
    widths = work.plan_key(str(MINI_ZKEY)).widths
    try:
        streamed = work.prove_group(specs, widths, blindings=blindings)
    finally:
        forget_batch("streamed-test")
    assert [type(r).__name__ for r in streamed] == ["Assembled", "Failed", "Assembled"]
    assert isinstance(streamed[1], Failed) and streamed[1].reason.startswith(f"{bad_input}: ")
    assert [(tmp_path / "scratch" / f"{n}.wtns").read_bytes() == MINI_WTNS.read_bytes() for n in "ac"] == [True, True]
    files = work.prove_group([good, replace(good, name="c")], widths, blindings=[blindings[0], blindings[2]])
    assert [r.proof.points for r in streamed if isinstance(r, Assembled)] == [r.proof.points for r in files]


@pytest.mark.parametrize("group", [1, 2])
def test_streamed_prove_group_computes_each_witness_once(
    st: ProverState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group: int
) -> None:
    """A streamed proof task computes each input's witness once, in groups of one (each proof's
    witness awaited by its prefetch, then proved) as in larger groups."""
    from distprove.witness import pool
    from distprove.witness.pool import WitnessSource

    computed: list[str] = []
    real = pool._calculate_chunk
    monkeypatch.setattr(pool, "_calculate_chunk",
                        lambda wasm, items, keep=False, ring=None: (computed.extend(i for i, *_ in items), real(wasm, items, keep, ring))[1])
    good = spec_for(tmp_path)
    specs = [ProofSpec(name, str(tmp_path / "scratch" / f"{name}.wtns"), good.key_path, good.content_hash,
                       str(tmp_path / f"{name}.proof.json"), str(tmp_path / f"{name}.public.json"),
                       WitnessSource(str(DATA / "mini" / "mini.wasm"), str(DATA / "mini" / "input.json"), False, "once-test"))
             for name in "abc"]
    try:
        with dask.config.set({"distprove.msm.group-proofs": group}):
            proofs = work.prove_group(specs, work.plan_key(str(MINI_ZKEY)).widths)
    finally:
        pool.forget_batch("once-test")
    assert [type(r).__name__ for r in proofs] == ["Assembled"] * 3
    assert len(computed) == 3


@pytest.fixture
def pool2() -> "ProcessPoolExecutor":
    """A spawned process pool of 2 (the worker's check pool, which grouped proofs are assembled in)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))
    yield pool
    pool.shutdown()


def test_grouped_proofs_assembled_in_a_process_pool_equal_the_in_thread_ones(
    st: ProverState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pool2
) -> None:
    """With the worker's process pool, a group's proofs are assembled there (chunks of
    ASSEMBLE_CHUNK, here 2, so a group of 5 is 3 jobs) and come back in order, bit for bit the
    in-thread proofs with the same blindings; a bad witness in the middle fails alone; the wait
    is metered as assemble; written and checked, every proof verifies and is written once."""
    from distributed.metrics import context_meter

    from distprove.verifier import verify

    good = spec_for(tmp_path)

    def named(name: str, witness: Path = MINI_WTNS) -> ProofSpec:
        return ProofSpec(name, str(witness), good.key_path, good.content_hash, str(tmp_path / f"{name}.proof.json"),
                         str(tmp_path / f"{name}.public.json"))

    specs = [good, named("m2"), named("t", BAD / "truncated.wtns"), named("m3"), named("m4"), named("m5"), named("m6")]
    blindings = [(11 + i, 13 + i) for i in range(len(specs))]
    widths = work.plan_key(str(MINI_ZKEY)).widths
    monkeypatch.setattr(work, "ASSEMBLE_CHUNK", 2)
    submitted: list[int] = []
    submit = pool2.submit

    def counted(fn, *args):
        if fn.__name__ == "assemble_many":
            submitted.append(len(args[1]))
        return submit(fn, *args)

    monkeypatch.setattr(pool2, "submit", counted)
    with dask.config.set({"distprove.msm.group-proofs": 5}):
        monkeypatch.setattr(st, "check_executor", lambda: None)
        in_thread = work.prove_group(specs, widths, blindings=blindings)
        monkeypatch.setattr(st, "check_executor", lambda: pool2)
        metered: list[str] = []
        with context_meter.add_callback(lambda label, value, unit: metered.append(label)):
            pooled = work.prove_group(specs, widths, blindings=blindings)
    assert submitted == [2, 2, 2]  # the 4 good proofs of the first group of 5 in 2 jobs, then the group of 2
    assert [type(r).__name__ for r in pooled] == [type(r).__name__ for r in in_thread] == [
        "Assembled", "Assembled", "Failed", "Assembled", "Assembled", "Assembled", "Assembled"]
    assert pooled[2].reason == in_thread[2].reason and pooled[2].reason.startswith(f"{BAD / 'truncated.wtns'}: ")
    assert [r.spec.name for r in pooled] == [sp.name for sp in specs]
    assert [r.proof.points for r in pooled if isinstance(r, Assembled)] == [r.proof.points for r in in_thread if isinstance(r, Assembled)]
    assert "assemble" in metered and all("assemble" in r.seconds for r in pooled if isinstance(r, Assembled))
    vk = st.vk(st.key(str(MINI_ZKEY)))
    assert all(verify(vk, r.proof.public, r.proof.points) for r in pooled if isinstance(r, Assembled))
    # Written and checked (the check's pool is the same one): each good proof written once, in group writes.
    monkeypatch.setattr(dist_state, "get_worker", lambda: FakeWorker())
    writes: list[str] = []
    write_proofs = output.write_proofs

    def spy(files: list) -> list:
        results = write_proofs(files)
        writes.extend(f[2] for f, written in zip(files, results) if written is True)
        return results

    monkeypatch.setattr(output, "write_proofs", spy)
    with dask.config.set({"distprove.msm.group-proofs": 5}):
        outcomes = work.prove_group(specs, widths, write=True, check=True, blindings=blindings)
    assert {o.name: o.status for o in outcomes} == {sp.name: "failed" if sp.name == "t" else "proved" for sp in specs}
    assert sorted(writes) == sorted(sp.proof_path for sp in specs if sp.name != "t")
    assert all("write" in o.seconds for o in outcomes if o.status == "proved")
    assert all(verify(vk, sp.public_path, sp.proof_path) for sp in specs if sp.name != "t")
    again = work.prove_group(specs, widths, write=True, check=True, blindings=blindings)  # a rerun writes nothing new
    assert all(o.written_before for o in again if o.name != "t") and len(writes) == 6


def test_device_assembly_takes_one_backend_call_a_group_and_no_pool(
    st: ProverState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backend that assembles on its device (``device_assembly``, the GPU) gets each group's good
    proofs in one ``assemble_group`` call, in the task's thread even where the worker has a pool;
    the proofs equal the host's, a bad witness fails alone, each proof's assemble seconds are its
    share of its group's call."""
    from distprove.backends.cpu import CpuBackend

    good = spec_for(tmp_path)
    specs = [good] + [ProofSpec(name, str(w), good.key_path, good.content_hash, str(tmp_path / f"{name}.proof.json"),
                                str(tmp_path / f"{name}.public.json"))
                      for name, w in (("m2", MINI_WTNS), ("t", BAD / "truncated.wtns"), ("m3", MINI_WTNS), ("m4", MINI_WTNS))]
    blindings = [(11 + i, 13 + i) for i in range(len(specs))]
    widths = work.plan_key(str(MINI_ZKEY)).widths
    with dask.config.set({"distprove.msm.group-proofs": 3}):
        monkeypatch.setattr(st, "check_executor", lambda: None)
        host = work.prove_group(specs, widths, blindings=blindings)
        calls: list[list[tuple[int, int]]] = []

        class Device(CpuBackend):
            device_assembly = True

            def assemble_group(self, key, msm_points, rs):
                calls.append(list(rs))
                return super().assemble_group(key, msm_points, rs)

        monkeypatch.setattr(st, "backend", Device())
        monkeypatch.setattr(st, "check_executor", lambda: pytest.fail("the pool is not for device assembly"))
        device = work.prove_group(specs, widths, blindings=blindings)
    assert calls == [[(11, 13), (12, 14)], [(14, 16), (15, 17)]]  # groups m, m2, t and m3, m4; t failed in its load
    assert [type(r).__name__ for r in device] == ["Assembled", "Assembled", "Failed", "Assembled", "Assembled"]
    assert [r.proof.points for r in device if isinstance(r, Assembled)] == [r.proof.points for r in host if isinstance(r, Assembled)]
    assert all(r.seconds["assemble"] > 0 for r in device if isinstance(r, Assembled))


# --- the streaming task: each group checked and written by the task's finisher thread ----------


def named_spec(tmp_path: Path, name: str, witness: Path = MINI_WTNS) -> ProofSpec:
    key = distprove.open_key(MINI_ZKEY)
    return ProofSpec(name, str(witness), str(MINI_ZKEY), key.content_hash, str(tmp_path / f"{name}.proof.json"),
                     str(tmp_path / f"{name}.public.json"))


def proofs_counted(ok: bool) -> float:
    name = "distprove_proofs_total" if ok else "distprove_proofs_failed_total"
    return REGISTRY.get_sample_value(name, {"key": MINI_ZKEY.name}) or 0.0


def test_streamed_task_checks_each_group_alone_and_fails_one_bad_proof_of_the_second(
    st: ProverState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Groups of 2: three groups, each checked by its own batch in the finisher thread. A proof
    that does not verify in the 2nd group is not written and fails alone (its group's batch fails,
    so its two proofs are checked alone); every other proof is written and verifies; the outcomes
    come in order, each proof counted once in the metrics (its check and write seconds too), and
    the finisher's check and write seconds reach the task's fine performance metrics."""
    from distributed.metrics import context_meter

    from distprove import verifier

    results: list[int] = []
    threads: set[str] = set()
    batch_results = verifier.BatchCheck.results

    def counted(self):
        import threading

        results.append(len(self))
        threads.add(threading.current_thread().name)
        return batch_results(self)

    monkeypatch.setattr(verifier.BatchCheck, "results", counted)
    monkeypatch.setattr(dist_state, "get_worker", lambda: FakeWorker())
    monkeypatch.setattr(st, "check_executor", lambda: None)
    specs = [named_spec(tmp_path, n) for n in ("a", "b")] + [named_spec(tmp_path, "u", BAD / "unsatisfied.wtns"),
                                                             named_spec(tmp_path, "c")] + [named_spec(tmp_path, n) for n in ("d", "e")]
    before = (proofs_counted(True), proofs_counted(False), stage_count("check"), stage_count("write"))
    metered: list[str] = []
    with dask.config.set({"distprove.msm.group-proofs": 2}), context_meter.add_callback(
            lambda label, value, unit: metered.append(label)):
        outcomes = work.prove_group(specs, work.plan_key(str(MINI_ZKEY)).widths, write=True, check=True)
    assert [(o.name, o.status) for o in outcomes] == [("a", "proved"), ("b", "proved"), ("u", "failed"), ("c", "proved"),
                                                      ("d", "proved"), ("e", "proved")]
    assert outcomes[2].reason == output.NOT_VALID and not Path(specs[2].proof_path).exists()
    assert results == [2, 2, 2] and all(t.startswith("distprove-finisher") for t in threads)
    vk = st.vk(st.key(str(MINI_ZKEY)))
    assert verifier.verify_many([(vk, sp.public_path, sp.proof_path) for sp in specs if sp.name != "u"]) == [True] * 5
    after = (proofs_counted(True), proofs_counted(False), stage_count("check"), stage_count("write"))
    assert [a - b for a, b in zip(after, before)] == [5, 1, 6, 5]
    assert {"check", "write"} <= set(metered)
    again = work.prove_group(specs, work.plan_key(str(MINI_ZKEY)).widths, write=True, check=True)  # a rerun
    assert [(o.name, o.written_before) for o in again] == [(n, True) for n in "abcde"] + [("u", False)]  # earlier ones first
    assert [(proofs_counted(True), proofs_counted(False))] == [(after[0], after[1] + 1)]  # only u proved (and failed) again


def test_a_finisher_exception_fails_its_group_only(
    st: ProverState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group whose check and write raise fails alone, each of its proofs with one line naming
    the error (and counted once as failed); the groups before and after it are written."""
    check_write = work._check_write_group

    def broken(items: list) -> list:
        if any(i.spec.name == "c" for i in items):
            raise RuntimeError("the disk caught fire\nsecond line")
        return check_write(items)

    monkeypatch.setattr(work, "_check_write_group", broken)
    monkeypatch.setattr(dist_state, "get_worker", lambda: FakeWorker())
    monkeypatch.setattr(st, "check_executor", lambda: None)
    specs = [named_spec(tmp_path, n) for n in "abcdef"]
    failed = proofs_counted(False)
    with dask.config.set({"distprove.msm.group-proofs": 2}):
        outcomes = work.prove_group(specs, work.plan_key(str(MINI_ZKEY)).widths, write=True, check=True)
    assert [(o.name, o.status) for o in outcomes] == [(n, "failed" if n in "cd" else "proved") for n in "abcdef"]
    assert {o.reason for o in outcomes if o.status == "failed"} == {"check and write failed: RuntimeError: the disk caught fire"}
    assert [Path(sp.proof_path).exists() for sp in specs] == [n not in "cd" for n in "abcdef"]
    assert proofs_counted(False) == failed + 2


class _Item:
    """A stand-in for an :class:`Assembled` item handed to a finisher."""

    def __init__(self, name: str) -> None:
        self.spec = type("Spec", (), {"name": name})()


def test_the_task_waits_while_its_finisher_holds_two_groups() -> None:
    """The finisher runs groups in order in its own thread (in the task's context: its meters
    reach the task's callbacks); handing over a third group while the first is still being
    finished waits until it is done; a group's outcomes come back in its items' order."""
    import contextvars
    import threading

    from distributed.metrics import context_meter

    from distprove.cluster.tasks import Outcome

    release = threading.Event()
    ran: list[list[str]] = []

    def slow(items: list) -> list:
        with context_meter.meter("write"):
            if not ran:
                release.wait(10)
        ran.append([i.spec.name for i in items])
        return [Outcome(i.spec.name, "proved", "", {}, "here") for i in reversed(items)]

    metered: list[tuple[str, str]] = []
    groups = [[_Item("a"), _Item("b")], [_Item("c")], [_Item("d"), _Item("e")]]
    with context_meter.add_callback(lambda label, value, unit: metered.append((label, threading.current_thread().name))):
        with work._Finisher(slow, "here") as finisher:
            finisher.submit(groups[0])
            finisher.submit(groups[1])  # the finisher holds two: this one waits in its queue
            third = threading.Thread(target=contextvars.copy_context().run, args=(finisher.submit, groups[2]))
            third.start()
            third.join(0.3)
            assert third.is_alive() and ran == []  # blocked behind the first group
            release.set()
            third.join(10)
            assert not third.is_alive()
            names = [o.name for o in finisher.outcomes()]
    assert ran == [["a", "b"], ["c"], ["d", "e"]] and names == list("abcde")
    assert [label for label, _ in metered] == ["write"] * 3 and all(t.startswith("distprove-finisher") for _, t in metered)


def test_a_task_leaves_its_slot_while_its_last_groups_are_written(
    st: ProverState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a worker with one thread, a writing task gives its slot back once its proofs are all
    handed to its finisher: the next task starts while the first one's write is still held (here
    until the second task's witness is read), and both tasks return their proofs, written."""
    import threading

    from distributed import Client, LocalCluster

    second_read = threading.Event()
    seen: dict[str, bool] = {}
    prefetch, write = work._prefetch, work._write_group

    def reading(spec: ProofSpec):
        if spec.name == "n":
            second_read.set()
        return prefetch(spec)

    def held(items: list) -> list:
        if items[0].spec.name == "m":
            seen["next task started before the write"] = second_read.wait(20)
        return write(items)

    monkeypatch.setattr(work, "_prefetch", reading)
    monkeypatch.setattr(work, "_write_group", held)
    first = spec_for(tmp_path)
    second = ProofSpec("n", first.witness, first.key_path, first.content_hash, str(tmp_path / "n.proof.json"),
                       str(tmp_path / "n.public.json"))
    widths = work.plan_key(str(MINI_ZKEY)).widths
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        a = client.submit(work.prove_group, [first], widths, write=True, pure=False, priority=1)
        b = client.submit(work.prove_group, [second], widths, write=True, pure=False)
        outcomes = a.result(60) + b.result(60)
    assert seen == {"next task started before the write": True}
    assert [(o.name, o.status) for o in outcomes] == [("m", "proved"), ("n", "proved")]
    assert Path(first.proof_path).exists() and Path(second.proof_path).exists()


def test_a_gpu_finisher_runs_each_group_on_its_own_non_blocking_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU worker the finisher makes one non-blocking stream (on the task thread's device) and
    runs every group under it, in its own thread: CuPy's current stream is per thread, so the
    task's thread keeps its own; a host finisher touches no CUDA at all."""
    import sys
    import threading
    import types

    from distprove.cluster.tasks import Outcome

    entered: list[tuple[str, str]] = []

    class Recorder:
        def __init__(self, what: str) -> None:
            self.what = what

        def __enter__(self) -> None:
            entered.append((self.what, threading.current_thread().name))

        def __exit__(self, *exc: object) -> None:
            entered.append(("exit " + self.what, threading.current_thread().name))

    streams: list[bool] = []

    def stream(non_blocking: bool = False) -> Recorder:
        streams.append(non_blocking)
        return Recorder("stream")

    cuda = types.SimpleNamespace(Device=lambda: Recorder("device"), Stream=stream)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    finish = lambda items: [Outcome(i.spec.name, "proved", "", {}, "here") for i in items]  # noqa: E731
    with work._Finisher(finish, "here", "gpu") as finisher:
        finisher.submit([_Item("a")])
        finisher.submit([_Item("b")])
        assert [o.name for o in finisher.outcomes()] == ["a", "b"]
    assert streams == [True]
    assert [w for w, _ in entered] == ["device", "stream", "exit stream", "exit device"] * 2
    assert all(t.startswith("distprove-finisher") for _, t in entered)
    entered.clear()
    with work._Finisher(finish, "here", "cpu") as finisher:
        finisher.submit([_Item("a")])
        assert [o.name for o in finisher.outcomes()] == ["a"]
    assert entered == [] and streams == [True]
