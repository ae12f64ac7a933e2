"""The GPU's double-buffered chunk copies (distprove/backends/gpu/stream.py) on the host, with a
stand-in cupy that records streams and events: each chunk's rows land in its slot, the host waits
for a slot's previous copy before refilling its pinned buffer, and the copy stream waits for the
MSM that last read the slot's device buffer."""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

from distprove.backends.gpu import stream as gpu_stream
from distprove.backends.gpu.stream import ChunkStager

LOG: list[tuple] = []


class Event:
    count = 0

    def __init__(self) -> None:
        Event.count += 1
        self.name = f"e{Event.count}"

    def record(self, stream: Any = None) -> None:
        LOG.append(("record", self.name, getattr(stream, "name", "current")))

    def synchronize(self) -> None:
        LOG.append(("host-waits", self.name))


class Stream:
    def __init__(self, non_blocking: bool = False, name: str = "copy") -> None:
        self.name = name

    def wait_event(self, event: Event) -> None:
        LOG.append(("stream-waits", self.name, event.name))


class DeviceArray(np.ndarray):
    """A numpy array with cupy's ``set`` (the copy, logged with its stream)."""

    def set(self, host: np.ndarray, stream: Any = None) -> None:
        self[...] = host
        LOG.append(("copy", stream.name, host.shape[0]))


@pytest.fixture()
def cp(monkeypatch: pytest.MonkeyPatch) -> Any:
    LOG.clear()
    fake = types.SimpleNamespace(
        empty=lambda shape, dtype: np.empty(shape, dtype=dtype).view(DeviceArray),
        uint8=np.uint8, uint32=np.uint32,
        cuda=types.SimpleNamespace(Stream=Stream, Event=Event))
    monkeypatch.setattr(gpu_stream, "pinned_bytes", lambda nbytes: np.empty(nbytes, np.uint8))
    return fake


def test_chunks_land_in_alternating_slots_with_both_guards(cp: Any) -> None:
    source = np.arange(10 * 16, dtype=np.uint32).reshape(10, 16)
    stager = ChunkStager(cp)
    lane = Stream(name="lane")
    got = []
    for i, (lo, hi) in enumerate([(0, 4), (4, 8), (8, 10)]):
        LOG.append(("chunk", i))
        staged = stager.stage(source, lo, hi, i % 2)
        assert staged.slot == i % 2 and staged.data.shape == (hi - lo, 16)
        got.append(np.array(staged.data))
        stager.release(staged.slot, lane)
    assert np.array_equal(np.concatenate(got), source)
    third = LOG[LOG.index(("chunk", 2)):]
    # chunk 2 reuses slot 0: the host waits for chunk 0's copy, the copy stream for chunk 0's MSM
    first_copy = next(e for e in LOG if e[0] == "record" and e[2] == "copy")[1]
    first_read = next(e for e in LOG if e[0] == "record" and e[2] == "lane")[1]
    assert ("host-waits", first_copy) in third
    assert ("stream-waits", "copy", first_read) in third
    assert third.index(("stream-waits", "copy", first_read)) < third.index(("copy", "copy", 2))
    # the first use of each slot waits for nothing
    assert not any(e[0] in ("host-waits", "stream-waits") for e in LOG[:LOG.index(("chunk", 2))])


def test_a_wider_chunk_grows_the_slot_after_its_work(cp: Any) -> None:
    stager = ChunkStager(cp)
    lane = Stream(name="lane")
    g1 = np.ones((8, 16), dtype=np.uint32)
    g2 = np.full((8, 32), 7, dtype=np.uint32)
    stager.release(stager.stage(g1, 0, 8, 0).slot, lane)
    LOG.clear()
    staged = stager.stage(g2, 0, 8, 0)
    assert np.array_equal(np.array(staged.data), g2)
    assert [e[0] for e in LOG][:2] == ["host-waits", "host-waits"]  # the old copy, then the old MSM
