"""Reliability and security (docs/RELIABILITY.md): malformed inputs, unsafe witness folders, bad
items in a batch, unsatisfied witnesses, faults (client lost, full disk, GPU OOM retry), a short
soak, blinding randomness, secrets kept out of logs, and localhost-only local clusters.

Every malformed input must give exactly one line, ``<path>: <problem>``, as a FormatError; never
another exception type (hypothesis fuzzing over the binary and JSON readers and the key store).
"""

from __future__ import annotations

import copy
import errno
import json
import logging
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import dask
import pytest
from conftest import load_script, local_client
import zarr
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distprove
from distprove import bn254
from distprove.bn254 import Q, R
from distprove.errors import FormatError
from distprove.formats import (
    open_container,
    read_proof,
    read_ptau,
    read_public,
    read_r1cs,
    read_vk,
    read_wtns,
    read_zkey,
    write_container,
    write_json_atomic,
)
from distprove.formats import container
from distprove.formats.wholeread import OpenError
from distprove.witness.discovery import safe_witness_paths
from distprove.keystore import KeyStore, import_key

DATA = Path(__file__).parent / "data"
MINI = DATA / "mini"
BAD = DATA / "bad"
MINI_ZKEY = MINI / "mini_0001.zkey"
MINI_WTNS = MINI / "witness.wtns"
MINI_VK = MINI / "verification_key.json"
MUL_ZKEY = DATA / "mul_chain_1k" / "circuit_final.zkey"
MUL_WTNS = sorted((DATA / "mul_chain_1k" / "witnesses").glob("*.wtns"))
REPO = Path(__file__).parents[1]


def one_line(err: BaseException, path: Path | str, *words: str) -> str:
    """Assert ``err`` is a FormatError whose one-line message starts with ``path`` and has ``words``."""
    assert isinstance(err, FormatError), repr(err)
    msg = str(err)
    assert "\n" not in msg, msg
    assert msg.startswith(f"{path}"), (str(path), msg)
    for w in words:
        assert w in msg, (w, msg)
    return msg


def fails(fn: Callable[[Path], Any], path: Path, *words: str) -> str:
    with pytest.raises(FormatError) as e:
        fn(path)
    return one_line(e.value, path, *words)


# --- building malformed files from mini's ------------------------------------------------------

SOURCES = {"zkey": MINI_ZKEY, "wtns": MINI_WTNS, "r1cs": MINI / "mini.r1cs", "ptau": MINI / "pot4_final.ptau"}


def _container(kind: str):
    return open_container(SOURCES[kind], kind, 2)


def _sec(kind: str, sid: int) -> int:
    return _container(kind).sections[sid].offset


def _cut(kind: str, n: int | Callable[[int], int]) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        data = SOURCES[kind].read_bytes()
        out = tmp / f"bad.{kind}"
        out.write_bytes(data[: n(len(data)) if callable(n) else n])
        return out
    return build


def _put(kind: str, off: Callable[[], int], raw: Callable[[], bytes]) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        data = bytearray(SOURCES[kind].read_bytes())
        b = raw()
        o = off()
        data[o : o + len(b)] = b
        out = tmp / f"bad.{kind}"
        out.write_bytes(bytes(data))
        return out
    return build


def _u32(v: int) -> Callable[[], bytes]:
    return lambda: struct.pack("<I", v)


def _u64(v: int) -> Callable[[], bytes]:
    return lambda: struct.pack("<Q", v)


def _int256(v: int) -> Callable[[], bytes]:
    return lambda: v.to_bytes(32, "little")


def _sections(kind: str, edit: Callable[[list[tuple[int, Any]]], list[tuple[int, Any]]]) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        c = _container(kind)
        out = tmp / f"bad.{kind}"
        write_container(out, kind, c.version, edit([(s, bytes(c.raw(s, ""))) for s in c.order]))
        return out
    return build


def _first_size_field(kind: str) -> int:
    c = _container(kind)
    return c.sections[c.order[0]].offset - 8


def _ptau_checked(p: Path) -> Any:
    return read_ptau(p, check_points=True)


