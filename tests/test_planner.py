"""The batch planner's policies that need no cluster: the plan of a batch from its settings and
options, the cutting of each key's proofs into tasks (order, sizes, indices) and when ready proofs
are checked together. The plan's per-key decisions (fusing, proofs per task, split H) are tested
in tests/test_fused.py and tests/test_graph_ntt.py; batches run in tests/test_batch.py."""

from __future__ import annotations

from dataclasses import dataclass

import dask

from distprove import config
from distprove.cluster.planner import Plan, VerifyGrouping, plan_batch, task_groups
from distprove.cluster.tasks import KeyInfo


@dataclass(frozen=True)
class J:
    name: str
    key: str | None


def info(path: str, domain: int, backend: str = "cpu") -> KeyInfo:
    return KeyInfo(path, "h-" + path, 10, 1, domain, {}, backend, False)


def test_task_groups_cut_each_key_in_order_with_planned_indices() -> None:
    small, large = info("s", 1 << 10), info("l", 1 << 24)
    planned = [(J(f"s{i}", "s"), small) for i in range(7)] + [(J(f"l{i}", "l"), large) for i in range(3)]
    one = Plan("data", ("w",), verify=False, fuse_below=1 << 23, max_proofs_per_task=3)  # 7 proofs: too few to group
    got = [([j.name for j in chunk], i.path, k) for chunk, i, k in task_groups(one, planned)]
    assert got == [([f"s{n}"], "s", n) for n in range(7)] + [([f"l{n}"], "l", 7 + n) for n in range(3)]


def test_task_groups_group_fused_proofs_and_leave_the_remainder_last(monkeypatch) -> None:
    import distprove.cluster.planner as planner

    monkeypatch.setattr(planner, "TASKS_PER_WORKER", 1)
    small, large = info("s", 1 << 10), info("l", 1 << 24)  # large: not fused, one proof a task
    planned = [(J(f"s{i}", "s"), small) for i in range(7)] + [(J(f"l{i}", "l"), large) for i in range(2)]
    planned += [(J("t0", "t"), info("t", 1 << 10))]
    plan = Plan("data", ("w",), verify=False, fuse_below=1 << 23, max_proofs_per_task=3)
    got = [([j.name for j in chunk], i.path, k) for chunk, i, k in task_groups(plan, planned)]
    assert got == [
        (["s0", "s1", "s2"], "s", 0), (["s3", "s4", "s5"], "s", 3), (["s6"], "s", 6),
        (["l0"], "l", 7), (["l1"], "l", 8),
        (["t0"], "t", 9),
    ]


def test_verify_grouping_is_due_when_full_waited_or_alone_and_a_slot_is_free() -> None:
    g = VerifyGrouping(size=8, wait=1.0, slots=2)
    assert not g.due(0, 0, 5.0, 0)  # nothing ready
    assert g.due(8, 3, 0.0, 0)  # full
    assert g.due(1, 3, 1.0, 1)  # waited long enough
    assert g.due(1, 0, 0.0, 0)  # nothing else coming: a lone proof is checked at once
    assert not g.due(3, 3, 0.5, 0)  # more may join
    assert not g.due(8, 0, 5.0, 2)  # no free slot
    plan = Plan("data", ("a", "b", "c"))
    assert VerifyGrouping.for_batch(plan, 8, 1.0).slots == 3
    assert VerifyGrouping.for_batch(plan, 8, 1.0, pool_processes=5).slots == 5
    assert VerifyGrouping.for_batch(Plan("data", ()), 8, 1.0).slots == 1


def test_plan_batch_takes_options_over_settings_and_the_gpu_split_threshold_for_gpu_keys() -> None:
    workers = ("a", "b")
    with dask.config.set({"distprove.planner.split-min-domain": 1 << 20, "distprove.planner.gpu-split-min-domain": None}):
        settings = config.settings()
        cpu = plan_batch(settings, [info("k", 1 << 20)], workers, "t")
        assert (cpu.mode, cpu.workers, cpu.tag, cpu.windows_per_task) == ("split", workers, "t", settings.windows_per_task)
        assert (cpu.fuse_below, cpu.max_proofs_per_task, cpu.max_proofs_per_writing_task, cpu.group_domain) == (
            settings.fuse_below, settings.proofs_per_task, settings.proofs_per_writing_task, settings.group_domain)
        assert plan_batch(settings, [info("k", 1 << 20, "gpu")], workers, "t").mode == "data"
        asked = plan_batch(settings, [info("k", 1 << 10)], workers, "t", mode="split", fourstep_min_domain=64,
                           windows_per_task=2, verify=False, assemble_on_workers=False)
        assert (asked.mode, asked.fourstep_min_domain, asked.windows_per_task, asked.verify, asked.assemble_on_workers) == (
            "split", 64, 2, False, False)
