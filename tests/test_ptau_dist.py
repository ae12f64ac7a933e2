"""``ptau prepare`` on a Dask cluster: the same bytes as in process, the client's memory budget,
worker failures, and the CLI's ``--scheduler`` / ``--workers``.

Most tests share one in-process LocalCluster of two single-threaded workers (cheap to start);
one test starts real worker processes through ``prepare(n_workers=2)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster

from distprove import ptau as ptau_mod
from distprove.cli import main
from distprove.errors import FormatError
from distprove.formats.ptau import read_ptau
from distprove.ptau import blocked_levels, compute_level, level_tasks, new_dev, prepare, prepare_on

from conftest import DATA_DIR

MINI = DATA_DIR / "mini"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as c:
        yield c


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[Client]:
    with Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def dev5(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """A power-5 dev ptau and its in-process prepared bytes."""
    d = tmp_path_factory.mktemp("dev5")
    src, out = d / "dev5.ptau", d / "dev5_final.ptau"
    new_dev(src, 5, seed=5, device="cpu", warn=False)
    prepare(src, out, backend="cpu")
    return src, out.read_bytes()


def _no_temporaries(directory: Path) -> bool:
    return not [p for p in directory.iterdir() if p.name.endswith(".tmp")]


def test_level_tasks_cover_the_sections() -> None:
    power = 5
    n = 1 << power
    tasks = level_tasks(power)
    assert [(t.lid, t.p) for t in tasks][:3] == [(12, 0), (12, 1), (12, 2)]
    assert [t.lid for t in tasks] == sorted(t.lid for t in tasks)  # file order
    sizes = {lid: sum(t.nbytes for t in tasks if t.lid == lid) for lid in (12, 13, 14, 15)}
    assert sizes == {12: (4 * n - 1) * 64, 13: (2 * n - 1) * 128, 14: (2 * n - 1) * 64, 15: (2 * n - 1) * 64}


def test_pot4_on_cluster_matches_snarkjs(client: Client, tmp_path: Path) -> None:
    out = tmp_path / "pot4.ptau"
    prepare(MINI / "pot4_0002.ptau", out, backend="cpu", client=client)
    assert out.read_bytes() == (MINI / "pot4_final.ptau").read_bytes()


@pytest.mark.parametrize("held_bytes", [None, 1, 5000], ids=["default", "one-level", "5000B"])
def test_dev5_on_cluster_equals_in_process(client: Client, dev5: tuple[Path, bytes], tmp_path: Path, held_bytes: int | None) -> None:
    src, expected = dev5
    out = tmp_path / "dist.ptau"
    feed = prepare_on(client, read_ptau(src), out, "cpu", held_bytes)
    assert out.read_bytes() == expected
    largest = max(t.nbytes for t in level_tasks(5))
    assert feed.budget == (2 * largest if held_bytes is None else held_bytes)  # 2 worker threads
    assert feed.peak_reserved <= max(feed.budget, largest)
    if held_bytes == 1:
        assert feed.peak_reserved == largest  # one level at a time
    assert not feed.futures and not feed.pieces and _no_temporaries(tmp_path)


@pytest.mark.parametrize("held_bytes", [None, 1], ids=["default", "one-level"])
def test_blocked_levels_on_cluster_equal_in_process(client: Client, dev5: tuple[Path, bytes], tmp_path: Path,
                                                    held_bytes: int | None) -> None:
    """Every level from 4 points up as two halves and column ranges: the same bytes as in process."""
    import dask.config

    src, expected = dev5
    keys: list = []
    real_submit = client.submit

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        keys.append(kwargs["key"])
        return real_submit(*args, **kwargs)

    client.submit = spy  # type: ignore[method-assign]
    try:
        with dask.config.set({"distprove.ptau.block-points": 4}):
            feed = prepare_on(client, read_ptau(src), tmp_path / "blocked.ptau", "cpu", held_bytes)
    finally:
        del client.submit
    assert (tmp_path / "blocked.ptau").read_bytes() == expected
    kinds = {(k[0], k[1], k[2]) for k in keys}
    assert ("ptau-half", "tauG1", 6) in kinds and ("ptau-columns", "tauG2", 5) in kinds
    assert ("ptau-level", "tauG2", 1) in kinds and ("ptau-half", "tauG2", 1) not in kinds
    columns = [k for k in keys if k[:3] == ("ptau-columns", "tauG1", 6)]
    assert sorted(k[3] for k in columns) == [0, 16]  # one column range per worker thread
    assert keys[0][:3] == ("ptau-half", "tauG2", 5)  # the largest level first (G2 work ~4x G1)
    assert feed.peak_reserved <= max(feed.budget, max(t.nbytes for t in level_tasks(5)))
    assert not feed.futures and not feed.pieces and _no_temporaries(tmp_path)


def test_blocked_levels_auto() -> None:
    """auto blocks the levels above 1/workers of the work: at power 20 none for two workers
    (tauG2's top level is 27% of it), that one for four, it and tauG1's top for eight (13%);
    numbers and null as documented."""
    tasks = level_tasks(20)

    def names(block_points, workers):  # type: ignore[no-untyped-def]
        return sorted((tasks[i].name, tasks[i].p) for i in blocked_levels(tasks, block_points, workers))

    assert names("auto", 2) == []
    assert names("auto", 4) == [("tauG2", 20)]
    assert names("auto", 8) == [("tauG1", 21), ("tauG2", 20)]
    assert names(1 << 20, 2) == [("alphaTauG1", 20), ("betaTauG1", 20), ("tauG1", 20), ("tauG1", 21), ("tauG2", 20)]
    assert names(None, 8) == []
    top28 = level_tasks(28)
    assert [(top28[i].name, top28[i].p) for i in blocked_levels(top28, 2, 2) if top28[i].p > 28] == []  # the coset level


def test_levels_submitted_largest_first(client: Client, dev5: tuple[Path, bytes], tmp_path: Path) -> None:
    feed = prepare_on(client, read_ptau(dev5[0]), tmp_path / "o.ptau", "cpu")
    costs = [feed.tasks[i].cost for i in feed.order]
    assert costs == sorted(costs, reverse=True)
    assert (feed.tasks[feed.order[0]].name, feed.tasks[feed.order[0]].p) == ("tauG2", 5)  # G2 work ~4x G1


def test_budget_from_config(client: Client, dev5: tuple[Path, bytes], tmp_path: Path) -> None:
    import dask.config

    src, expected = dev5
    with dask.config.set({"distprove.ptau.held-bytes": "4 KiB"}):
        feed = prepare_on(client, read_ptau(src), tmp_path / "o.ptau", "cpu")
    assert feed.budget == 4096 and feed.peak_reserved <= 4096
    assert (tmp_path / "o.ptau").read_bytes() == expected
    with dask.config.set({"distprove.ptau.held-bytes": "lots"}), pytest.raises(FormatError, match="held-bytes"):
        prepare(src, tmp_path / "bad.ptau", backend="cpu", client=client)
    for bad in (0, "lots", True):
        with dask.config.set({"distprove.ptau.block-points": bad}), pytest.raises(FormatError, match="block-points"):
            prepare(src, tmp_path / "bad.ptau", backend="cpu", client=client)
    assert not (tmp_path / "bad.ptau").exists()


def test_worker_failure_leaves_no_output(client: Client, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = ptau_mod.level_points

    def failing(group, section, p, backend="cpu"):  # type: ignore[no-untyped-def]
        if p == 3:
            raise FormatError("worker.ptau", "simulated failure")
        return real(group, section, p, backend)

    monkeypatch.setattr(ptau_mod, "level_points", failing)  # the in-process workers share this module
    out = tmp_path / "out.ptau"
    with pytest.raises(FormatError, match="simulated failure"):
        prepare(MINI / "pot4_0002.ptau", out, backend="cpu", client=client)
    assert not out.exists() and _no_temporaries(tmp_path)


def test_worker_sees_another_file() -> None:
    with pytest.raises(FormatError, match="not the same file"):
        compute_level(str(MINI / "pot4_0002.ptau"), 2, 0, "cpu", 5)


def test_cli_scheduler(cluster: LocalCluster, tmp_path: Path) -> None:
    out = tmp_path / "o.ptau"
    res = CliRunner().invoke(main, ["ptau", "prepare", str(MINI / "pot4_0002.ptau"), str(out), "--backend", "cpu",
                                    "--scheduler", cluster.scheduler_address])
    assert res.exit_code == 0, res.output
    assert out.read_bytes() == (MINI / "pot4_final.ptau").read_bytes()


def test_cli_workers_starts_local_cluster(cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import distprove.cluster.client

    asked = []

    def fake_local_cluster(backend: str, n_workers: int | None, *args: object) -> LocalCluster:
        asked.append((backend, n_workers))
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=False, dashboard_address=None)

    monkeypatch.setattr(distprove.cluster.client, "local_cluster", fake_local_cluster)
    out = tmp_path / "o.ptau"
    args = ["ptau", "prepare", str(MINI / "pot4_0002.ptau"), str(out), "--backend", "cpu"]
    res = CliRunner().invoke(main, [*args, "--workers", "2"])
    assert res.exit_code == 0, res.output
    assert asked == [("cpu", 2)] and out.read_bytes() == (MINI / "pot4_final.ptau").read_bytes()
    res = CliRunner().invoke(main, [*args, "--workers", "2", "--scheduler", cluster.scheduler_address])
    assert res.exit_code == 2 and "exclude each other" in res.output


def test_bad_input_fails_before_a_cluster_starts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import distprove.cluster.client

    monkeypatch.setattr(distprove.cluster.client, "local_cluster", lambda *a, **k: pytest.fail("cluster started"))
    bad = tmp_path / "bad.ptau"
    bad.write_bytes((MINI / "pot4_0002.ptau").read_bytes()[:500])
    res = CliRunner().invoke(main, ["ptau", "prepare", str(bad), str(tmp_path / "o.ptau"), "--workers", "2"])
    assert res.exit_code == 1 and res.output.startswith(f"error: {bad}:") and not (tmp_path / "o.ptau").exists()


def test_worker_processes(tmp_path: Path) -> None:
    """Real worker processes (the task and its arguments cross a process boundary)."""
    out = tmp_path / "pot4.ptau"
    prepare(MINI / "pot4_0002.ptau", out, backend="cpu", n_workers=2)
    assert out.read_bytes() == (MINI / "pot4_final.ptau").read_bytes()