# id -> (builder, reader, words in the one-line message)
CASES: dict[str, tuple[Callable[[Path], Path], Callable[[Path], Any], list[str]]] = {
    # zkey
    "zkey-empty": (_cut("zkey", 0), read_zkey, ["empty file"]),
    "zkey-truncated-header": (_cut("zkey", 9), read_zkey, ["truncated header"]),
    "zkey-truncated-table": (_cut("zkey", 20), read_zkey, ["truncated section table"]),
    "zkey-truncated-half": (_cut("zkey", lambda n: n // 2), read_zkey, ["truncated", "past the end"]),
    "zkey-truncated-last-byte": (_cut("zkey", lambda n: n - 1), read_zkey, ["truncated", "past the end"]),
    "zkey-wrong-magic": (_put("zkey", lambda: 0, lambda: b"zkez"), read_zkey, ["wrong magic", "not a zkey file"]),
    "zkey-wtns-given-as-zkey": (lambda tmp: shutil.copy(MINI_WTNS, tmp / "w.zkey") and tmp / "w.zkey", read_zkey, ["wrong magic", "wtns"]),
    "zkey-version-3": (_put("zkey", lambda: 4, _u32(3)), read_zkey, ["unsupported zkey version 3"]),
    "zkey-protocol-plonk": (_put("zkey", lambda: _sec("zkey", 1), _u32(2)), read_zkey, ["protocol 2 (PLONK)"]),
    "zkey-prime-q-not-bn254": (_put("zkey", lambda: _sec("zkey", 2) + 4, _int256(R)), read_zkey, ["q is not BN254"]),
    "zkey-prime-r-not-bn254": (_put("zkey", lambda: _sec("zkey", 2) + 40, _int256(Q)), read_zkey, ["r is not BN254"]),
    "zkey-size-past-end": (_put("zkey", lambda: _first_size_field("zkey"), _u64(1 << 20)), read_zkey, ["claims 1048576 bytes", "past the end"]),
    "zkey-size-absurd": (_put("zkey", lambda: _first_size_field("zkey"), _u64(2**64 - 1)), read_zkey, [f"claims {2**64 - 1} bytes"]),
    "zkey-duplicate-section": (_sections("zkey", lambda s: s + [s[-1]]), read_zkey, ["duplicate section"]),
    "zkey-missing-section": (_sections("zkey", lambda s: [x for x in s if x[0] != 8]), read_zkey, ["missing section 8 (C)"]),
    "zkey-trailing-garbage": (lambda tmp: (tmp / "g.zkey").write_bytes(MINI_ZKEY.read_bytes() + b"x") and tmp / "g.zkey", read_zkey, ["1 bytes of trailing garbage"]),
    "zkey-point-off-curve": (_put("zkey", lambda: _sec("zkey", 6) + 64 + 40, _u32(7)), read_zkey, ["B1 point 1 is not on the curve"]),
    "zkey-coordinate-ge-q": (_put("zkey", lambda: _sec("zkey", 8), _int256(Q)), read_zkey, ["C point 0 has a coordinate >= q"]),
    "zkey-nvars-lies": (_put("zkey", lambda: _sec("zkey", 2) + 72, _u32(5000)), read_zkey, ["section 5 (A)", "expected 320000"]),
    # wtns
    "wtns-empty": (_cut("wtns", 0), read_wtns, ["empty file", "wtns"]),
    "wtns-truncated-header": (_cut("wtns", 11), read_wtns, ["truncated header"]),
    "wtns-truncated-values": (_cut("wtns", lambda n: n - 5), read_wtns, ["truncated"]),
    "wtns-wrong-magic": (_put("wtns", lambda: 0, lambda: b"WTNS"), read_wtns, ["wrong magic"]),
    "wtns-json-file": (lambda tmp: (tmp / "j.wtns").write_text(json.dumps({"pi_a": ["1", "2", "1"]})) and tmp / "j.wtns", read_wtns, ["wrong magic", "not a wtns file"]),
    "wtns-version-3": (_put("wtns", lambda: 4, _u32(3)), read_wtns, ["unsupported wtns version 3"]),
    "wtns-prime-q": (_put("wtns", lambda: _sec("wtns", 1) + 4, _int256(Q)), read_wtns, ["prime is q", "expected r"]),
    "wtns-n8-48": (_put("wtns", lambda: _sec("wtns", 1), _u32(48)), read_wtns, ["n8 is 48"]),
    "wtns-value-ge-r": (_put("wtns", lambda: _sec("wtns", 2) + 64, _int256(R)), read_wtns, ["witness value 2 is >= r"]),
    "wtns-size-absurd": (_put("wtns", lambda: _first_size_field("wtns"), _u64(1 << 62)), read_wtns, ["past the end"]),
    "wtns-duplicate-section": (_sections("wtns", lambda s: s + [s[0]]), read_wtns, ["duplicate section 1"]),
    "wtns-missing-values": (_sections("wtns", lambda s: [x for x in s if x[0] != 2]), read_wtns, ["missing section 2"]),
    # r1cs
    "r1cs-truncated": (_cut("r1cs", lambda n: n - 40), read_r1cs, ["truncated"]),
    "r1cs-wrong-magic": (_put("r1cs", lambda: 0, lambda: b"r1cz"), read_r1cs, ["wrong magic"]),
    "r1cs-version-2": (_put("r1cs", lambda: 4, _u32(2)), read_r1cs, ["unsupported r1cs version 2"]),
    "r1cs-prime-q": (_put("r1cs", lambda: _sec("r1cs", 1) + 4, _int256(Q)), read_r1cs, ["prime is q"]),
    "r1cs-size-absurd": (_put("r1cs", lambda: _first_size_field("r1cs"), _u64(2**63)), read_r1cs, ["past the end"]),
    "r1cs-duplicate-section": (_sections("r1cs", lambda s: s + [s[1]]), read_r1cs, ["duplicate section"]),
    "r1cs-missing-constraints": (_sections("r1cs", lambda s: [x for x in s if x[0] != 2]), read_r1cs, ["missing section 2"]),
    "r1cs-wire-ge-nwires": (_put("r1cs", lambda: _sec("r1cs", 2) + 4, _u32(99)), read_r1cs, ["wire 99 >= nWires"]),
    # ptau
    "ptau-truncated": (_cut("ptau", lambda n: n - 100), _ptau_checked, ["truncated"]),
    "ptau-wrong-magic": (_put("ptau", lambda: 0, lambda: b"ptaw"), _ptau_checked, ["wrong magic"]),
    "ptau-prime-r": (_put("ptau", lambda: _sec("ptau", 1) + 4, _int256(R)), _ptau_checked, ["prime is r"]),
    "ptau-power-29": (_put("ptau", lambda: _sec("ptau", 1) + 36, _u32(29)), _ptau_checked, ["power 29"]),
    "ptau-missing-section": (_sections("ptau", lambda s: [x for x in s if x[0] != 4]), _ptau_checked, ["missing section 4"]),
    "ptau-duplicate-section": (_sections("ptau", lambda s: s + [s[2]]), _ptau_checked, ["duplicate section"]),
    "ptau-point-off-curve": (_put("ptau", lambda: _sec("ptau", 2) + 64 * 3 + 4, _u32(5)), _ptau_checked, ["tauG1 point 3 is not on the curve"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_file(case: str, tmp_path: Path) -> None:
    build, reader, words = CASES[case]
    fails(reader, build(tmp_path), *words)


def test_unreadable_and_odd_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a file at all: a folder, a FIFO (never blocks: its size is 0), a dangling link, no file;
    and a file that cannot be opened (chmod 000 does not stop root, so the read is made to fail)."""
    fails(read_wtns, tmp_path, "cannot read file")
    fifo = tmp_path / "pipe.wtns"
    os.mkfifo(fifo)
    fails(read_wtns, fifo, "empty file")
    link = tmp_path / "gone.wtns"
    link.symlink_to(tmp_path / "nowhere.wtns")
    fails(read_wtns, link, "cannot open", "No such file")
    fails(read_zkey, tmp_path / "absent.zkey", "cannot open")
    locked = tmp_path / "locked.wtns"
    shutil.copy(MINI_WTNS, locked)

    def denied(*args: Any, **kwargs: Any) -> Any:
        raise OpenError(errno.EACCES, "Permission denied", str(locked))

    monkeypatch.setattr(container, "read_whole", denied)
    fails(read_wtns, locked, "cannot open", "Permission denied")


def test_witness_of_another_circuit_is_an_nvars_error() -> None:
    from distprove.prover import prove

    with pytest.raises(FormatError) as e:
        prove(MINI_ZKEY, MUL_WTNS[0], backend="cpu")
    one_line(e.value, MUL_WTNS[0], "1023 values", "expects 6 (nVars)")


# --- the zarr key store ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mini_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(import_key(MINI_ZKEY, tmp_path_factory.mktemp("store") / "mini.zarr").path)


@pytest.fixture(scope="module")
def chain_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mul_chain_1k in small chunks, so that arrays span many chunk files."""
    return Path(import_key(MUL_ZKEY, tmp_path_factory.mktemp("store") / "chain.zarr", chunk_bytes=4096).path)


def _copy(store: Path, tmp: Path) -> Path:
    out = tmp / store.name
    shutil.copytree(store, out)
    return out


def _edit_attrs(store: Path, edit: Callable[[dict], None]) -> None:
    meta = json.loads((store / "zarr.json").read_text())
    edit(meta["attributes"])
    (store / "zarr.json").write_text(json.dumps(meta))


def _chunk_files(store: Path, name: str) -> list[Path]:
    return sorted((p for p in (store / name / "c").rglob("*") if p.is_file()), key=lambda p: [int(x) for x in p.relative_to(store / name / "c").parts])


def _write_array(store: Path, name: str, sel: Any, value: Any) -> None:
    """Rewrite part of an array through zarr (the chunk checksum is then valid)."""
    arr = zarr.open_group(str(store), mode="r+")[name]
    arr[sel] = value


def _open_and_validate(store: Path) -> None:
    KeyStore(store).validate()


# id -> (edit of a copied store, words); "chain" cases use the many-chunk store
STORE_CASES: dict[str, tuple[str, Callable[[Path], None], list[str]]] = {
    "missing-array": ("mini", lambda s: shutil.rmtree(s / "b2"), ["array 'b2' is missing"]),
    "layout-attribute-wrong": ("mini", lambda s: _edit_attrs(s, lambda a: a["distprove"].update(layout=7)), ["layout 1", "layout': 7"]),
    "attributes-missing": ("mini", lambda s: _edit_attrs(s, lambda a: a.pop("header")), ["attribute 'header' is missing"]),
    "header-value-not-int": ("mini", lambda s: _edit_attrs(s, lambda a: a["header"].update(n_vars="6")), ["header.n_vars is '6'"]),
    "header-nvars-vs-arrays": ("mini", lambda s: _edit_attrs(s, lambda a: a["header"].update(n_vars=7)), ["shape (6, 16)", "(7, 16)"]),
    "header-domain-not-pow2": ("mini", lambda s: _edit_attrs(s, lambda a: a["header"].update(domain_size=12)), ["domain_size 12"]),
    "n-coefs-mismatch": ("mini", lambda s: _edit_attrs(s, lambda a: a["header"].update(n_coefs=3)), ["n_coefs is 3"]),
    "point-attribute-off-curve": ("mini", lambda s: _edit_attrs(s, lambda a: a["points"]["delta1"].__setitem__(0, "5")), ["points.delta1 is not a G1 point"]),
    "content-hash-missing": ("mini", lambda s: _edit_attrs(s, lambda a: a["source"].pop("sha256")), ["source.sha256"]),
    "group-metadata-not-json": ("mini", lambda s: (s / "zarr.json").write_text("{not json"), ["not a distprove key store"]),
    "row-ptr-not-monotone": ("mini", lambda s: _write_array(s, "a_row_ptr", 3, 0), ["a_row_ptr", "not monotone"]),
    "row-ptr-past-nnz": ("mini", lambda s: _write_array(s, "b_row_ptr", 8, 999), ["b_row_ptr", "runs past the"]),
    "row-ptr-first-not-zero": ("mini", lambda s: _write_array(s, "a_row_ptr", 0, 1), ["row_ptr[0] is 1"]),
    "signal-ge-nvars": ("mini", lambda s: _write_array(s, "b_signal", 0, 6), ["b_signal", "signal 6 >= n_vars 6"]),
    "value-ge-r": ("mini", lambda s: _write_array(s, "a_value", 1, bn254.limbs_from_ints([R]).reshape(8)), ["a_value", "term 1", ">= r"]),
    "vk-attribute-ic-differs": ("mini", lambda s: _edit_attrs(s, lambda a: a["vk"]["IC"].reverse()), ["ic", "differ"]),
    "deleted-h-chunk": ("chain", lambda s: _chunk_files(s, "h")[3].unlink(), ["h", "point 192 is infinity"]),
    "deleted-a-chunk": ("chain", lambda s: _chunk_files(s, "a")[2].unlink(), ["a", "point 128 is infinity", "has terms"]),
    "deleted-signal-chunk": ("chain", lambda s: _chunk_files(s, "a_signal")[0].unlink(), ["a_signal", "1 of", "chunks are missing"]),
    "deleted-row-ptr-chunk": ("chain", lambda s: _chunk_files(s, "b_row_ptr")[1].unlink(), ["b_row_ptr", "not monotone"]),
    "flipped-byte": ("chain", lambda s: _flip(_chunk_files(s, "b2")[1]), ["b2", "cannot read"]),
    "truncated-chunk": ("chain", lambda s: _truncate(_chunk_files(s, "c")[0]), ["c: cannot read"]),
}


def _flip(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x10
    p.write_bytes(bytes(data))


def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[:100])


@pytest.mark.parametrize("case", sorted(STORE_CASES))
def test_corrupt_key_store(case: str, mini_store: Path, chain_store: Path, tmp_path: Path) -> None:
    which, edit, words = STORE_CASES[case]
    store = _copy(mini_store if which == "mini" else chain_store, tmp_path)
    edit(store)
    with pytest.raises(FormatError) as e:
        _open_and_validate(store)
    one_line(e.value, store, *words)


def test_open_is_cheap_and_validate_is_full(chain_store: Path, tmp_path: Path) -> None:
    """A deleted point chunk is not looked at when the store is opened (the open reads the row
    pointers only) but validate() and a read of that range find it."""
    store = _copy(chain_store, tmp_path)
    _chunk_files(store, "h")[3].unlink()
    ks = KeyStore(store)
    assert ks.domain_size == 1024
    with pytest.raises(FormatError, match="point 192 is infinity"):
        ks.validate()
    ks.validate(points=False)  # the CSR and attribute checks alone pass
    KeyStore(chain_store).validate()
    KeyStore(import_key(MINI_ZKEY, tmp_path / "again.zarr").path).validate()


def test_empty_directory_is_not_a_key_store(tmp_path: Path) -> None:
    from distprove.keystore import open_key

    (tmp_path / "empty").mkdir()
    with pytest.raises(FormatError) as e:
        open_key(tmp_path / "empty")
    one_line(e.value, tmp_path / "empty", "not a distprove key store")


# --- fuzzing: JSON readers and store attributes --------------------------------------------------

_JSON_SOURCES = {
    "proof": (read_proof, json.loads((MINI / "proof.json").read_text())),
    "public": (read_public, json.loads((MINI / "public.json").read_text())),
    "vk": (read_vk, json.loads(MINI_VK.read_text())),
}
_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**300), 2**300), st.floats(allow_nan=True),
    st.sampled_from(["", "0", "-1", "1e5", " 1", "0x10", str(Q), str(R), str(Q - 1), "9" * 120, "groth16", "plonk"]),
    st.text(max_size=8), st.lists(st.just("1"), max_size=4), st.dictionaries(st.text(max_size=3), st.just("1"), max_size=2),
)


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, prefix + (i,))
    return out


@st.composite
def _json_mutation(draw: st.DrawFn, base: Any) -> Any:
    obj = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(obj)
        path = draw(st.sampled_from(paths))
        if not path:
            obj = draw(_LEAVES)
            continue
        parent = obj
        for k in path[:-1]:
            parent = parent[k]
        if draw(st.booleans()) and isinstance(parent, dict):
            parent.pop(path[-1], None)
        elif isinstance(parent, (dict, list)):
            parent[path[-1]] = draw(_LEAVES)
    return obj


@st.composite
def _json_case(draw: st.DrawFn) -> tuple[str, str]:
    kind = draw(st.sampled_from(sorted(_JSON_SOURCES)))
    text = json.dumps(draw(_json_mutation(_JSON_SOURCES[kind][1])))
    if draw(st.integers(0, 4)) == 0:  # damaged text, not only damaged values
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.text(max_size=4))
    return kind, text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_json_case())
