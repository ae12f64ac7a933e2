"""The per-worker cache of prepared proofs (ProverState.keep_proof): MSM tasks on the worker that
prepared a proof reuse its backend-side witness and H scalars; elsewhere they fall back to the
host arrays (uploading the witness once per worker, recomputing H when it was not downloaded);
the reducer and key eviction drop entries, and the cache stays bounded over a batch.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import dask
import pytest
from conftest import local_client

import distprove
from distprove import config
from distprove.cluster import output, work
from distprove.cluster import state as dist_state
from distprove.cluster.batching import ensure_worker_state
from distprove.groth16 import MSM_NAMES, msm_group
from distprove.errors import FormatError
from distprove.formats.jsonio import read_public
from distprove.prover import prove
from distprove.stages.msm import num_windows
from distprove.verifier import verify_many
from distprove.cluster.state import DEFAULT_RESIDENT_PROOFS, PLUGIN_NAME, ProverState, ResidentKey
from distprove.cluster.tasks import MsmPart, Prepared, ProofSpec

DATA = Path(__file__).parent / "data"
MINI_ZKEY = DATA / "mini" / "mini_0001.zkey"
MINI_WTNS = DATA / "mini" / "witness.wtns"
MUL_ZKEY = DATA / "mul_chain_1k" / "circuit_final.zkey"
VK = DATA / "mini" / "verification_key.json"
BLINDING = (12345, 67890)


class FakeWorker:
    """What ProverState.setup reads of a proving worker: its address and its resources (none)."""

    address = "local"
    state = SimpleNamespace(total_resources={})


def counting_state() -> ProverState:
    """A CPU ProverState whose backend counts load_witness calls (in ``st.uploads``)."""
    st = ProverState("cpu")
    st.setup(FakeWorker())
    st.uploads = 0
    load = st.backend.load_witness

    def counted(key: Any, values: Any) -> Any:
        st.uploads += 1
        return load(key, values)

    st.backend.load_witness = counted
    return st


def mini_spec(tmp_path: Path) -> ProofSpec:
    key = distprove.open_key(MINI_ZKEY)
    return ProofSpec("m", str(MINI_WTNS), str(MINI_ZKEY), key.content_hash,
                     str(tmp_path / "m.proof.json"), str(tmp_path / "m.public.json"))


def all_parts(spec: ProofSpec, source: Prepared, st: ProverState) -> list[MsmPart]:
    """Each MSM's whole window range, as one data-mode msm-windows task each."""
    key = st.key(spec.key_path, spec.content_hash)
    parts = []
    for which in MSM_NAMES:
        c = st.backend.window_width(key.domain_size if which == "H" else key.n_vars, msm_group(which))
        parts.append(work.msm_windows(spec, which, source, c, 0, num_windows(c)))
    return parts


@pytest.fixture
def use_state(monkeypatch: pytest.MonkeyPatch):
    """Make ``distprove.cluster.state.state()`` return the given state (as if the task ran on that worker)."""

    def use(st: ProverState) -> None:
        monkeypatch.setattr(dist_state, "state", lambda: st)

    return use


def test_msm_tasks_on_the_preparing_worker_upload_nothing(tmp_path: Path, use_state) -> None:
    st = counting_state()
    use_state(st)
    spec = mini_spec(tmp_path)
    prepared = work.prepare(spec, True, host_h=False)
    assert prepared.hs is None and prepared.token and st.uploads == 1  # data mode: H stays on the device
    assert st.resident_proofs == [prepared.token]
    parts = all_parts(spec, prepared, st)
    assert st.uploads == 1
    assert {p.token for p in parts} == {prepared.token}
    assembled = work.reduce_assemble(spec, parts, BLINDING)
    assert st.resident_proofs == []  # the reducer dropped the entry
    assert assembled.proof == prove(MINI_ZKEY, MINI_WTNS, "cpu", blinding=BLINDING)


@pytest.mark.parametrize("host_h", [False, True])
def test_tasks_on_another_worker_fall_back_to_host_arrays(tmp_path: Path, use_state, host_h: bool) -> None:
    spec = mini_spec(tmp_path)
    here = counting_state()
    use_state(here)
    prepared = work.prepare(spec, True, host_h=host_h)
    if host_h:
        assert (prepared.hs == here.backend.to_host(here.proof(prepared.token).hs)).all()
    expected_h = all_parts(spec, prepared, here)[-1]
    other = counting_state()  # another worker: the H task runs there first
    use_state(other)
    key = other.key(spec.key_path)
    c = other.backend.window_width(key.domain_size, msm_group("H"))
    assert work.msm_windows(spec, "H", prepared, c, 0, num_windows(c)).sums == expected_h.sums
    assert other.uploads == (0 if host_h else 1)  # without host H scalars, they are recomputed from the witness
    parts = all_parts(spec, prepared, other)
    assert other.uploads == 1  # the witness is uploaded once for all of the proof's tasks on this worker
    assert work.reduce_assemble(spec, parts, BLINDING).proof == prove(MINI_ZKEY, MINI_WTNS, "cpu", blinding=BLINDING)


