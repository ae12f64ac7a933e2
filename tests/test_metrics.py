"""distprove.cluster.metrics: the recording functions register and export the expected Prometheus series."""

from __future__ import annotations

import random

import dask.config
import pytest
from prometheus_client import REGISTRY, generate_latest

from distprove.cluster import metrics


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_names_exported() -> None:
    metrics.record_proof("k.zarr", True)
    metrics.record_proof("k.zarr", False)
    metrics.record_stage("gather", 0.01)
    metrics.set_resident_bytes(1)
    text = generate_latest(REGISTRY).decode()
    for line in (
        "# TYPE distprove_proofs_total counter",
        "# TYPE distprove_proofs_failed_total counter",
        "# TYPE distprove_stage_seconds histogram",
        "# TYPE distprove_resident_key_bytes gauge",
    ):
        assert line in text
    assert 'distprove_proofs_total{key="k.zarr"}' in text
    assert 'distprove_stage_seconds_bucket{le="+Inf",stage="gather"}' in text


def test_counters_count_per_key() -> None:
    key = f"key{random.getrandbits(32)}.zarr"
    ok, bad = random.randint(1, 9), random.randint(1, 9)
    other_before = _value("distprove_proofs_total", key="other.zarr")
    for _ in range(ok):
        metrics.record_proof(f"/some/dir/{key}/", True)  # a path: labelled by its file name
    for _ in range(bad):
        metrics.record_proof(key, False)
    assert _value("distprove_proofs_total", key=key) == ok
    assert _value("distprove_proofs_failed_total", key=key) == bad
    assert _value("distprove_proofs_total", key="other.zarr") == other_before


def test_key_label_of_key_objects() -> None:
    class FakeKey:
        path = "/keys/circuit.zarr"

    assert metrics.key_label(FakeKey()) == "circuit.zarr"
    assert metrics.key_label("/keys/c.zkey") == "c.zkey"


def test_stage_histogram_sums_and_buckets() -> None:
    stage = f"stage{random.getrandbits(32)}"
    samples = [random.uniform(0, 2) for _ in range(20)] + [0.0, metrics.STAGE_BUCKETS[3]]
    for s in samples:
        metrics.record_stage(stage, s)
    assert _value("distprove_stage_seconds_count", stage=stage) == len(samples)
    assert _value("distprove_stage_seconds_sum", stage=stage) == pytest.approx(sum(samples))
    for le in (metrics.STAGE_BUCKETS[3], 0.5, 1.0):
        assert _value("distprove_stage_seconds_bucket", stage=stage, le=str(float(le))) == sum(s <= le for s in samples)


def test_record_timings_skips_total() -> None:
    tag = random.getrandbits(32)
    before_total = _value("distprove_stage_seconds_count", stage="total")
    metrics.record_timings({f"a{tag}": 0.5, f"b{tag}": 0.25, "total": 0.75})
    assert _value("distprove_stage_seconds_sum", stage=f"a{tag}") == 0.5
    assert _value("distprove_stage_seconds_sum", stage=f"b{tag}") == 0.25
    assert _value("distprove_stage_seconds_count", stage="total") == before_total


def test_resident_gauge_follows_last_value() -> None:
    for n in (random.getrandbits(40), 0, random.getrandbits(33)):
        metrics.set_resident_bytes(n)
        assert _value("distprove_resident_key_bytes") == n


def test_disabled_records_nothing() -> None:
    key = f"off{random.getrandbits(32)}"
    metrics.set_resident_bytes(5)
    with dask.config.set({"distprove.metrics.enabled": False}):
        metrics.record_proof(key, True)
        metrics.record_stage(key, 1.0)
        metrics.record_proofs([(key, True, {key: 1.0})])
        metrics.set_resident_bytes(7)
    assert _value("distprove_proofs_total", key=key) == 0
    assert _value("distprove_stage_seconds_count", stage=key) == 0
    assert _value("distprove_resident_key_bytes") == 5