def test_fuzz_json_readers_raise_only_format_errors(case: tuple[str, str], tmp_path: Path) -> None:
    kind, text = case
    out = tmp_path / f"fuzz.{kind}.json"
    out.write_bytes(text.encode("utf-8", "surrogatepass"))
    try:
        _JSON_SOURCES[kind][0](out)
    except FormatError as e:
        one_line(e, out)


@pytest.mark.parametrize("coordinate", [float("inf"), float("nan"), 1.5, True, None, [1]])
def test_store_point_coordinate_not_a_decimal_string(mini_store: Path, tmp_path: Path, coordinate: object) -> None:
    """A key store's point coordinates are decimal strings: a float (JSON's 1e400 is infinity,
    which int() cannot take), a bool, null or a list there is the store's one-line FormatError
    naming the point (the fuzz test below found infinity raising OverflowError)."""
    store = _copy(mini_store, tmp_path)
    meta = json.loads((store / "zarr.json").read_text())
    meta["attributes"]["points"]["gamma2"][0][0] = coordinate
    (store / "zarr.json").write_text(json.dumps(meta))
    with pytest.raises(FormatError, match="attribute points.gamma2 is not a G2 point") as e:
        KeyStore(store)
    one_line(e.value, store)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_store_attributes_raise_only_format_errors(data: st.DataObject, mini_store: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    store = _copy(mini_store, tmp_path_factory.mktemp("fz"))
    meta = json.loads((store / "zarr.json").read_text())
    meta["attributes"] = data.draw(_json_mutation(meta["attributes"]))
    (store / "zarr.json").write_text(json.dumps(meta))
    try:
        KeyStore(store).validate(points=False)
    except FormatError as e:
        one_line(e, store)


# --- witness folders: what a batch may read ------------------------------------------------------


def test_safe_witness_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, outside = tmp_path / "w", tmp_path / "secret"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    shutil.copy(MINI_WTNS, outside / "other.wtns")
    (outside / "passwd").write_text("root:x:0:0")
    for name in ("a.wtns", "sub/b.wtns", "locked.wtns"):
        shutil.copy(MINI_WTNS, root / name)
    (root / "notes.txt").write_text("not a witness")
    (root / "in_link.wtns").symlink_to(root / "a.wtns")            # stays inside: accepted
    (root / "out_link.wtns").symlink_to(outside / "other.wtns")    # leaves the folder: refused
    (root / "sub" / "up.wtns").symlink_to("../../secret/passwd")   # relative escape: refused
    (root / "dangling.wtns").symlink_to(root / "gone.wtns")
    os.mkfifo(root / "fifo.wtns")
    (root / "dir.wtns").mkdir()
    (root / "linkdir").symlink_to(outside, target_is_directory=True)  # not descended into
    (root / ".hidden.wtns").write_bytes(b"")
    (root / "proofs").mkdir()
    shutil.copy(MINI_WTNS, root / "proofs" / "old.wtns")           # inside the excluded output folder
    real_open = os.open

    def guarded_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if os.fspath(path).endswith("locked.wtns"):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded_open)
    paths, rejected = safe_witness_paths(root, exclude=[root / "proofs"])
    r = root.resolve()
    assert paths == [r / "a.wtns", r / "in_link.wtns", r / "sub" / "b.wtns"]
    why = {Path(e.path).name: e for e in rejected}
    assert set(why) == {"out_link.wtns", "up.wtns", "dangling.wtns", "fifo.wtns", "dir.wtns", "locked.wtns"}
    one_line(why["out_link.wtns"], r / "out_link.wtns", "outside the witness folder", "not followed")
    one_line(why["up.wtns"], r / "sub" / "up.wtns", str(outside.resolve() / "passwd"), "outside")
    one_line(why["dangling.wtns"], r / "dangling.wtns", "dangling symlink")
    one_line(why["fifo.wtns"], r / "fifo.wtns", "FIFO")
    one_line(why["dir.wtns"], r / "dir.wtns", "a folder")
    one_line(why["locked.wtns"], r / "locked.wtns", "cannot open for reading", "Permission denied")
    (root / "empty").mkdir()
    assert safe_witness_paths(root / "empty") == ([], [])
    with pytest.raises(FormatError, match="not a folder"):
        safe_witness_paths(root / "a.wtns")


