"""Shared witness slots (distprove.witness.slots): a ring's slots, a witness process writing
into one, the rings a worker process makes, and the claims that fall back to files when none is free."""

from __future__ import annotations

import errno
import logging
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from distprove.witness import slots
from distprove.witness.slots import Ring, ring_for, write_slot

pytestmark = pytest.mark.skipif(sys.platform != "linux" or not os.path.isdir("/dev/shm"), reason="shared slots are Linux's /dev/shm")

DATA = Path(__file__).parent / "data"


def _values(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1 << 28, size=(n, 8), dtype=np.uint32)


def test_a_ring_hands_out_each_slot_once_and_takes_copies() -> None:
    """Slots are reserved once each (None when all are), freed by a take, which copies the values
    out (the slot may be written again at once); the ring's file has no name from the start, and
    its pages go back to /dev/shm on a trim once no slot is reserved."""
    ring = Ring(16, 3)
    try:
        assert os.readlink(f"/proc/self/fd/{ring._fd}").endswith("(deleted)")
        slots = [ring.reserve() for _ in range(3)]
        assert sorted(slots) == [0, 1, 2] and ring.reserve() is None and not ring.idle
        v = _values(16, 1)
        ring.values[slots[1]] = v
        out = ring.take(slots[1])
        ring.values[slots[1]] = 0
        assert np.array_equal(out, v) and ring.reserve() == slots[1]  # the slot freed is used again first
        assert os.fstat(ring._fd).st_blocks > 0 and not ring.trim()  # a slot reserved: kept
        for s in slots:
            ring.release(s)
        assert ring.idle and ring.trim() and os.fstat(ring._fd).st_blocks == 0  # pages given back
        again = ring.reserve()
        ring.values[again] = v  # written after a trim: allocated again
        assert np.array_equal(ring.take(again), v)
    finally:
        ring.close()


def _write(ref: slots.RingRef, slot: int, seed: int) -> int:
    write_slot(ref, slot, _values(ref.n_vars, seed))
    return os.getpid()


def test_a_witness_process_writes_into_the_workers_slots() -> None:
    """Spawned processes map the ring through the worker's descriptor and write whole witnesses
    the worker then reads back, each slot its own."""
    ring = Ring(1000, 6)
    try:
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            list(pool.map(_write, [ring.ref] * 6, range(6), range(10, 16)))
        assert all(np.array_equal(ring.take(s), _values(1000, 10 + s)) for s in range(6))
    finally:
        ring.close()