def test_record_proofs_records_what_one_call_a_proof_records() -> None:
    """A group's proofs recorded in one call leave the same series as record_proof and
    record_timings called for each (the counters per key, every stage's observations)."""

    def proofs(tag: int) -> list[tuple[str, bool, dict[str, float]]]:
        keys = [f"/k/one{tag}.zarr", f"two{tag}.zarr"]
        return [(keys[i % 2], i % 3 != 0, {f"a{tag}": i / 7, f"b{tag}": i / 3, "total": 9.0}) for i in range(10)]

    def series(tag: int) -> list[float]:
        counts = [_value(n, key=f"{k}{tag}.zarr") for n in ("distprove_proofs_total", "distprove_proofs_failed_total") for k in ("one", "two")]
        stages = [_value(f"distprove_stage_seconds_{stat}", stage=f"{s}{tag}") for s in "ab" for stat in ("count", "sum")]
        buckets = [_value("distprove_stage_seconds_bucket", stage=f"a{tag}", le=str(float(le))) for le in metrics.STAGE_BUCKETS]
        return counts + stages + buckets

    grouped, single = random.getrandbits(32), random.getrandbits(32)
    before_total = _value("distprove_stage_seconds_count", stage="total")
    metrics.record_proofs(iter(proofs(grouped)))
    for key, ok, seconds in proofs(single):
        metrics.record_proof(key, ok)
        metrics.record_timings(seconds)
    assert series(grouped) == pytest.approx(series(single))
    assert series(grouped)[:4] == [3, 3, 2, 2] and series(grouped)[4] == 10
    assert _value("distprove_stage_seconds_count", stage="total") == before_total


def test_failed_series_exist_from_a_keys_first_proof() -> None:
    """A key's failed counter has a sample (0) once its first proof is counted, so alerts on
    ``increase(distprove_proofs_failed_total[1h])`` see the first failure."""
    key = f"fresh{random.getrandbits(32)}.zarr"
    assert REGISTRY.get_sample_value("distprove_proofs_failed_total", {"key": key}) is None
    metrics.record_proofs([(key, True, {})])
    assert REGISTRY.get_sample_value("distprove_proofs_failed_total", {"key": key}) == 0.0
    other = f"fresh{random.getrandbits(32)}.zarr"
    metrics.record_proof(other, False)
    assert REGISTRY.get_sample_value("distprove_proofs_total", {"key": other}) == 0.0


def test_scheduler_series_follow_the_latest_batch_and_count_the_cluster() -> None:
    """The dashboard plugin's tallies set the scheduler's series: the latest batch's gauges (the
    larger of the workers' and the client's counts while it runs, the client's at its end) and
    counters of every batch's proofs, each counted once."""
    from distprove.cluster.dashboard import DashboardPlugin

    plugin = DashboardPlugin()
    names = ["distprove_cluster_proofs_total", "distprove_cluster_proofs_failed_total", "distprove_cluster_batches_total"]
    before = [_value(n) for n in names]
    gauges = lambda: [_value(f"distprove_batch_proofs_{k}") for k in ("total", "done", "failed", "skipped")]  # noqa: E731
    a, b = f"a{random.getrandbits(32)}", f"b{random.getrandbits(32)}"
    plugin.log_event("distprove-proofs", {"batch": a, "total": 10, "final": False, "proved": 0, "failed": 0, "skipped": 1})
    plugin.log_event("distprove-proofs", {"batch": a, "worker": "tcp://w1", "proved": 3, "failed": 1, "seconds": {"msm": 1.5}})
    plugin.log_event("other-topic", {"batch": a, "worker": "tcp://w1", "proved": 50})
    assert gauges() == [10, 3, 1, 1]
    plugin.log_event("distprove-proofs", {"batch": a, "total": 10, "final": False, "proved": 2, "failed": 1, "skipped": 1})
    assert gauges() == [10, 3, 1, 1]  # the client has seen fewer: the workers' count stands
    plugin.log_event("distprove-proofs", {"batch": a, "worker": "tcp://w2", "proved": 5, "failed": 0, "seconds": {"msm": 2.0}})
    plugin.log_event("distprove-proofs", {"batch": a, "total": 10, "final": True, "proved": 8, "failed": 1, "skipped": 1})
    assert gauges() == [10, 8, 1, 1]
    snap = plugin.snapshot()
    assert (snap["batch"], snap["done"], snap["running"], snap["stages"]) == (a, 8, False, {"msm": 3.5})
    assert {w["worker"]: w["proofs"] for w in snap["workers"]} == {"tcp://w1": 3, "tcp://w2": 5}
    plugin.log_event("distprove-proofs", {"batch": b, "total": 4, "final": False, "proved": 0, "failed": 0, "skipped": 0})
    plugin.log_event("distprove-proofs", {"batch": b, "worker": "tcp://w1", "proved": 2, "failed": 0, "seconds": {}})
    assert gauges() == [4, 2, 0, 0] and plugin.snapshot(a)["done"] == 8
    assert [_value(n) - b0 for n, b0 in zip(names, before)] == [10, 1, 2]


