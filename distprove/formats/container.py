"""The @iden3/binfileutils container shared by .zkey, .wtns, .ptau and .r1cs (SNARKJS_FORMATS.md §2).

Layout: 4-byte magic, u32 version, u32 nSections, then nSections × (u32 id, u64 size, data).
A file of up to :data:`READ_WHOLE_BYTES` is read whole (``wholeread``), a larger one memory-mapped;
the section table is scanned once and indexed by id, so sections may come in any order and
those of a mapped file are never read whole unless a caller asks for them.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterable, Iterator, NoReturn, Union

import numpy as np

from distprove.bn254 import Group
from distprove.errors import FormatError

from .atomic import write_atomic
from .wholeread import OpenError, read_whole

READ_WHOLE_BYTES = 32 << 20
"""Files up to this size are read into memory whole rather than mapped (:func:`read_whole`: with
the GIL held where the bytes are in memory already): a small witness read whole is one copy,
where a map costs the mapping, its page faults on first touch and, for a reader that needs the
values in memory anyway, a copy (a 2^12 circuit's .wtns, 128 kB: about 0.2 ms mapped and copied
on the H200 host). It covers every witness a GPU stacks with its group's others
(``backends.gpu.backend.DEFER_WITNESS_BYTES``)."""

@dataclass(frozen=True)
class Reserved:
    """Section data that :func:`write_container` leaves as a hole of ``nbytes`` for its ``fill`` to write in place."""

    nbytes: int


SectionData = Union[bytes, bytearray, memoryview, np.ndarray, Reserved, Iterable[Union[bytes, np.ndarray]]]


@dataclass(frozen=True)
class Section:
    """One section: its id, where its data starts, its usable size and the size the table states."""

    id: int
    offset: int
    size: int
    stated_size: int


class Container:
    """A parsed container, read whole or memory-mapped. Use :func:`open_container` to make one."""

    def __init__(self, path: str, magic: str, version: int, data: np.ndarray, sections: dict[int, Section], order: list[int]):
        self.path = path
        self.magic = magic
        self.version = version
        self.data = data
        """The whole file as a read-only uint8 array (read into memory, or memory-mapped)."""
        self.sections = sections
        self.order = order
        """Section ids in file order."""

    @property
    def mapped(self) -> bool:
        """Whether :attr:`data` maps the file rather than holds it in memory."""
        return isinstance(self.data, np.memmap)

    def fail(self, problem: str) -> NoReturn:
        """Raise FormatError(path, problem)."""
        raise FormatError(self.path, problem)

    def has(self, sid: int) -> bool:
        """True when section ``sid`` is present."""
        return sid in self.sections

    def section(self, sid: int, name: str) -> Section:
        """The section ``sid`` (called ``name`` in errors); raises FormatError when it is missing."""
        s = self.sections.get(sid)
        if s is None:
            self.fail(f"missing section {sid} ({name})")
        return s

    def expect_size(self, sid: int, name: str, size: int) -> Section:
        """The section ``sid``, which must hold exactly ``size`` bytes."""
        s = self.section(sid, name)
        if s.size != size:
            self.fail(f"section {sid} ({name}) has {s.size} bytes, expected {size}")
        return s

    def raw(self, sid: int, name: str) -> np.ndarray:
        """Section ``sid``'s bytes as a read-only uint8 view of the file's data."""
        s = self.section(sid, name)
        return self.data[s.offset : s.offset + s.size]

    def u32(self, offset: int) -> int:
        """The little-endian u32 at a file offset."""
        return int.from_bytes(self.data[offset : offset + 4].tobytes(), "little")

    def uint(self, offset: int, nbytes: int) -> int:
        """The little-endian unsigned integer of ``nbytes`` bytes at a file offset."""
        return int.from_bytes(self.data[offset : offset + nbytes].tobytes(), "little")

    def limbs(self, offset: int, rows: int, width: int) -> np.ndarray:
        """A read-only ``(rows, width)`` little-endian uint32 view starting at a file offset."""
        if rows == 0:
            return np.zeros((0, width), dtype="<u4")
        return np.frombuffer(self.data, dtype="<u4", count=rows * width, offset=offset).reshape(rows, width)


def open_container(
    path: str | os.PathLike[str],
    magic: str,
    max_version: int,
    *,
    loose_last: int | None = None,
) -> Container:
    """Read or map ``path`` (:data:`READ_WHOLE_BYTES`), check magic and version, scan the section table.

    ``loose_last``: a section id whose stated size is not trusted when it is the last section
    (circom_runtime writes the wtns data size wrongly for sections >= 4 GiB); its ``size`` is
    then everything up to the end of the file and ``stated_size`` keeps the table's value.

    Raises FormatError for an unreadable, empty or truncated file, a wrong magic, a version
    above ``max_version``, a section running past the end, duplicate section ids and trailing
    bytes after the last section.
    """
    name = os.fspath(path)
    try:
        data = read_whole(name, READ_WHOLE_BYTES)
        size = os.path.getsize(name) if data is None else data.size
    except OpenError as e:
        raise FormatError(name, f"cannot open: {e.strerror or e}") from e
    except OSError as e:
        raise FormatError(name, f"cannot read file: {e}") from e
    except ValueError as e:
        raise FormatError(name, str(e)) from e
    if size == 0:
        raise FormatError(name, f"empty file (expected a {magic} file)")
    if size < 12:
        raise FormatError(name, f"truncated header: file has {size} bytes, the header needs 12")
    if data is None:
        try:
            data = np.memmap(name, dtype=np.uint8, mode="r")
        except (OSError, ValueError) as e:
            raise FormatError(name, f"cannot read file: {e}") from e
        if data.size != size:  # changed since its size was read
            raise FormatError(name, f"the file changed while it was read ({size} bytes, then {data.size})")
    head = data[:12].tobytes()
    found = head[:4]
    if found != magic.encode():
        raise FormatError(name, f"wrong magic {found!r}, expected {magic.encode()!r} (not a {magic} file)")
    version, n_sections = struct.unpack_from("<II", head, 4)
    if version > max_version:
        raise FormatError(name, f"unsupported {magic} version {version} (snarkjs reads up to {max_version})")
    sections: dict[int, Section] = {}
    order: list[int] = []
    pos = 12
    for i in range(n_sections):
        if pos + 12 > size:
            raise FormatError(
                name,
                f"truncated section table: entry {i} of {n_sections} at offset {pos} runs past the end of the file ({size} bytes)",
            )
        sid, ssize = struct.unpack("<IQ", data[pos : pos + 12].tobytes())
        pos += 12
        remaining = size - pos
        stated = ssize
        if sid == loose_last and i == n_sections - 1:
            ssize = remaining
        elif ssize > remaining:
            raise FormatError(
                name, f"truncated: section {sid} claims {ssize} bytes but only {remaining} remain (past the end of the file)"
            )
        if sid in sections:
            raise FormatError(name, f"duplicate section {sid}")
        sections[sid] = Section(sid, pos, ssize, stated)
        order.append(sid)
        pos += ssize
    if pos != size:
        raise FormatError(name, f"{size - pos} bytes of trailing garbage after the last of {n_sections} sections")
    return Container(name, magic, version, data, sections, order)


def _chunks(data: SectionData) -> Iterator[bytes | memoryview]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        yield data
    elif isinstance(data, np.ndarray):
        yield memoryview(np.ascontiguousarray(data)).cast("B")
    else:
        for part in data:
            if isinstance(part, np.ndarray):
                yield memoryview(np.ascontiguousarray(part)).cast("B")
            else:
                yield part


def write_container(
    path: str | os.PathLike[str],
    magic: str,
    version: int,
    sections: Iterable[tuple[int, SectionData]],
    fill: Callable[[BinaryIO, dict[int, int]], object] | None = None,
    *,
    durable: bool = True,
) -> None:
    """Write a container atomically, streaming each section (bytes, an array or an iterable of chunks).

    Section sizes are patched in after each section is written, so chunked data need not be
    sized in advance. A :class:`Reserved` section is left as a hole; once every section is laid
    out, ``fill(f, offsets)`` writes the holes in place, in any order (``offsets``: file offset of
    each reserved section's data by id). The file appears at ``path`` (via os.replace) only when
    complete; ``durable`` is :func:`~distprove.formats.atomic.write_atomic`'s.
    """

    def write(f: BinaryIO) -> None:
        f.write(magic.encode() + struct.pack("<II", version, 0))
        count = 0
        holes: dict[int, int] = {}
        for sid, data in sections:
            start = f.tell()
            f.write(struct.pack("<IQ", sid, 0))
            n = 0
            if isinstance(data, Reserved):
                holes[sid] = start + 12
                n = data.nbytes
                f.seek(n, os.SEEK_CUR)
            else:
                for part in _chunks(data):
                    n += f.write(part)
            end = f.tell()
            f.seek(start + 4)
            f.write(struct.pack("<Q", n))
            f.seek(end)
            count += 1
        f.truncate(f.tell())  # a hole at the end still counts
        f.seek(8)
        f.write(struct.pack("<I", count))
        if holes:
            if fill is None:
                raise ValueError("reserved sections need a fill")
            fill(f, holes)

    write_atomic(path, write, durable=durable)


def lt_bound(limbs: np.ndarray, bound: int, chunk: int = 1 << 20) -> np.ndarray:
    """Row-wise ``value < bound`` for an (n, 8) little-endian uint32 limb array, vectorised.

    The top limb decides almost every row (field elements are uniform below the bound, and small
    values have a zero top limb): only rows whose top limb equals the bound's are compared in full.
    """
    b = [(bound >> (32 * i)) & 0xFFFFFFFF for i in range(8)]
    top = limbs[:, 7]
    out = top < b[7]
    tie = np.flatnonzero(top == b[7])
    for s in range(0, tie.size, chunk):
        rows = tie[s : s + chunk]
        blk = limbs[rows]
        lt = np.zeros(rows.size, dtype=bool)
        eq = np.ones(rows.size, dtype=bool)
        for i in range(7, -1, -1):
            col = blk[:, i]
            lt |= eq & (col < b[i])
            eq &= col == b[i]
        out[rows] = lt
    return out


def first_false(mask: np.ndarray) -> int | None:
    """Index of the first False in a bool array, or None when all are True."""
    bad = np.flatnonzero(~mask)
    return int(bad[0]) if bad.size else None


def check_few_points(path: str | os.PathLike[str], name: str, limbs: np.ndarray, group: Group) -> None:
    """:func:`check_points` for a handful of rows (a key's header points), in Python integers:
    same checks, same messages, without loading the compiled checker (numba) into the process."""
    from distprove import bn254

    rows = np.ascontiguousarray(limbs, dtype="<u4").reshape(-1, group.limbs)
    for i in range(rows.shape[0]):
        coords = bn254.ints_from_limbs(rows[i])
        if any(c >= bn254.Q for c in coords):
            raise FormatError(path, f"{name} point {i} has a coordinate >= q")
        if not bn254.is_on_curve(group, bn254.points_from_limbs(group, rows[i : i + 1])[0]):
            raise FormatError(path, f"{name} point {i} is not on the curve")


PointChecker = Callable[[np.ndarray, Group], Union[tuple[int, int], None]]
"""Finds the first bad point of a limb array: (index, status as in :mod:`distprove.formats.pointcheck`) or None."""


def check_points(
    path: str | os.PathLike[str], name: str, limbs: np.ndarray, group: Group, first_bad: PointChecker | None = None
) -> None:
    """Check a (n, 16) G1 or (n, 32) G2 Montgomery limb array: every coordinate < q and every
    point on its curve (all-zero rows are infinity and pass). No subgroup check, like snarkjs.

    ``first_bad`` does the scan: by default :func:`distprove.formats.pointcheck.first_bad_point`
    (compiled, on all cores); the key store passes the GPU's when the checks run there
    (``keystore.point_checker``). Raises FormatError(path, "<name> point <i> ...") naming the
    first bad point.
    """
    if first_bad is None:
        from .pointcheck import first_bad_point as first_bad
    bad = first_bad(limbs, group)
    if bad is not None:
        from .pointcheck import COORD_GE_Q  # numba loads with it: only the CPU check and a bad point need it

        i, status = bad
        why = "has a coordinate >= q" if status == COORD_GE_Q else "is not on the curve"
        raise FormatError(path, f"{name} point {i} {why}")