def test_cache_is_bounded_and_follows_key_eviction(tmp_path: Path) -> None:
    with dask.config.set({"distprove.proof-cache.count": 3}):
        st = ProverState("cpu", max_keys=1)
        st.setup(FakeWorker())
    mini = st.key(str(MINI_ZKEY))
    for i in range(10):
        st.keep_proof(f"t{i}", mini.content_hash, None, None)
    assert st.resident_proofs == ["t7", "t8", "t9"]
    assert st.proof("t7") is not None and st.resident_proofs == ["t8", "t9", "t7"]
    st.drop_proofs(["t8", "unknown"])
    assert st.resident_proofs == ["t9", "t7"]
    st.key(str(MUL_ZKEY))  # evicts the mini key, and with it the mini proofs
    assert st.resident_proofs == []
    assert st.keep_proof("", mini.content_hash, None, None) is not None and st.resident_proofs == []
    with dask.config.set({"distprove.proof-cache.count": 0}):
        off = ProverState("cpu")
        off.setup(FakeWorker())
    off.keep_proof("t", mini.content_hash, None, None)
    assert off.resident_proofs == []
    with dask.config.set({"distprove.proof-cache.count": "many"}), pytest.raises(FormatError, match="proof-cache.count"):
        ProverState("cpu").setup(FakeWorker())


class _HeldGpu:
    """A GPU backend stand-in for the key cache: what it holds per key, and what it evicted."""

    name = "gpu"

    def __init__(self) -> None:
        self.held: dict[str, int] = {}
        self.evicted: list[str] = []

    def resident_bytes(self, content_hash: str | None = None) -> int:
        return self.held.get(content_hash, 0) if content_hash else sum(self.held.values())

    def evict(self, content_hash: str | None = None) -> None:
        self.evicted.append(content_hash)


def test_gpu_bytes_count_what_the_backend_holds_for_a_key() -> None:
    """key-cache.gpu-bytes bounds each resident key's arrays or what the GPU backend holds for it,
    whichever is more: a key whose tables of window multiples were built since it loaded counts
    them, and the least recently used key goes when the next one loads."""
    zkeys = [MINI_ZKEY, MUL_ZKEY, DATA / "poseidon_k4" / "circuit_final.zkey"]
    sizes = [ResidentKey(distprove.open_key(z), keep_host=False).nbytes for z in zkeys]
    st = ProverState("cpu", max_keys=3, gpu_bytes=sum(sizes) + 1)
    st.setup(FakeWorker())
    st.backend = gpu = _HeldGpu()
    first, second = st.key(str(zkeys[0])), st.key(str(zkeys[1]))
    gpu.held[first.content_hash] = sizes[0] + 1  # what the backend uploaded: a byte more than the arrays
    st.key(str(zkeys[1]))  # the second key is the most recently used again
    gpu.held[first.content_hash] = 8 * sum(sizes)  # tables built for the first key
    st.key(str(zkeys[2]))
    assert gpu.evicted == [first.content_hash]
    assert first.content_hash not in [k.content_hash for k in st._keys.values()]
    assert second.content_hash in st._keys


def test_public_signals_check_only_the_values_taken() -> None:
    assert output.public_signals(str(MINI_WTNS), 2) == read_public(DATA / "mini" / "public.json")
    bad = DATA / "bad" / "value_ge_r.wtns"  # value 3 is r + 3
    assert len(output.public_signals(str(bad), 2)) == 2
    with pytest.raises(FormatError) as err:
        output.public_signals(str(bad), 3)
    assert str(err.value) == f"{bad}: witness value 3 is >= r (not reduced)"
    with pytest.raises(FormatError, match="fewer than the key's 1 \\+ 9 public signals"):
        output.public_signals(str(MINI_WTNS), 9)


# --- a batch on one worker ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    yield from local_client(1, processes=False)


def _count_uploads(dask_worker: Any) -> None:
    st = dask_worker.plugins[PLUGIN_NAME]
    st.uploads, st.most = 0, 0
    load = type(st.backend).load_witness

    def counted(key: Any, values: Any) -> Any:
        st.uploads += 1
        st.most = max(st.most, len(st.resident_proofs) + 1)
        return load(st.backend, key, values)

    st.backend.load_witness = counted


def _counts(dask_worker: Any) -> tuple[int, int, list[str]]:
    st = dask_worker.plugins[PLUGIN_NAME]
    return st.uploads, st.most, st.resident_proofs


@pytest.mark.parametrize("mode", ["data", "split"])
def test_batch_uploads_each_witness_once_and_the_cache_stays_small(client, tmp_path: Path, mode: str) -> None:
    n = 12
    for i in range(n):
        shutil.copy(MINI_WTNS, tmp_path / f"m{i:02d}.wtns")
    settings = config.settings()
    ensure_worker_state(client, "cpu", settings.key_cache_count, settings.key_cache_gpu_bytes)  # as batch() does
    client.run(_count_uploads)
    with dask.config.set({"distprove.planner.fuse-below": None}):  # the prepare / MSM / reducer tasks, not one fused task
        report = distprove.batch(tmp_path, key=MINI_ZKEY, client=client, backend="cpu", mode=mode, echo=None)
    assert report.mode == mode and len(report.proved) == n, report.summary()
    (uploads, most, left), = client.run(_counts).values()
    assert uploads == n  # one per proof, in its prepare task: the MSM tasks reuse it
    assert most <= DEFAULT_RESIDENT_PROOFS and left == []  # every reducer dropped its proof
    out = tmp_path / "proofs"
    items = [(VK, out / f"m{i:02d}.public.json", out / f"m{i:02d}.proof.json") for i in range(n)]
    assert verify_many(items) == [True] * n