def test_tally_rates_over_the_window() -> None:
    from distprove.cluster.progress import RATE_WINDOW, BatchTally

    tally = BatchTally("t", started=100.0)
    for t, n in [(1.0, 2), (2.0, 2), (3.0, 4), (3.0 + RATE_WINDOW, 4), (3.0 + 2 * RATE_WINDOW, 14)]:
        tally.add({"worker": "w", "proved": n}, now=100.0 + t)
    assert [d for _, d in tally.history] == [2, 4, 8, 12, 26]
    assert tally.rates() == pytest.approx([2 / 1, 4 / 2, 8 / 3, (12 - 8) / RATE_WINDOW, (26 - 12) / RATE_WINDOW])


def test_tally_worker_rates_over_the_last_window() -> None:
    from distprove.cluster.progress import RATE_WINDOW, BatchTally

    tally = BatchTally("t", started=0.0)
    for t, w, n in [(1.0, "a", 3), (2.0, "b", 1), (10.0, "a", 4), (10.0 + RATE_WINDOW / 2, "a", 6)]:
        tally.add({"worker": w, "proved": n}, now=t)
    now = 10.0 + RATE_WINDOW / 2
    assert tally.worker_rate("a", now) == pytest.approx((4 + 6) / RATE_WINDOW)  # the 3 of t=1 are older
    assert tally.worker_rate("b", now) == 0.0 and tally.worker_rate("c", now) == 0.0
    assert len(tally.recent["a"]) <= 3
    early = BatchTally("u", started=0.0)
    early.add({"worker": "a", "proved": 3}, now=1.0)
    assert early.worker_rate("a", 2.0) == pytest.approx(3 / 2.0)  # the batch's first seconds


def test_group_message_counts_once_in_plain_types() -> None:
    """A group's message counts what this attempt wrote or failed (not what an earlier one wrote),
    its stage seconds summed as plain floats (msgpack, which carries Dask events, packs no numpy)."""
    import msgpack
    import numpy as np

    from distprove.cluster.progress import group_message
    from distprove.cluster.tasks import Outcome, Status

    outs = [Outcome("a", Status.PROVED, "", {"msm": np.float32(0.5), "check": 0.25}),
            Outcome("b", Status.PROVED, "", {"msm": 1.0}),
            Outcome("c", Status.PROVED, "", {"msm": 9.0}, written_before=True),
            Outcome("d", Status.FAILED, "bad", {})]
    msg = group_message("tag", "tcp://w", outs)
    assert msg == {"batch": "tag", "worker": "tcp://w", "proved": 2, "failed": 1, "seconds": {"msm": 1.5, "check": 0.25}}
    assert msgpack.unpackb(msgpack.packb(msg)) == msg
    assert group_message("tag", "tcp://w", outs[2:3]) is None