def test_batch_refuses_a_witness_link_leaving_the_folder(tmp_path: Path) -> None:
    """discover() must turn a link leaving the witness folder, and a FIFO, into failed jobs with the reason."""
    from distprove.witness.discovery import discover
    wdir, outside = tmp_path / "w", tmp_path / "outside"
    wdir.mkdir()
    outside.mkdir()
    shutil.copy(MINI_WTNS, wdir / "ok.wtns")
    shutil.copy(MINI_WTNS, outside / "x.wtns")
    (wdir / "escape.wtns").symlink_to(outside / "x.wtns")
    os.mkfifo(wdir / "fifo.wtns")
    jobs = {j.name: j for j in discover(wdir, key=MINI_ZKEY)}
    assert set(jobs) == {"ok", "escape", "fifo"}
    assert jobs["ok"].error == ""
    assert "outside the witness folder" in jobs["escape"].error and jobs["escape"].key is None
    assert "FIFO" in jobs["fifo"].error


def test_batch_refuses_an_empty_folder_before_starting_a_cluster(tmp_path: Path) -> None:
    with pytest.raises(FormatError) as e:
        distprove.batch(tmp_path, key=MINI_ZKEY, echo=None)
    one_line(e.value, tmp_path, "no *.wtns witnesses or *.json inputs found")


