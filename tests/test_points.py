"""Points mode: a key larger than one worker, each worker holding a range of its points.

The planner's choice (data / split / points by the key's footprint against a worker's budget,
and the explicit modes), the budget settings, the cutting of a key's points into ranges, the
partial MSMs of the shares adding up to the whole MSMs (the range task and the reducer's sum on
the CPU backend), and a batch in points mode on a local CPU cluster whose proofs verify with
distprove's verifier and with snarkjs, each worker holding only its range of the key."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import dask
import numpy as np
import pytest

import distprove
from conftest import local_client, snarkjs_verify
from distprove import bn254, config
from distprove.backends.base import MsmJob
from distprove.backends.cpu import CpuBackend
from distprove.cluster import work
from distprove.cluster.footprint import gpu_budget, msm_scratch_bytes, point_bytes, resident_footprint
from distprove.cluster.planner import Plan, batch_budget, choose_mode, key_footprint, plan_batch
from distprove.cluster.state import PLUGIN_NAME, ProverState
from distprove.cluster.tasks import KeyInfo, Prepared, ProofSpec
from distprove.errors import FormatError
from distprove.groth16 import MSM_NAMES, msm_group
from distprove.keyrange import KeyShareView, key_shares, msm_lengths, point_ranges
from distprove.keystore import import_key, open_key
from distprove.stages.msm import add_partials, as_window_sums, combine, num_windows
from distprove.verifier import verify

DATA = Path(__file__).parent / "data"
MINI_ZKEY = DATA / "mini" / "mini_0001.zkey"
MINI_WTNS = DATA / "mini" / "witness.wtns"
MUL_ZKEY = DATA / "mul_chain_1k" / "circuit_final.zkey"
MUL_WTNS = sorted((DATA / "mul_chain_1k" / "witnesses").glob("*.wtns"))
VK = {"mini": DATA / "mini" / "verification_key.json", "mul": DATA / "mul_chain_1k" / "verification_key.json"}


def info(domain: int, n_vars: int = 10, nbytes: int = 0, budget: int | None = None, backend: str = "cpu") -> KeyInfo:
    return KeyInfo("k", "h", n_vars, 1, domain, {}, backend, False, nbytes=nbytes, budget=budget)


# --- the planner's choice ------------------------------------------------------------------


def test_auto_picks_points_when_the_footprint_exceeds_the_budget_else_split_or_data() -> None:
    assert choose_mode("auto", 1, 4, 1 << 10, None, 1, footprint=100, budget=99) == "points"
    assert choose_mode("auto", 1, 4, 1 << 10, None, 1, footprint=100, budget=100) == "data"  # fits exactly
    assert choose_mode("auto", 1, 4, 1 << 22, 1 << 22, 1, footprint=100, budget=100) == "split"
    assert choose_mode("auto", 1, 4, 1 << 22, 1 << 22, 1, footprint=100, budget=None) == "split"  # unbounded
    assert choose_mode("auto", 9, 4, 1 << 22, 1 << 22, 1, footprint=10, budget=None) == "data"  # many proofs
    assert choose_mode("auto", 1, 1, 1 << 10, None, 1, footprint=100, budget=1) == "data"  # one worker: nobody to share
    for mode in ("data", "split", "points"):  # an explicit mode is taken as it is
        assert choose_mode(mode, 1, 4, 1 << 10, None, 1, footprint=100, budget=1) == mode
        assert choose_mode(mode, 1, 4, 1 << 10, None, 1) == mode
    with pytest.raises(ValueError, match="unknown mode"):
        choose_mode("ranges", 1, 4, 1 << 10, None, 1)


def test_the_footprint_is_the_arrays_plus_the_scratch_formula() -> None:
    n_vars, n_public, domain = 1000, 3, 1024
    assert msm_scratch_bytes(n_vars, domain) == 32 * (n_vars + 4 * domain) + 128 * domain
    # A, B1, C, H, IC of G1 (64 B), B2 of G2 (128 B)
    assert point_bytes(n_vars, n_public, domain) == 64 * (2 * n_vars + (n_vars - n_public - 1) + domain + n_public + 1) + 128 * n_vars
    assert resident_footprint(n_vars, n_public, domain, 12345) == 12345 + msm_scratch_bytes(n_vars, domain)
    assert resident_footprint(n_vars, n_public, domain) == point_bytes(n_vars, n_public, domain) + msm_scratch_bytes(n_vars, domain)
    assert key_footprint(info(domain, n_vars, nbytes=777)) == 777 + msm_scratch_bytes(n_vars, domain)


def test_plan_batch_picks_points_by_the_smallest_budget_and_records_it() -> None:
    workers = ("a", "b", "c")
    key = info(1 << 10, 1000, nbytes=10 << 20)
    need = key_footprint(key)
    with dask.config.set({"distprove.planner.worker-memory": None}):
        settings = config.settings()
        assert plan_batch(settings, [key], workers, "t").mode == "data"
        tight = plan_batch(settings, [key, info(1 << 10, 1000, nbytes=10 << 20, budget=need - 1)], workers, "t")
        assert (tight.mode, tight.budget, tight.footprint) == ("points", need - 1, need)
        assert plan_batch(settings, [info(1 << 10, 1000, nbytes=10 << 20, budget=need)], workers, "t").mode == "data"
        assert plan_batch(settings, [key], workers, "t", mode="points").mode == "points"
    with dask.config.set({"distprove.planner.worker-memory": "1 MiB"}):
        settings = config.settings()
        assert settings.worker_memory == 1 << 20
        planned = plan_batch(settings, [key], workers, "t")
        assert (planned.mode, planned.budget) == ("points", 1 << 20)
        # GPU keys take the workers' budget (gpu.memory-limit), not the CPU workers' setting
        assert plan_batch(settings, [info(1 << 10, 1000, nbytes=10 << 20, backend="gpu")], workers, "t").mode == "data"
    assert batch_budget([info(8, budget=5), info(8, budget=3), info(8)], 4) == 3
    assert batch_budget([info(8)], None) is None


def test_points_mode_hands_h_over_and_neither_fuses_nor_splits_h() -> None:
    plan = Plan("points", ("a", "b"), fuse_below=1 << 30)
    for backend in ("cpu", "gpu"):
        key = info(1 << 16, 1 << 16, backend=backend)
        assert plan.hands_h_over(key) and not plan.fuses(key) and not plan.uses_fourstep(key)
    assert [s.index for s in plan.key_shares(info(1 << 10, 1000))] == [0, 1]


def test_the_gpu_memory_limit_setting_and_budget() -> None:
    cases = {"24 GiB": 24 << 30, 0.5: 0.5, "0.25": 0.25, 1: 1.0, 1 << 30: 1 << 30, None: None, "null": None}
    for value, want in cases.items():
        with dask.config.set({"distprove.gpu.memory-limit": value}):
            assert config.gpu_memory_limit() == want
    for bad in (0, -1, 1.5, "lots", 0.0, True):
        with dask.config.set({"distprove.gpu.memory-limit": bad}), pytest.raises(FormatError, match="gpu.memory-limit"):
            config.gpu_memory_limit()
    assert config.get("gpu.memory-limit", "missing") is None  # the default: what the card has free
    assert gpu_budget(None, free=30, total=80, reclaimable=10) == 40
    assert gpu_budget(0.5, free=30, total=80) == 40
    assert gpu_budget(24, free=30, total=80) == 24


# --- cutting the points --------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 7, 63, 64, 65, 1000, 1023, 4097])
@pytest.mark.parametrize("parts", [1, 2, 3, 5, 40])
@pytest.mark.parametrize("align", [1, 64])
def test_point_ranges_cover_every_point_once_in_aligned_even_ranges(n: int, parts: int, align: int) -> None:
    ranges = point_ranges(n, parts, align)
    assert len(ranges) == parts
    covered = [i for lo, hi in ranges for i in range(lo, hi)]
    assert covered == list(range(n))  # contiguous, in order, each point once
    assert all(lo <= hi and (lo % align == 0 or lo == n) for lo, hi in ranges)
    sizes = [-(-(hi - lo) // align) for lo, hi in ranges]  # blocks per range
    assert max(sizes) - min(sizes) <= 1
    blocks = -(-n // align)
    assert sum(1 for lo, hi in ranges if hi > lo) == min(parts, blocks)  # more parts than blocks: the rest empty


def test_point_ranges_reject_bad_arguments() -> None:
    with pytest.raises(ValueError):
        point_ranges(10, 0)
    with pytest.raises(ValueError):
        point_ranges(10, 2, 0)


def test_key_shares_cut_every_msm_and_hold_about_a_part_of_the_bytes_each() -> None:
    n_vars, n_public, domain = 1023, 2, 1024
    shares = key_shares(n_vars, n_public, domain, 3, 64)
    lengths = msm_lengths(n_vars, n_public, domain)
    assert lengths == {"A": 1023, "B1": 1023, "B2": 1023, "C": 1020, "H": 1024}
    for which in MSM_NAMES:
        assert [i for s in shares for i in range(*s.range(which))] == list(range(lengths[which]))
    assert all(s.range("A") == s.range("B1") == s.range("B2") for s in shares)
    assert [s.tag for s in shares] == ["1of3", "2of3", "3of3"] and not any(s.empty for s in shares)
    many = key_shares(6, 2, 8, 4, 64)  # a tiny key: one share holds it all
    assert [s.empty for s in many] == [False, True, True, True]


# --- partial MSMs add up to the whole ------------------------------------------------------


@pytest.fixture(scope="module")
def mini_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_key(MINI_ZKEY, tmp_path_factory.mktemp("store") / "mini.zarr").path


class FakeKey:
    """A key of random bases with infinity rows (all-zero limbs), for MSMs only."""

    def __init__(self, n_vars: int, n_public: int, domain: int, seed: int) -> None:
        rng = random.Random(seed)
        self.path, self.content_hash = "fake", f"fake-{seed}"
        self.n_vars, self.n_public, self.domain_size = n_vars, n_public, domain
        self.points: dict = {}
        for which, n in msm_lengths(n_vars, n_public, domain).items():
            group = msm_group(which)
            pts = [None if rng.random() < 0.2 else bn254.mul(group, group.generator, rng.randrange(1, bn254.R))
                   for _ in range(n)]
            if which != "B2" and n > 3:
                pts[1] = pts[0]  # a repeated base
            setattr(self, {"A": "a", "B1": "b1", "B2": "b2", "C": "c", "H": "h"}[which], bn254.points_to_limbs(group, pts))


def random_scalars(n: int, rng: random.Random) -> np.ndarray:
    """Scalars < r with zeros, ones and repeats among them."""
    pool = [0, 1, 1, bn254.R - 1, 2]
    values = [rng.choice(pool) if rng.random() < 0.4 else rng.randrange(bn254.R) for _ in range(n)]
    if n > 4:
        values[3] = values[2]
    return bn254.limbs_from_ints(values)


def whole_msms(be: CpuBackend, key, witness: np.ndarray, hs: np.ndarray) -> dict:
    jobs = {}
    for which in MSM_NAMES:
        c = 3
        jobs[which] = MsmJob(hs if which == "H" else witness, c, 0, num_windows(c))
    return be.msm_start_combined(key, [jobs])()[0]


@pytest.mark.parametrize("parts,align", [(1, 1), (2, 1), (3, 2), (7, 1), (4, 64)])
def test_partial_msms_over_the_shares_add_up_to_the_whole(parts: int, align: int) -> None:
    key = FakeKey(13, 2, 16, seed=parts * 10 + align)
    rng = random.Random(parts)
    witness, hs = random_scalars(key.n_vars, rng), random_scalars(key.domain_size, rng)
    be = CpuBackend(max_keys=16)
    whole = whole_msms(be, key, witness, hs)
    partial: dict[str, list] = {which: [] for which in MSM_NAMES}
    for share in key_shares(key.n_vars, key.n_public, key.domain_size, parts, align):
        view = KeyShareView(key, share)
        jobs = {}
        for which, lo, hi in share.ranges:
            if hi > lo:
                jobs[which] = MsmJob(view.scalars(which, witness, hs), 2, 0, num_windows(2))
        got = be.msm_start_combined(view, [jobs])()[0] if jobs else {}
        for which in MSM_NAMES:
            partial[which].append(got.get(which))
    for which in MSM_NAMES:
        assert add_partials(msm_group(which), partial[which]) == whole[which], which


def test_the_range_task_and_the_reducers_sum_equal_the_whole_msms(monkeypatch, mini_store) -> None:
    st = ProverState(backend="cpu")
    st.backend = CpuBackend(max_keys=8)
    monkeypatch.setattr(work.worker_state, "state", lambda: st)
    key = st.key(str(mini_store))
    rng = random.Random(5)
    witness, hs = random_scalars(key.n_vars, rng), random_scalars(key.domain_size, rng)
    spec = ProofSpec("p", "unused.wtns", str(mini_store), key.content_hash, "p.json", "q.json")
    source = Prepared(hs, None, {"witness": 1.0}, "tok", [7, 8], 0.5, witness)
    shares = key_shares(key.n_vars, key.n_public, key.domain_size, 3, 2)
    parts = [work.msm_share(spec, source, s) for s in shares]
    summed = work.add_shares([p for ps in parts for p in ps])
    whole = whole_msms(CpuBackend(), open_key(mini_store), witness, hs)  # not through the worker's resident key
    assert [p.which for p in summed] == list(MSM_NAMES)
    for p in summed:
        assert combine(msm_group(p.which), p.sums, p.c) == whole[p.which]
    assert summed[0].public == [7, 8] and summed[0].upstream["witness"] == 1.0 and summed[0].upstream["msm"] > 0
    # this worker read only the ranges of its shares, never the whole point arrays
    assert key.held_point_bytes == sum(key.share(s).share_bytes for s in shares)
    assert not any(name in key.__dict__ for name in ("a", "b1", "b2", "c", "h"))
    with pytest.raises(ValueError, match="witness and H scalars"):
        work.msm_share(spec, Prepared(hs, None), shares[0])


def test_as_window_sums_combine_to_the_point() -> None:
    p = bn254.mul(bn254.G1, bn254.G1.generator, 12345)
    for c in (2, 5, 16):
        assert combine(bn254.G1, as_window_sums(p, c), c) == p
    assert combine(bn254.G1, as_window_sums(None, 4), 4) is None


# --- a batch in points mode ----------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    yield from local_client(3)


def test_a_points_batch_proves_valid_proofs_with_each_worker_holding_its_range(client, mini_store, tmp_path, snarkjs) -> None:
    wdir, out = tmp_path / "witnesses", tmp_path / "out"
    (wdir / "mini").mkdir(parents=True)
    shutil.copytree(mini_store, wdir / "mini" / "mini.zarr")
    shutil.copy(MINI_WTNS, wdir / "mini" / "m0.wtns")
    (wdir / "mul").mkdir()
    shutil.copy(MUL_ZKEY, wdir / "mul" / "circuit_final.zkey")
    for i in range(2):
        shutil.copy(MUL_WTNS[i], wdir / "mul" / f"w{i}.wtns")
    report = distprove.batch(wdir, out_dir=out, client=client, mode="points", backend="cpu", echo=None)
    assert report.mode == "points" and report.workers == 3
    assert sorted(r.name for r in report.proved) == ["mini/m0", "mul/w0", "mul/w1"], report.summary()
    assert "msm-points" in report.stage_seconds and "msm-windows" not in report.stage_seconds
    for name, kind in (("mini/m0", "mini"), ("mul/w0", "mul"), ("mul/w1", "mul")):
        proof, public = out / f"{name}.proof.json", out / f"{name}.public.json"
        assert verify(VK[kind], public, proof)
        assert snarkjs_verify(VK[kind], public, proof, snarkjs)

    def held(dask_worker) -> dict:
        st = dask_worker.plugins[PLUGIN_NAME]
        return {k.path: (k.held_point_bytes, k.nbytes, [v.share.index for v in k.__dict__.get("_shares", {}).values()])
                for k in st._keys.values()}

    by_worker = client.run(held)
    mul = [v for w in by_worker.values() for p, v in w.items() if p.endswith("circuit_final.zkey")]
    whole = point_bytes(1023, 2, 1024) - 3 * 64  # the MSMs' points (IC is not an MSM's)
    holding = [v for v in mul if v[2]]
    assert len(holding) == 3 and sorted(i for v in holding for i in v[2]) == [0, 1, 2]  # one share per worker
    assert all(0 < v[0] < whole / 2 for v in holding)  # each worker holds about a third of the points
    assert sum(v[0] for v in holding) == whole  # every point once


def test_a_points_batch_assembled_by_the_clients_pool(client, tmp_path) -> None:
    """verify_in="client": the reducer adds the shares' partial points and the client's pool
    assembles, checks and writes the proof."""
    wdir = tmp_path / "w"
    wdir.mkdir()
    for i in range(2):
        shutil.copy(MUL_WTNS[i], wdir / f"w{i}.wtns")
    report = distprove.batch(wdir, key=MUL_ZKEY, out_dir=tmp_path / "out", client=client, mode="points", backend="cpu",
                             verify_in="client", verify_processes=1, echo=None)
    assert report.mode == "points" and sorted(r.name for r in report.proved) == ["w0", "w1"], report.summary()
    for i in range(2):
        assert verify(VK["mul"], tmp_path / "out" / f"w{i}.public.json", tmp_path / "out" / f"w{i}.proof.json")
