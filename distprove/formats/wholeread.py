"""Reading a small file whole without letting go of the GIL when its bytes are already in memory.

Every read through Python's own I/O (``np.fromfile``, ``os.pread``, even ``os.stat``) releases
the GIL around its system call, and getting it back waits for whichever thread took it: in a Dask
worker whose other threads run Python (the event loop, the finisher writing proofs), that wait
is most of a small witness read, several times the copy itself. A file on tmpfs, or one whose
pages are all in the page cache, is a memory copy away, so it is read here through libc called
with the GIL held (``ctypes.PyDLL``): open, ``statx``, ``fstatfs``, read, close, no handoff.
Whether the pages are in memory is the kernel's answer: tmpfs always; elsewhere a ``preadv2``
with ``RWF_NOWAIT``, which returns what it can without waiting for the disk, and the rest (or
everything, where the kernel or file system refuses the flag) is read with the GIL released.
Where libc cannot be called this way (not Linux), :func:`read_whole` is ``np.fromfile``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
from typing import Any

import numpy as np

_TMPFS_MAGIC = 0x01021994
_RWF_NOWAIT = getattr(os, "RWF_NOWAIT", 8)
_AT_EMPTY_PATH = 0x1000
_STATX_TYPE_SIZE = 0x1 | 0x200
_STATX_BYTES = 256
"""``struct statx`` (the same on every architecture): ``stx_mode`` u16 at 28, ``stx_size`` u64 at 40."""
_STATFS_BYTES = 256
"""Room for ``struct statfs`` (120 bytes on 64-bit Linux); its first member is ``f_type``."""


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _libc() -> Any:
    """libc's functions, called without releasing the GIL; None where they cannot be had."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        lib = ctypes.PyDLL(None, use_errno=True)
        lib.open.argtypes, lib.open.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_int
        lib.statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
        lib.statx.restype = ctypes.c_int
        lib.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
        lib.pread.restype = ctypes.c_ssize_t
        lib.preadv2.argtypes = [ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_int, ctypes.c_long, ctypes.c_int]
        lib.preadv2.restype = ctypes.c_ssize_t
        lib.fstatfs.argtypes, lib.fstatfs.restype = [ctypes.c_int, ctypes.c_void_p], ctypes.c_int
        lib.close.argtypes, lib.close.restype = [ctypes.c_int], ctypes.c_int
    except (OSError, AttributeError):
        return None
    return lib


_LIBC = _libc()
_no_nowait: set[int] = set()
"""File system types whose reads refused ``RWF_NOWAIT`` in this process (added with the GIL held)."""


class OpenError(OSError):
    """The file could not be opened (or, through the plain read, its size not asked)."""


def _fail(path: str, kind: type[OSError] = OSError) -> OSError:
    code = ctypes.get_errno()
    return kind(code, os.strerror(code), path)


def _read_plain(name: str, limit: int) -> np.ndarray | None:
    """What :func:`read_whole` is through Python's own I/O (the GIL let go around each call)."""
    try:
        size = os.path.getsize(name)
    except OSError as e:
        raise OpenError(e.errno, e.strerror, name) from None
    if size > limit:
        return None
    data = np.fromfile(name, dtype=np.uint8) if size else np.empty(0, np.uint8)  # a FIFO's size is 0: not read
    if data.size != size:
        raise ValueError(f"the file changed while it was read ({size} bytes, then {data.size})")
    data.flags.writeable = False
    return data


def _read_released(fd: int, out: np.ndarray, start: int) -> int:
    """Read ``out[start:]`` from ``fd`` at that offset with the GIL released; the bytes read in all."""
    view = memoryview(out)
    at = start
    while at < out.size:
        got = os.preadv(fd, [view[at:]], at)
        if got == 0:
            break
        at += got
    return at


def read_whole(path: str | os.PathLike[str], limit: int) -> np.ndarray | None:
    """The bytes of the file at ``path`` as a read-only uint8 array, or None when it holds more
    than ``limit`` bytes (the caller maps it instead).

    Raises :class:`OpenError` when the file cannot be opened, OSError when it cannot be read
    (a folder), ValueError when it shrank while it was read. Not a regular file (a FIFO, a
    socket): read as ``np.fromfile`` would, a size of 0 not read at all (which would block).
    """
    name = os.fspath(path)
    if _LIBC is None:
        return _read_plain(name, limit)
    fd = _LIBC.open(os.fsencode(name), os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)  # a FIFO's open would block
    if fd < 0:
        raise _fail(name, OpenError)
    try:
        st = ctypes.create_string_buffer(_STATX_BYTES)
        if _LIBC.statx(fd, b"", _AT_EMPTY_PATH, _STATX_TYPE_SIZE, st) != 0:  # refused (a sandbox's filter)
            return _read_plain(name, limit)
        mode = int.from_bytes(st.raw[28:30], "little")
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
        if not stat.S_ISREG(mode):
            return _read_plain(name, limit)
        size = int.from_bytes(st.raw[40:48], "little")
        if size > limit:
            return None
        out = np.empty(size, np.uint8)
        stats = ctypes.create_string_buffer(_STATFS_BYTES)
        fs_type = ctypes.c_long.from_buffer(stats).value if _LIBC.fstatfs(fd, stats) == 0 else -1
        done = 0
        if fs_type == _TMPFS_MAGIC:
            while done < size:
                got = _LIBC.pread(fd, out.ctypes.data + done, size - done, done)
                if got < 0:
                    raise _fail(name)
                if got == 0:
                    break
                done += got
        elif size:
            if fs_type not in _no_nowait:
                iov = _Iovec(out.ctypes.data, size)
                got = _LIBC.preadv2(fd, ctypes.byref(iov), 1, 0, _RWF_NOWAIT)
                if got > 0:
                    done = got
                elif got < 0 and ctypes.get_errno() in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    _no_nowait.add(fs_type)
                elif got < 0 and ctypes.get_errno() != errno.EAGAIN:
                    raise _fail(name)
            done = _read_released(fd, out, done)
        if done != size:
            raise ValueError(f"the file changed while it was read ({size} bytes, then {done})")
        out.flags.writeable = False
        return out
    finally:
        _LIBC.close(fd)