# --- batches on a CPU LocalCluster ----------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    yield from local_client(2)


def _outputs(out: Path) -> set[str]:
    return {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and not p.name.startswith(".")}


def test_cli_batch_with_bad_items(client, tmp_path: Path) -> None:
    """Good witnesses prove while each bad one fails alone with one line naming it; exit status 1."""
    from distprove.cli import main

    wdir, out = tmp_path / "w", tmp_path / "out"
    wdir.mkdir()
    for i in range(3):
        shutil.copy(MINI_WTNS, wdir / f"good{i}.wtns")
    bad = {
        "empty": (BAD / "empty.wtns", ["empty file"]),
        "random": (BAD / "random_bytes.wtns", ["wrong magic"]),
        "ge_r": (BAD / "value_ge_r.wtns", ["witness value 3 is >= r"]),
        "prime": (BAD / "wrong_prime.wtns", ["prime is q"]),
        "truncated": (BAD / "truncated.wtns", ["truncated"]),
        "unsatisfied": (BAD / "unsatisfied.wtns", ["does not verify", "nothing written"]),
        "other_circuit": (MUL_WTNS[0], ["nVars"]),
    }
    for name, (src, _) in bad.items():
        shutil.copy(src, wdir / f"{name}.wtns")
    (wdir / "json.wtns").write_text(json.dumps(["1", "3278"]))
    bad["json"] = (None, ["wrong magic"])
    (wdir / "README.txt").write_text("not a witness, not looked at")
    os.mkfifo(wdir / "fifo.wtns")  # must not block a worker: refused at discovery, reported failed
    bad["fifo"] = (None, ["FIFO"])
    res = CliRunner().invoke(
        main, ["batch", str(MINI_ZKEY), str(wdir), "--out", str(out), "--scheduler", client.scheduler.address,
               "--backend", "cpu", "--report", str(tmp_path / "report.json")],
    )
    assert res.exit_code == 1, res.output
    assert f"proved 3, failed {len(bad)}, skipped 0" in res.output
    report = json.loads((tmp_path / "report.json").read_text())
    reasons = {r["name"]: r["reason"] for r in report["results"] if r["status"] == "failed"}
    assert set(reasons) == set(bad)
    for name, (_, words) in bad.items():
        line = reasons[name]
        assert "\n" not in line and res.output.count(f"FAILED {name}: {line}") == 1 and res.output.count(line) == 1
        assert name == "unsatisfied" or line.startswith(str(wdir / f"{name}.wtns") + ": "), line
        for w in words:
            assert w in line, (w, line)
    assert _outputs(out) == {f"good{i}.{k}.json" for i in range(3) for k in ("proof", "public")}
    items = [(MINI_VK, out / f"good{i}.public.json", out / f"good{i}.proof.json") for i in range(3)]
    assert distprove.verify_many(items) == [True] * 3