def test_pages_go_back_after_the_batch_unless_another_is_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch's end does not wait for its rings' pages to go back: they go TRIM_AFTER_S later,
    and not while another batch has a witness waiting for its proof task in the process."""
    import time
    from concurrent.futures import Future

    from distprove.witness import pool

    ring = Ring(1000, 2)
    monkeypatch.setattr(slots, "_rings", {1000: ring})
    monkeypatch.setattr(pool, "TRIM_AFTER_S", 0.2)
    try:
        ring.values[0] = _values(1000, 1)
        with monkeypatch.context() as m:
            waiting = pool._Claim(Future(), 0, ring, 1)
            m.setattr(pool, "_claims", {"other-batch": {"w.wtns": waiting, "taken.wtns": None}})
            pool.forget_batch("this-batch")
            time.sleep(0.5)
            assert os.fstat(ring._fd).st_blocks > 0  # another batch is on: kept
        monkeypatch.setattr(pool, "_claims", {"done-batch": {"taken.wtns": None}})
        pool.forget_batch("this-batch")
        assert os.fstat(ring._fd).st_blocks > 0  # not at once
        deadline = time.monotonic() + 5
        while os.fstat(ring._fd).st_blocks and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.fstat(ring._fd).st_blocks == 0
    finally:
        ring.close()


def test_rings_are_sized_by_claims_and_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker process's ring for a size holds RING_CLAIMS times its first claim within the
    budget, and is the same ring afterwards; no ring under one slot of budget, and none (files,
    from then on for that size) when its file cannot be made."""
    monkeypatch.setattr(slots, "_rings", {})
    assert ring_for(100, 100 * 32 - 1, 8) is None
    ring = ring_for(100, 1 << 20, 8)
    assert ring is not None and ring.ref.slots == slots.RING_CLAIMS * 8
    assert ring_for(100, 1 << 20, 500) is ring
    small = ring_for(101, 5 * 101 * 32, 8)
    assert small is not None and small.ref.slots == 5

    def no_room(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as m:
        m.setattr(slots.tempfile, "mkstemp", no_room)
        assert ring_for(102, 1 << 20, 8) is None
    assert slots._rings.get(102, "none") is None and ring_for(102, 1 << 20, 8) is None  # refused once: files for that size
    for r in (ring, small):
        if r is not None and r.values is not None:
            r.close()


def test_rings_stay_within_dev_shm_less_its_reserve(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """With no budget of its own (auto), a ring holds RING_CLAIMS times its first claim until
    /dev/shm's size less its reserve bounds it; a /dev/shm too small for one slot gives no ring."""
    monkeypatch.setattr(slots, "_rings", {})
    monkeypatch.setattr(slots, "_shm_bytes", lambda: 1 << 30)
    with caplog.at_level(logging.WARNING, logger=slots.__name__):
        big = ring_for(100, slots.UNCAPPED, 8)
        small = ring_for(101, 5 * 101 * 32, 8)  # capped by its budget, not by /dev/shm: no warning
    assert big is not None and big.ref.slots == slots.RING_CLAIMS * 8 and small is not None
    assert "/dev/shm" not in caplog.text
    slot = 2000 * 32
    monkeypatch.setattr(slots, "_shm_bytes", lambda: 16 * slot)  # 14 slots under the reserve of 2
    with caplog.at_level(logging.WARNING, logger=slots.__name__):
        capped = ring_for(2000, slots.UNCAPPED, 8)
    assert capped is not None and capped.ref.slots == int(16 * slot * (1 - slots.SHM_RESERVE)) // slot == 14
    assert "/dev/shm holds 14 of the 32 witnesses" in caplog.text and "--shm-size" in caplog.text
    monkeypatch.setattr(slots, "_shm_bytes", lambda: slot)
    assert ring_for(2001, slots.UNCAPPED, 8) is None
    for r in (big, small, capped):
        if r.values is not None:  # an idle ring of another size is closed as the next is made
            r.close()


def test_a_slot_that_would_eat_the_reserve_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A witness whose slot would leave /dev/shm less than SHM_RESERVE free is not written (its
    file instead); with room it is."""
    ring = Ring(1000, 2)
    slot = 1000 * 32
    real = os.fstatvfs

    def shm_with(free: int) -> object:
        def fake(fd: int) -> os.statvfs_result:
            st = real(fd)
            return os.statvfs_result((st.f_bsize, 1, 100 * slot, free, free, *tuple(st)[5:]))
        return fake

    try:
        reserve = int(100 * slot * slots.SHM_RESERVE)
        with monkeypatch.context() as m:
            m.setattr(os, "fstatvfs", shm_with(reserve + slot - 1))
            assert write_slot(ring.ref, 0, _values(1000, 1)) is False
        assert not ring.values[0].any()
        with monkeypatch.context() as m:
            m.setattr(os, "fstatvfs", shm_with(reserve + slot))
            assert write_slot(ring.ref, 1, _values(1000, 2)) is True
        assert np.array_equal(ring.take(1), _values(1000, 2))
    finally:
        ring.close()


def test_the_shared_memory_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """``witness.shared-memory``: auto by default (no cap of its own), a size caps, null is files only."""
    import dask

    from distprove.errors import FormatError
    from distprove.witness.pool import shared_budget

    assert shared_budget() == slots.UNCAPPED
    with dask.config.set({"distprove.witness.shared-memory": "64 MiB"}):
        assert shared_budget() == 64 << 20
    with dask.config.set({"distprove.witness.shared-memory": None}):
        assert shared_budget() == 0
    with dask.config.set({"distprove.witness.shared-memory": "lots"}), pytest.raises(FormatError, match="must be auto, a size"):
        shared_budget()


def test_claims_fall_back_to_files_when_no_slot_is_free(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With one slot for two witnesses, the first goes through the slot and the second through
    its file; both are taken with the fixture's values, and the slot is free again."""
    from distprove.cluster.inputbatch import compute_witnesses
    from distprove.formats.wtns import read_wtns
    from distprove.witness import pool
    from distprove.witness.pool import WitnessSource, await_witness, forget_batch

    ring = Ring(1023, 1)
    monkeypatch.setattr(pool, "ring_for", lambda n_vars, budget, claims: ring)
    wasm = str(DATA / "mul_chain_1k" / "circuit.wasm")
    inputs = [str(DATA / "mul_chain_1k" / "inputs" / f"input_{k}.json") for k in (1, 2)]
    items = [(inputs[0], str(tmp_path / "a.wtns")), (inputs[1], str(tmp_path / "b.wtns"))]
    try:
        assert compute_witnesses(wasm, items, 1023, False, "slots-test", 1 << 20) == ["", ""]
        assert not (tmp_path / "a.wtns").exists() and (tmp_path / "b.wtns").exists()
        got = [await_witness(WitnessSource(wasm, inp, False, "slots-test", 1 << 20), wtns, 1023) for inp, wtns in items]
        expected = [read_wtns(DATA / "mul_chain_1k" / "witnesses" / f"witness_{k}.wtns").values for k in (1, 2)]
        assert np.array_equal(got[0], expected[0]) and got[1] is None
        assert np.array_equal(read_wtns(tmp_path / "b.wtns").values, expected[1]) and ring.idle
    finally:
        forget_batch("slots-test")
        ring.close()


def test_a_slot_without_room_sends_its_witness_to_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A witness whose slot's pages cannot be allocated (a full /dev/shm) is not written there
    (no SIGBUS later), and its claim's witness goes to its file: taken as a file, slot freed."""
    from distprove.cluster.inputbatch import compute_witnesses
    from distprove.formats.wtns import read_wtns
    from distprove.witness import pool
    from distprove.witness.pool import WitnessSource, await_witness, forget_batch

    ring = Ring(1023, 2)

    def full(fd: int, offset: int, size: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    try:
        with monkeypatch.context() as m:
            m.setattr(os, "posix_fallocate", full)
            assert write_slot(ring.ref, 0, _values(1023, 3)) is False
        assert not ring.values[0].any()
        monkeypatch.setattr(pool, "ring_for", lambda n_vars, budget, claims: ring)
        monkeypatch.setattr(pool, "write_slot", lambda ref, slot, values: False)
        wasm = str(DATA / "mul_chain_1k" / "circuit.wasm")
        inp, wtns = str(DATA / "mul_chain_1k" / "inputs" / "input_1.json"), str(tmp_path / "a.wtns")
        assert compute_witnesses(wasm, [(inp, wtns)], 1023, False, "room-test", 1 << 20) == [""]
        assert await_witness(WitnessSource(wasm, inp, False, "room-test", 1 << 20), wtns, 1023) is None
        expected = read_wtns(DATA / "mul_chain_1k" / "witnesses" / "witness_1.wtns").values
        assert np.array_equal(read_wtns(wtns).values, expected) and ring.idle
    finally:
        forget_batch("room-test")
        ring.close()
