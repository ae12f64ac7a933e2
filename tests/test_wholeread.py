"""The whole-file read under the GIL (distprove/formats/wholeread.py): the same bytes as the file
by every path it takes (tmpfs, the page cache through RWF_NOWAIT, the released read, Python's
own I/O), the path it takes, and its errors."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distprove.formats import wholeread
from distprove.formats.wholeread import OpenError, read_whole

SIZES = [1, 12, 4095, 4096, 131072 + 76, (2 << 20) + 76]
needs_libc = pytest.mark.skipif(wholeread._LIBC is None, reason="libc cannot be called with the GIL held here")


def _tmpfs_dir() -> Path | None:
    """A writable tmpfs folder (/dev/shm on Linux), or None."""
    shm = Path("/dev/shm")
    if wholeread._LIBC is None or not shm.is_dir() or not os.access(shm, os.W_OK):
        return None
    fd = os.open(shm, os.O_RDONLY)
    try:
        stats = ctypes.create_string_buffer(wholeread._STATFS_BYTES)
        ok = wholeread._LIBC.fstatfs(fd, stats) == 0
        return shm if ok and ctypes.c_long.from_buffer(stats).value == wholeread._TMPFS_MAGIC else None
    finally:
        os.close(fd)


@pytest.fixture
def shm_dir(tmp_path: Path) -> Any:
    shm = _tmpfs_dir()
    if shm is None:
        pytest.skip("no tmpfs folder")
    d = shm / f"distprove-test-{os.getpid()}-{tmp_path.name}"
    d.mkdir()
    yield d
    for f in d.iterdir():
        f.unlink()
    d.rmdir()


def _files(folder: Path) -> list[tuple[Path, bytes]]:
    rng = np.random.default_rng()
    out = []
    for n in SIZES:
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        p = folder / f"f{n}.bin"
        p.write_bytes(data)
        out.append((p, data))
    return out


class _Libc:
    """libc with some of its functions replaced (a test's way to make a read fail or refuse)."""

    def __init__(self, **replaced: Any) -> None:
        self._real = wholeread._LIBC
        self._replaced = replaced

    def __getattr__(self, name: str) -> Any:
        return self._replaced.get(name) or getattr(self._real, name)


def _ext4(fd: int, buf: Any) -> int:
    """fstatfs that answers ext4 (the tests of the page-cache path run where /tmp is tmpfs too)."""
    ctypes.c_long.from_buffer(buf).value = 0xEF53
    return 0


def _same(path: Path, data: bytes) -> None:
    got = read_whole(path, 1 << 30)
    assert got is not None and got.tobytes() == data
    assert not got.flags.writeable


def test_same_bytes_on_disk(tmp_path: Path) -> None:
    for path, data in _files(tmp_path):
        _same(path, data)
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    _same(empty, b"")


def test_same_bytes_through_python_io(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wholeread, "_LIBC", None)
    for path, data in _files(tmp_path):
        _same(path, data)
    with pytest.raises(OpenError):
        read_whole(tmp_path / "absent.bin", 100)


@needs_libc
def test_tmpfs_is_read_with_the_gil_held(shm_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def released(*args: Any) -> int:
        raise AssertionError("a tmpfs file was read with the GIL released")

    monkeypatch.setattr(wholeread, "_read_released", released)
    for path, data in _files(shm_dir):
        _same(path, data)


@needs_libc
def test_refused_nowait_reads_released_and_is_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system that refuses RWF_NOWAIT is read with the GIL released, and not asked again;
    data not in memory (EAGAIN) is read released too, and asked again next time."""
    asked: list[int] = []

    def refusing(code: int) -> Any:
        def preadv2(*args: Any) -> int:
            asked.append(code)
            ctypes.set_errno(code)
            return -1

        return preadv2

    monkeypatch.setattr(wholeread, "_no_nowait", set())
    files = _files(tmp_path)
    monkeypatch.setattr(wholeread, "_LIBC", _Libc(preadv2=refusing(errno.EAGAIN), fstatfs=_ext4))
    for path, data in files:
        _same(path, data)
    assert len(asked) == len(files) and not wholeread._no_nowait
    asked.clear()
    monkeypatch.setattr(wholeread, "_LIBC", _Libc(preadv2=refusing(errno.EOPNOTSUPP), fstatfs=_ext4))
    for path, data in files:
        _same(path, data)
    assert len(asked) == 1 and len(wholeread._no_nowait) == 1


@needs_libc
def test_partial_nowait_read_is_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page cache held only the first part: the rest is read released."""
    real = wholeread._LIBC

    def half(fd: int, iov: Any, n: int, offset: int, flags: int) -> int:
        vec = iov._obj
        vec.len = max(1, vec.len // 2)
        return real.preadv2(fd, iov, n, offset, flags)

    monkeypatch.setattr(wholeread, "_no_nowait", set())
    monkeypatch.setattr(wholeread, "_LIBC", _Libc(preadv2=half, fstatfs=_ext4))
    for path, data in _files(tmp_path):
        _same(path, data)


def test_limit_and_errors(tmp_path: Path) -> None:
    path, data = _files(tmp_path)[2]
    assert read_whole(path, len(data) - 1) is None
    assert read_whole(path, len(data)).tobytes() == data
    with pytest.raises(OpenError, match="No such file"):
        read_whole(tmp_path / "absent.bin", 100)
    with pytest.raises(OSError) as folder:
        read_whole(tmp_path, 1 << 20)
    assert not isinstance(folder.value, OpenError)


def test_fifo_is_not_read(tmp_path: Path) -> None:
    """A FIFO is neither opened for a blocking read nor read: its size is 0."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = read_whole(fifo, 1 << 20)
    assert got is not None and got.size == 0


@needs_libc
def test_file_that_shrinks_while_read(shm_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = wholeread._LIBC

    def short(fd: int, buf: int, n: int, offset: int) -> int:
        return real.pread(fd, buf, n // 2, offset) if offset == 0 else 0

    monkeypatch.setattr(wholeread, "_LIBC", _Libc(pread=short))
    path, _ = _files(shm_dir)[4]
    with pytest.raises(ValueError, match="changed while it was read"):
        read_whole(path, 1 << 30)


@needs_libc
def test_refused_statx_reads_through_python_io(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox that filters statx out: the file is still read, through Python's own I/O."""

    def refused(*args: Any) -> int:
        ctypes.set_errno(errno.EPERM)
        return -1

    monkeypatch.setattr(wholeread, "_LIBC", _Libc(statx=refused))
    for path, data in _files(tmp_path):
        _same(path, data)
