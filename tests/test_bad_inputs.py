"""Malformed files: each gives one FormatError naming the file and the problem on one line,
and never any other exception type (shipped bad fixtures, synthetic corruptions, fuzzing)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distprove.bn254 import Q, R
from distprove.errors import FormatError
from distprove.formats import (
    open_container,
    read_proof,
    read_ptau,
    read_public,
    read_r1cs,
    read_wtns,
    read_zkey,
    write_container,
)

DATA = Path(__file__).parent / "data"
BAD = DATA / "bad"
MINI = DATA / "mini"

# file (relative to tests/data/bad) -> (reader, keywords that must appear in the message)
BAD_FILES: dict[str, tuple[Callable, list[str]]] = {
    "truncated_header.zkey": (read_zkey, ["truncated header"]),
    "truncated_half.zkey": (read_zkey, ["truncated", "section 6", "past the end"]),
    "wrong_magic.zkey": (read_zkey, ["magic", "zkez", "zkey"]),
    "section_size_lies.zkey": (read_zkey, ["section 5", "1099511627776", "past the end"]),
    "protocol_plonk.zkey": (read_zkey, ["protocol 2", "PLONK", "Groth16"]),
    "missing_h_section.zkey": (read_zkey, ["missing section 9", "H"]),
    "point_off_curve.zkey": (read_zkey, ["A point 1 is not on the curve"]),
    "truncated.wtns": (read_wtns, ["truncated", "nWitness 6"]),
    "empty.wtns": (read_wtns, ["empty"]),
    "random_bytes.wtns": (read_wtns, ["magic", "wtns"]),
    "wrong_prime.wtns": (read_wtns, ["prime", "q", "expected r"]),
    "value_ge_r.wtns": (read_wtns, ["witness value 3", ">= r"]),
    "mul_chain_1k/circuit_final_truncated.zkey": (read_zkey, ["truncated", "past the end"]),
    "mul_chain_1k/witness_truncated.wtns": (read_wtns, ["truncated", "nWitness 1023"]),
    "mul_chain_1k/witness_noncanonical.wtns": (read_wtns, ["witness value 8", ">= r"]),
}
# well-formed files: the error is semantic (caught by the prover / verifier), not a format error
WELL_FORMED: dict[str, Callable] = {
    "unsatisfied.wtns": read_wtns,
    "mul_chain_1k/witness_flipped.wtns": read_wtns,
    "mul_chain_1k/proof_witness_flipped.json": read_proof,
    "mul_chain_1k/proof_witness_noncanonical.json": read_proof,
    "mul_chain_1k/proof_witness_truncated.json": read_proof,
    "mul_chain_1k/public_witness_flipped.json": read_public,
    "mul_chain_1k/public_witness_noncanonical.json": read_public,
    "mul_chain_1k/public_witness_truncated.json": read_public,
}
NOT_INPUTS = {"README.md", "mul_chain_1k/README.txt", "mul_chain_1k/README_rapidsnark.txt",
              "mul_chain_1k/witness_flipped.json", "mul_chain_1k/witness_noncanonical.json"}


def _fails(reader: Callable, path: Path | str, *words: str) -> str:
    with pytest.raises(FormatError) as e:
        reader(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: "), msg
    assert "\n" not in msg
    for w in words:
        assert w in msg, (w, msg)
    return msg


def test_every_bad_file_is_covered() -> None:
    files = {str(p.relative_to(BAD)) for p in BAD.rglob("*") if p.is_file()}
    assert files == set(BAD_FILES) | set(WELL_FORMED) | NOT_INPUTS


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_fixture(name: str) -> None:
    reader, words = BAD_FILES[name]
    _fails(reader, BAD / name, *words)


@pytest.mark.parametrize("name", sorted(WELL_FORMED))
def test_well_formed_bad_fixture_parses(name: str) -> None:
    WELL_FORMED[name](BAD / name)


def test_missing_file() -> None:
    _fails(read_zkey, DATA / "no_such.zkey", "cannot open")


# --- synthetic corruptions of mini's files ---------------------------------------------------

READERS: dict[str, tuple[Callable, Path, str]] = {
    "zkey": (read_zkey, MINI / "mini_0001.zkey", "zkey"),
    "wtns": (read_wtns, MINI / "witness.wtns", "wtns"),
    "r1cs": (read_r1cs, MINI / "mini.r1cs", "r1cs"),
    "ptau": (lambda p: read_ptau(p, check_points=True), MINI / "pot4_final.ptau", "ptau"),
}


def _section_offset(kind: str, sid: int) -> int:
    """Byte offset of section ``sid``'s data in mini's ``kind`` file."""
    _, src, magic = READERS[kind]
    return open_container(src, magic, 2).sections[sid].offset


def _patched(tmp_path: Path, kind: str, off: int, fmt: str, value: int) -> Path:
    _, src, _ = READERS[kind]
    data = bytearray(src.read_bytes())
    struct.pack_into(fmt, data, off, value)
    out = tmp_path / f"bad.{kind}"
    out.write_bytes(bytes(data))
    return out


def _patch_int256(tmp_path: Path, kind: str, off: int, value: int) -> Path:
    _, src, _ = READERS[kind]
    data = bytearray(src.read_bytes())
    data[off : off + 32] = value.to_bytes(32, "little")
    out = tmp_path / f"bad.{kind}"
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize("kind", sorted(READERS))
def test_every_truncation_is_a_format_error(kind: str, tmp_path: Path) -> None:
    reader, src, _ = READERS[kind]
    data = src.read_bytes()
    step = 1 if len(data) < 5000 else 7
    out = tmp_path / f"t.{kind}"
    for n in list(range(0, len(data), step)) + [len(data) - 1]:
        out.write_bytes(data[:n])
        with pytest.raises(FormatError) as e:
            reader(out)
        assert str(e.value).startswith(f"{out}: ")
        if n < 12:
            assert "empty" in str(e.value) if n == 0 else "truncated header" in str(e.value)
        else:
            assert "truncated" in str(e.value) or "missing section" in str(e.value), str(e.value)


@pytest.mark.parametrize("kind", sorted(READERS))
def test_container_level_corruptions(kind: str, tmp_path: Path) -> None:
    reader, src, magic = READERS[kind]
    data = src.read_bytes()
    out = tmp_path / f"c.{kind}"
    c = open_container(src, magic, 2)
    first = c.sections[c.order[0]]
    size_off = first.offset - 8  # the u64 size of the first section in the table

    out.write_bytes(data + b"\0\0\0")
    _fails(reader, out, "3 bytes of trailing garbage")

    for bad_size, shown in ((len(data), str(len(data))), (1 << 63, str(1 << 63))):
        b = bytearray(data)
        struct.pack_into("<Q", b, size_off, bad_size)
        out.write_bytes(bytes(b))
        _fails(reader, out, f"section {c.order[0]} claims {shown} bytes", "past the end")

    b = bytearray(data)
    struct.pack_into("<I", b, 4, 3)
    out.write_bytes(bytes(b))
    _fails(reader, out, "unsupported", "version 3")

    b = bytearray(data)
    struct.pack_into("<I", b, 8, 0xFFFFFFFF)
    out.write_bytes(bytes(b))
    _fails(reader, out, "truncated section table")

    b = bytearray(data)
    struct.pack_into("<I", b, 8, 0)
    out.write_bytes(bytes(b[:12]))
    _fails(reader, out, "missing section")

    # a duplicate of the first section appended at the end
    write_container(out, magic, c.version, [(s, c.raw(s, "")) for s in c.order] + [(c.order[0], c.raw(c.order[0], ""))])
    _fails(reader, out, f"duplicate section {c.order[0]}")

    # a section id swapped for an unknown one: the reader reports the missing section by name
    b = bytearray(data)
    struct.pack_into("<I", b, first.offset - 12, 77)
    out.write_bytes(bytes(b))
    _fails(reader, out, f"missing section {c.order[0]}")


def test_zkey_header_corruptions(tmp_path: Path) -> None:
    h = _section_offset("zkey", 2)
    cases = [
        (h + 0, "<I", 48, ["n8q is 48"]),
        (h + 36, "<I", 64, ["n8r is 64"]),
        (h + 80, "<I", 6, ["domainSize 6", "power of two"]),
        (h + 80, "<I", 0, ["domainSize 0", "power of two"]),
        (h + 72, "<I", 7, ["section 5 (A) has 384 bytes, expected 448"]),
        (h + 76, "<I", 6, ["nVars 6", "nPublic + 1 = 7"]),
        (h + 76, "<I", 1, ["section 3 (IC) has 192 bytes, expected 128"]),
        (_section_offset("zkey", 1), "<I", 10, ["protocol 10 (FFLONK)"]),
        (_section_offset("zkey", 4), "<I", 10, ["section 4", "4 + 44 * nCoefs (10)"]),
    ]
    for off, fmt, value, words in cases:
        _fails(read_zkey, _patched(tmp_path, "zkey", off, fmt, value), *words)
    _fails(read_zkey, _patch_int256(tmp_path, "zkey", h + 4, R), "q is not BN254")
    _fails(read_zkey, _patch_int256(tmp_path, "zkey", h + 40, Q), "r is not BN254")
    _fails(read_zkey, _patch_int256(tmp_path, "zkey", h + 84, Q), "alpha1 point 0 has a coordinate >= q")
    _fails(read_zkey, _patch_int256(tmp_path, "zkey", h + 532 + 96, 5), "delta2 point 0 is not on the curve")


def test_zkey_coefficient_and_point_corruptions(tmp_path: Path) -> None:
    c4 = _section_offset("zkey", 4) + 4  # first record
    rec1 = c4 + 44
    _fails(read_zkey, _patched(tmp_path, "zkey", rec1, "<I", 2), "coefficient 1 has matrix 2")
    _fails(read_zkey, _patched(tmp_path, "zkey", rec1 + 4, "<I", 8), "coefficient 1 has constraint 8 >= domainSize 8")
    _fails(read_zkey, _patched(tmp_path, "zkey", c4 + 8, "<I", 6), "coefficient 0 has signal 6 >= nVars 6")
    _fails(read_zkey, _patch_int256(tmp_path, "zkey", rec1 + 12, R), "coefficient 1 value is >= r")
    h9 = _section_offset("zkey", 9)
    _fails(read_zkey, _patch_int256(tmp_path, "zkey", h9 + 64 * 7 + 32, Q + 1), "H point 7 has a coordinate >= q")
    b7 = _section_offset("zkey", 7)
    _fails(read_zkey, _patched(tmp_path, "zkey", b7 + 128 * 2 + 64, "<I", 12345), "B2 point 2 is not on the curve")
    # the same file parses when the (expensive) section point check is skipped
    assert read_zkey(tmp_path / "bad.zkey", check_points=False).n_vars == 6


def test_wtns_corruptions(tmp_path: Path) -> None:
    s1 = _section_offset("wtns", 1)
    _fails(read_wtns, _patched(tmp_path, "wtns", s1, "<I", 48), "n8 is 48")
    _fails(read_wtns, _patched(tmp_path, "wtns", s1 + 36, "<I", 7), "truncated", "nWitness 7 needs 224")
    _fails(read_wtns, _patched(tmp_path, "wtns", s1 + 36, "<I", 5), "section 2 states 192 bytes, expected nWitness * 32 = 160")
    _fails(read_wtns, _patch_int256(tmp_path, "wtns", s1 + 4, 7), "witness prime is 7, expected r")
    s2 = _section_offset("wtns", 2)
    _fails(read_wtns, _patch_int256(tmp_path, "wtns", s2 + 32 * 5, 2**256 - 1), "witness value 5 is >= r")


def test_r1cs_corruptions(tmp_path: Path) -> None:
    h = _section_offset("r1cs", 1)
    _fails(read_r1cs, _patch_int256(tmp_path, "r1cs", h + 4, Q), "r1cs prime is q")
    _fails(read_r1cs, _patched(tmp_path, "r1cs", h + 60, "<I", 10**9), "too short for nConstraints 1000000000")
    _fails(read_r1cs, _patched(tmp_path, "r1cs", h + 60, "<I", 2), "bytes after the last of 2 constraints")
    _fails(read_r1cs, _patched(tmp_path, "r1cs", h + 36, "<I", 3), "nWires 3 < 1 + nPubOut + nPubIn + nPrvIn = 4")
    c = _section_offset("r1cs", 2)
    # constraint 0: A has 1 term (wire 3); B starts at c + 4 + 36
    _fails(read_r1cs, _patched(tmp_path, "r1cs", c + 4, "<I", 6), "constraint 0 A: wire 6 >= nWires 6")
    _fails(read_r1cs, _patch_int256(tmp_path, "r1cs", c + 4 + 36 + 8, R), "constraint 0 B: coefficient is >= r")
    _fails(read_r1cs, _patched(tmp_path, "r1cs", c, "<I", 1000), "constraint 0 A has 1000 terms, past its end")
    src = open_container(MINI / "mini.r1cs", "r1cs", 1)
    out = tmp_path / "g.r1cs"
    write_container(out, "r1cs", 1, [(s, src.raw(s, "")) for s in src.order] + [(4, b"\0" * 4)])
    _fails(read_r1cs, out, "custom gates")


def test_ptau_corruptions(tmp_path: Path) -> None:
    h = _section_offset("ptau", 1)
    _fails(read_ptau, _patch_int256(tmp_path, "ptau", h + 4, R), "ptau prime is r")
    _fails(read_ptau, _patched(tmp_path, "ptau", h + 36, "<I", 29), "power 29")
    _fails(read_ptau, _patched(tmp_path, "ptau", h + 36, "<I", 3), "section 2 (tauG1) has 1984 bytes, expected 960")
    src = open_container(MINI / "pot4_final.ptau", "ptau", 1)
    out = tmp_path / "l.ptau"
    write_container(out, "ptau", 1, [(s, src.raw(s, "")) for s in src.order if s != 13])
    _fails(read_ptau, out, "Lagrange sections [13] missing")
    t3 = _section_offset("ptau", 3)
    bad = _patched(tmp_path, "ptau", t3 + 128 * 4 + 8, "<I", 99)
    _fails(lambda p: read_ptau(p, check_points=True), bad, "tauG2 point 4 is not on the curve")


# --- fuzzing -------------------------------------------------------------------------------

_SOURCES = {k: (reader, src.read_bytes()) for k, (reader, src, _) in READERS.items()}
_SPECIAL_U32 = [0, 1, 2, 3, 6, 8, 32, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]


@st.composite
def _mutations(draw: st.DrawFn) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(sorted(_SOURCES)))
    data = bytearray(_SOURCES[kind][1])
    for _ in range(draw(st.integers(1, 6))):
        what = draw(st.sampled_from(["byte", "u32", "cut", "insert"]))
        near_head = draw(st.booleans())
        hi = min(len(data), 800) if near_head else len(data)
        if hi < 5:
            break
        pos = draw(st.integers(0, hi - 5))
        if what == "byte":
            data[pos] = draw(st.integers(0, 255))
        elif what == "u32":
            struct.pack_into("<I", data, pos & ~3, draw(st.sampled_from(_SPECIAL_U32)))
        elif what == "cut":
            del data[pos : pos + draw(st.integers(1, 64))]
        else:
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    return kind, bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_mutations())
def test_fuzz_readers_raise_only_format_errors(case: tuple[str, bytes], tmp_path: Path) -> None:
    kind, data = case
    reader = _SOURCES[kind][0]
    out = tmp_path / f"fuzz.{kind}"
    out.write_bytes(data)
    try:
        reader(out)
    except FormatError as e:
        msg = str(e)
        assert msg.startswith(f"{out}: ") and "\n" not in msg
