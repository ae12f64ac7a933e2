"""A streaming prove task on a GPU worker (distprove/cluster/work.py prove_group with write and check): each
group's batched check runs its device step in the task's finisher thread, on the finisher's own
stream (not the legacy default stream the task thread queues its next group on); a proof that
does not verify in the second of three groups fails alone, every other proof is written and
verifies."""

from __future__ import annotations

import threading
from pathlib import Path

import dask
import pytest

import distprove

pytestmark = pytest.mark.gpu

DATA = Path(__file__).parents[1] / "data"
MINI_ZKEY = DATA / "mini" / "mini_0001.zkey"
MINI_WTNS = DATA / "mini" / "witness.wtns"


class _Worker:
    address = "local"


def test_streamed_checked_task_checks_on_the_finishers_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cp = pytest.importorskip("cupy")
    from distprove import verifier
    from distprove.backends.gpu import batchcheck
    from distprove.cluster import output, work
    from distprove.cluster import state as dist_state
    from distprove.cluster.state import ProverState
    from distprove.cluster.tasks import ProofSpec

    st = ProverState("gpu")
    st.setup(_Worker())
    monkeypatch.setattr(dist_state, "state", lambda: st)
    monkeypatch.setattr(dist_state, "get_worker", lambda: _Worker())
    monkeypatch.setattr(st, "check_executor", lambda: None)
    assert st.check_device() == "gpu"
    steps: list[tuple[str, int]] = []
    init = batchcheck.DeviceProofs.__init__

    def spy(self, *args):
        steps.append((threading.current_thread().name, cp.cuda.get_current_stream().ptr))
        init(self, *args)

    monkeypatch.setattr(batchcheck.DeviceProofs, "__init__", spy)
    h = distprove.open_key(MINI_ZKEY).content_hash
    specs = [ProofSpec(n, str(w), str(MINI_ZKEY), h, str(tmp_path / f"{n}.proof.json"), str(tmp_path / f"{n}.public.json"))
             for n, w in (("a", MINI_WTNS), ("b", MINI_WTNS), ("u", DATA / "bad" / "unsatisfied.wtns"), ("c", MINI_WTNS),
                          ("d", MINI_WTNS), ("e", MINI_WTNS))]
    with dask.config.set({"distprove.msm.group-proofs": 2}):
        outcomes = work.prove_group(specs, work.plan_key(str(MINI_ZKEY)).widths, write=True, check=True)
    assert [(o.name, o.status) for o in outcomes] == [(n, "failed" if n == "u" else "proved") for n in "abucde"]
    assert outcomes[2].reason == output.NOT_VALID and not Path(specs[2].proof_path).exists()
    assert len(steps) == 3 and all(t.startswith("distprove-finisher") and ptr != 0 for t, ptr in steps)
    vk = st.vk(st.key(str(MINI_ZKEY)))
    assert verifier.verify_many([(vk, sp.public_path, sp.proof_path) for sp in specs if sp.name != "u"]) == [True] * 5