def test_unsatisfied_witness_is_written_only_when_the_check_is_off(client, tmp_path: Path) -> None:
    """The pairing check before writing is on by default (distprove.verify); turned off, the
    unsatisfied witness's proof is written and does not verify, so the check is what stops it."""
    wdir = tmp_path / "w"
    wdir.mkdir()
    shutil.copy(BAD / "unsatisfied.wtns", wdir / "u.wtns")
    shutil.copy(MINI_WTNS, wdir / "ok.wtns")
    assert dask.config.get("distprove.verify") is True
    on = distprove.batch(wdir, key=MINI_ZKEY, out_dir=tmp_path / "on", client=client, backend="cpu", echo=None)
    assert [r.name for r in on.failed] == ["u"] and [r.name for r in on.proved] == ["ok"]
    assert _outputs(tmp_path / "on") == {"ok.proof.json", "ok.public.json"}
    with dask.config.set({"distprove.verify": False}):
        off = distprove.batch(wdir, key=MINI_ZKEY, out_dir=tmp_path / "off", client=client, backend="cpu", echo=None)
    assert sorted(r.name for r in off.proved) == ["ok", "u"]
    off_dir = tmp_path / "off"
    assert distprove.verify(MINI_VK, off_dir / "u.public.json", off_dir / "u.proof.json") is False
    assert distprove.verify(MINI_VK, off_dir / "ok.public.json", off_dir / "ok.proof.json") is True


def test_cli_prove_refuses_an_unsatisfied_witness(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "distprove.cli", "prove", str(MINI_ZKEY), str(BAD / "unsatisfied.wtns"),
                          "--out", str(tmp_path), "--backend", "cpu"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and "does not verify" in res.stderr and res.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_client_lost_then_rerun_resumes(client, tmp_path: Path) -> None:
    """``distprove batch`` (its own local cluster) is killed with its whole process group once a few
    proofs are on disk; the rerun skips exactly those (they verify) and proves the rest. Enough
    witnesses that the batch is still running when the first proofs appear (a task's proofs are
    written in groups, and the worker's next task proves while they are written)."""
    wdir, out = tmp_path / "w", tmp_path / "out"
    wdir.mkdir()
    n = 64
    for i in range(n):
        os.link(MINI_WTNS, wdir / f"w{i:02d}.wtns")
    proc = subprocess.Popen(
        [sys.executable, "-m", "distprove.cli", "batch", str(MINI_ZKEY), str(wdir), "--out", str(out),
         "--backend", "cpu", "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while len(list(out.glob("*.proof.json")) if out.exists() else []) < 2:
            assert proc.poll() is None, "the batch ended before it could be killed"
            assert time.monotonic() < deadline, "no proof appeared in time"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the client, its scheduler and its workers at once
        proc.wait(timeout=60)
    written = {p.name.removesuffix(".proof.json") for p in out.glob("*.proof.json")}
    assert 2 <= len(written) < n
    for name in written:  # a proof file is never partial and always has its public file
        json.loads((out / f"{name}.proof.json").read_text())
        assert json.loads((out / f"{name}.public.json").read_text()) == ["3278", "11"]
    again = distprove.batch(wdir, key=MINI_ZKEY, out_dir=out, client=client, backend="cpu", echo=None)
    assert {r.name for r in again.skipped} == written
    assert {r.name for r in again.proved} == {f"w{i:02d}" for i in range(n)} - written
    assert not again.failed
    items = [(MINI_VK, out / f"w{i:02d}.public.json", out / f"w{i:02d}.proof.json") for i in range(n)]
    assert distprove.verify_many(items) == [True] * n


# --- full disk ------------------------------------------------------------------------------------


def _no_space(*args: Any, **kwargs: Any) -> Any:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_full_disk_leaves_no_partial_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC while the bytes are flushed: neither the atomic JSON writer nor the batch's write-once
    leaves a partial proof, a temporary file, or a proof without its public file."""
    from distprove.cluster.output import write_once

    old = tmp_path / "old.json"
    write_json_atomic(old, {"keep": 1})
    monkeypatch.setattr(os, "fsync", _no_space)
    with pytest.raises(OSError) as e:
        write_json_atomic(tmp_path / "new.json", {"pi_a": ["1"] * 1000})
    assert e.value.errno == errno.ENOSPC
    with pytest.raises(OSError):
        write_json_atomic(old, {"keep": 2})
    with pytest.raises(OSError):
        write_once({"p": 1}, ["3278", "11"], str(tmp_path / "a.proof.json"), str(tmp_path / "a.public.json"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]
    assert json.loads(old.read_text()) == {"keep": 1}


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    return res.returncode == 0


def test_batch_onto_a_full_disk(client, tmp_path: Path) -> None:
    """Outputs on a real 24 KiB tmpfs: some proofs fit, the rest fail with ENOSPC; no partial proof
    or temporary file exists, every proof on disk verifies and every witness reported proved has
    one. Needs root and mount (skipped otherwise; the monkeypatched tests always run)."""
    out = tmp_path / "small"
    if not _mount_tmpfs(out, "24k"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        wdir = tmp_path / "w"
        wdir.mkdir()
        for i in range(8):
            os.link(MINI_WTNS, wdir / f"w{i}.wtns")
        report = distprove.batch(wdir, key=MINI_ZKEY, out_dir=out, client=client, backend="cpu", verify_group=1, echo=None)
        on_disk = {p.name.removesuffix(".proof.json") for p in out.glob("*.proof.json")}
        assert {r.name for r in report.proved} <= on_disk  # == once a failed write fails alone (next test)
        assert report.failed and all("No space left on device" in r.reason and "\n" not in r.reason for r in report.failed)
        assert not any(p.name.startswith(".") for p in out.iterdir())  # no temporary file left behind
        for name in on_disk:
            assert distprove.verify(MINI_VK, out / f"{name}.public.json", out / f"{name}.proof.json")
    finally:
        subprocess.run(["umount", str(out)], check=False)


def test_a_failed_write_fails_only_its_own_proof(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two proofs checked and written by one verify-write call; the disk fills before the second:
    the first is reported proved (its files exist), the second failed with a one-line reason."""
    from distprove.cluster import output
    from distprove.formats import atomic
    from distprove.cluster.tasks import Assembled, ProofSpec
    from distprove.prover import prove

    proof = prove(MINI_ZKEY, MINI_WTNS, backend="cpu")
    specs = [ProofSpec(n, str(MINI_WTNS), str(MINI_ZKEY), "h", str(tmp_path / f"{n}.proof.json"),
                              str(tmp_path / f"{n}.public.json")) for n in ("first", "second")]
    items = [Assembled(sp, proof, {}) for sp in specs]
    real = atomic._write_temp

    def fills_up(target: atomic.Target, fsync: bool) -> str:
        if "second.proof" in target.path:
            _no_space()
        return real(target, fsync)

    monkeypatch.setattr(atomic, "_write_temp", fills_up)
    outcomes = {o.name: o for o in output.check_and_write(items, {"h": None}, False, "here")}
    assert outcomes["first"].status == "proved" and (tmp_path / "first.proof.json").exists()
    assert outcomes["second"].status == "failed" and not (tmp_path / "second.proof.json").exists()
    assert "No space left on device" in outcomes["second"].reason and "\n" not in outcomes["second"].reason
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first.proof.json", "first.public.json"]  # no temporary file


# --- GPU out-of-memory retry (host-side logic, fake CuPy) ------------------------------------------


class _FakeOOM(Exception):
    pass


class _FakePool:
    def __init__(self) -> None:
        self.frees = 0

    def free_all_blocks(self) -> None:
        self.frees += 1


class _FakeCupy:
    def __init__(self) -> None:
        self.pool = _FakePool()
        self.cuda = type("cuda", (), {"memory": type("memory", (), {"OutOfMemoryError": _FakeOOM})})

    def get_default_memory_pool(self) -> _FakePool:
        return self.pool


def test_gpu_oom_retry_frees_then_evicts_lru_keys() -> None:
    """GpuBackend._retry_oom on a fake CuPy: first the pool's cached blocks are freed, then least
    recently used keys other than the one in use are evicted one at a time; with nothing left to
    evict the OOM propagates. (The real allocator is exercised by tests/gpu on a device.)"""
    from distprove.backends.gpu.backend import GpuBackend

    be = object.__new__(GpuBackend)
    be.cp = _FakeCupy()
    be._states = OrderedDict((h, {"a": h}) for h in ("old", "mid", "inuse"))
    be._lanes, be._plans = {}, {}  # no MSM streams started, no memory plans
    tables = []
    be.engine = SimpleNamespace(clear=lambda: tables.append("cleared"))  # the NTT tables
    calls = []

    def needs_room(room: int) -> Callable[[], str]:
        def fn() -> str:
            calls.append(list(be._states))
            if len(be._states) > room:
                raise _FakeOOM("out of memory")
            return "ok"
        return fn

    assert be._retry_oom("inuse", needs_room(1)) == "ok"
    assert calls == [["old", "mid", "inuse"], ["old", "mid", "inuse"], ["mid", "inuse"], ["inuse"]]
    assert list(be._states) == ["inuse"] and be.cp.pool.frees >= 3 and tables == ["cleared"]
    with pytest.raises(_FakeOOM):
        be._retry_oom("inuse", needs_room(0))
    assert list(be._states) == ["inuse"]


# --- soak -----------------------------------------------------------------------------------------


def _soak_module() -> Any:
    return load_script(REPO / "pipelines" / "soak.py")


SOAK_TOLERANCE = 48 << 20
"""Allowed RSS growth per process from the first to the last sample of the short soak (50 proofs).
The 1,000-proof run grows by a few MiB per 100 proofs in the client (Dask's bounded logs filling) and
less in the workers; see docs/RELIABILITY.md."""


def test_soak_memory_is_flat(client, tmp_path: Path) -> None:
    soak = _soak_module()
    report = soak.run_soak(50, 10, 2, tmp_path, client=client)
    assert report["failed"] == [] and report["rounds"] == 5 and report["proofs"] == 50
    g = report["growth"]
    assert g["workers_restarted"] == 0
    assert g["client_rss"] < SOAK_TOLERANCE, g
    assert g["worker_rss_max"] < SOAK_TOLERANCE, g
    assert all(s["client"]["rss"] > 0 for s in report["samples"])


# --- security -------------------------------------------------------------------------------------


def test_blinding_comes_from_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    import secrets

    from distprove.prover import prove
    from distprove.stages import assemble

    draws = iter([123456789, 987654321])
    seen: list[int] = []

    def fake(n: int) -> int:
        assert n == R
        v = next(draws)
        seen.append(v)
        return v

    monkeypatch.setattr(secrets, "randbelow", fake)
    a = prove(MINI_ZKEY, MINI_WTNS, backend="cpu")
    assert seen == [123456789, 987654321]
    monkeypatch.undo()
    b = prove(MINI_ZKEY, MINI_WTNS, backend="cpu", blinding=(123456789, 987654321))
    assert (a.pi_a, a.pi_b, a.pi_c) == (b.pi_a, b.pi_b, b.pi_c)
    values = [v for _ in range(1000) for v in assemble.random_blinding()]
    assert len(set(values)) == 2000 and all(0 <= v < R for v in values)
    assert max(values).bit_length() > 240  # uniform in [0, r): tiny values would mean a broken source


def test_two_proofs_of_one_witness_differ_and_both_verify() -> None:
    from distprove.prover import prove

    p, q = prove(MINI_ZKEY, MINI_WTNS, backend="cpu"), prove(MINI_ZKEY, MINI_WTNS, backend="cpu")
    assert p.pi_a != q.pi_a and p.pi_b != q.pi_b and p.pi_c != q.pi_c
    vk = json.loads(MINI_VK.read_text())
    assert distprove.verify_many([(vk, x.public_json(), x.to_json()) for x in (p, q)]) == [True, True]


def _renderings(v: int) -> set[str]:
    return {str(v), f"{v:x}", f"{v:X}", f"{v:064x}", v.to_bytes(32, "little").hex(), v.to_bytes(32, "big").hex()}


SECRET_MIN = 1 << 64
"""Values below this are not searched for in the logs: small numbers (0, 1, counts, the mini
circuit's 3278 or 11) occur in any log by chance (timestamps, ports, sizes) and carry no secret.
mul_chain_1k's witness has 1022 of its 1023 values above it."""


def test_no_witness_or_scalar_in_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """prove() and a batch on an in-process cluster (workers share this process's logging), with
    every logger at DEBUG: no rendering of a witness value, H scalar or blinding factor appears in
    the captured records, stdout/stderr, or the workers' and scheduler's log buffers."""
    import secrets

    from distributed import Client, LocalCluster

    from distprove.backends.cpu import CpuBackend
    from distprove.keystore import open_key
    from distprove.prover import load_witness, prove

    drawn: list[int] = []
    real = secrets.randbelow

    def recording(n: int) -> int:
        v = real(n)
        drawn.append(v)
        return v

    monkeypatch.setattr(secrets, "randbelow", recording)
    key = open_key(MUL_ZKEY)
    values, _ = load_witness(MUL_WTNS[0], key)
    be = CpuBackend()
    hs = bn254.ints_from_limbs(be.h_scalars(key, be.gather(key, values)))
    secret = {v for v in bn254.ints_from_limbs(values) + hs if v >= SECRET_MIN}
    assert len(secret) > 1000
    caplog.set_level(logging.DEBUG)
    root = logging.getLogger()
    levels = {name: lg.level for name, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    for name in list(levels):
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        prove(key, MUL_WTNS[0], backend="cpu")
        wdir = tmp_path / "w"
        wdir.mkdir()
        shutil.copy(MUL_WTNS[0], wdir / "x.wtns")
        shutil.copy(MUL_WTNS[0], wdir / "y.wtns")
        with dask.config.set({"distributed.admin.log-length": 100000}):
            with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
                with Client(cluster) as c:
                    report = distprove.batch(wdir, key=MUL_ZKEY, out_dir=tmp_path / "out", client=c, backend="cpu")
                    worker_logs = c.get_worker_logs()
                    scheduler_logs = c.get_scheduler_logs()
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        root.setLevel(logging.WARNING)
    assert len(report.proved) == 2 and len(drawn) >= 6
    secret |= {v for v in drawn if v >= SECRET_MIN}
    out, err = capfd.readouterr()
    texts = [out, err, caplog.text]
    texts += [msg for logs in worker_logs.values() for _, msg in logs]
    texts += [msg for _, msg in scheduler_logs]
    blob = "\n".join(texts)
    assert "DEBUG" in caplog.text or caplog.records  # logging really was on
    needles = {r for v in secret for r in _renderings(v)}
    leaked = [n for n in needles if n in blob]
    assert leaked == []


def test_local_cluster_binds_to_localhost() -> None:
    from distributed import Client

    from distprove.cluster.client import DEFAULT_DASHBOARD, DEFAULT_HOST, local_cluster

    assert DEFAULT_HOST == "127.0.0.1" and DEFAULT_DASHBOARD.startswith("127.0.0.1:")
    with local_cluster("cpu", n_workers=1, dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as c:
        c.wait_for_workers(1)
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        assert all(a.startswith("tcp://127.0.0.1:") for a in c.scheduler_info()["workers"])
        assert c.dashboard_link.startswith("http://127.0.0.1:")
