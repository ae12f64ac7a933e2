"""The zarr key store: import, lazy chunk-range reads, checksums, the exported vk."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from distprove import bn254
from distprove.errors import FormatError
from distprove.formats.zkey import read_zkey
from distprove.keystore import KeyStore, file_sha256, import_key, open_key

DATA = Path(__file__).parent / "data"
MINI = DATA / "mini" / "mini_0001.zkey"
CHAIN = DATA / "mul_chain_1k" / "circuit_final.zkey"


@pytest.fixture(scope="module")
def chain_store(tmp_path_factory: pytest.TempPathFactory) -> KeyStore:
    # Small chunks so the arrays span many chunks.
    return import_key(CHAIN, tmp_path_factory.mktemp("ks") / "chain.zarr", chunk_bytes=4096)


def test_arrays_are_the_zkey_bytes(chain_store: KeyStore) -> None:
    z = read_zkey(CHAIN)
    for name in ("a", "b1", "b2", "c", "h", "ic"):
        stored = chain_store.__getattr__(name)
        assert stored.dtype == np.uint32
        assert np.array_equal(stored[:], np.asarray(getattr(z, name))), name
    assert chain_store.a.chunks[0] == 4096 // 64
    assert chain_store.b2.chunks[0] == 4096 // 128


def test_csr_holds_every_coefficient(chain_store: KeyStore) -> None:
    z = read_zkey(CHAIN)
    for m, which in (("a", 0), ("b", 1)):
        row_ptr = chain_store.__getattr__(f"{m}_row_ptr")[:]
        signal = chain_store.__getattr__(f"{m}_signal")[:]
        value = chain_store.__getattr__(f"{m}_value")[:]
        assert row_ptr.shape == (z.domain_size + 1,)
        assert row_ptr[0] == 0 and np.all(np.diff(row_ptr.astype(np.int64)) >= 0)
        sel = z.coef_matrix == which
        assert row_ptr[-1] == sel.sum() == signal.shape[0] == value.shape[0]
        # Every (row, signal, value) record of the zkey appears in its row, in record order.
        rows = np.repeat(np.arange(z.domain_size), np.diff(row_ptr.astype(np.int64)))
        order = np.argsort(z.coef_row[sel], kind="stable")
        assert np.array_equal(rows, z.coef_row[sel][order])
        assert np.array_equal(signal, z.coef_signal[sel][order])
        assert np.array_equal(value, z.coef_value[sel][order])


def test_attributes(chain_store: KeyStore) -> None:
    z = read_zkey(CHAIN)
    assert (chain_store.n_vars, chain_store.n_public, chain_store.domain_size) == (z.n_vars, z.n_public, z.domain_size)
    assert chain_store.content_hash == file_sha256(CHAIN)
    assert chain_store.attrs["source"]["file"] == CHAIN.name
    assert chain_store.points["alpha1"] == bn254.points_from_limbs(bn254.G1, z.alpha1)[0]
    assert chain_store.points["delta2"] == bn254.points_from_limbs(bn254.G2, z.delta2)[0]


def test_exported_vk_equals_snarkjs(chain_store: KeyStore) -> None:
    expected = json.loads((DATA / "mul_chain_1k" / "verification_key.json").read_text())
    assert chain_store.vk_json() == expected
    assert open_key(CHAIN).vk_json() == expected


def test_chunk_range_reads_only_its_chunks(tmp_path: Path, chain_store: KeyStore) -> None:
    store = tmp_path / "copy.zarr"
    shutil.copytree(chain_store.path, store)
    chunk = chain_store.a.chunks[0]
    chunk_dir = store / "a" / "c"
    files = sorted(chunk_dir.iterdir(), key=lambda p: int(p.name))
    assert len(files) > 4
    # Remove every chunk but the third: reading inside it must not touch the others.
    for f in files:
        if f.name != "2":
            shutil.rmtree(f) if f.is_dir() else f.unlink()
    ks = KeyStore(store)
    part = ks.a[2 * chunk : 3 * chunk]
    assert np.array_equal(part, chain_store.a[2 * chunk : 3 * chunk])


def test_checksum_catches_corruption(tmp_path: Path, chain_store: KeyStore) -> None:
    store = tmp_path / "corrupt.zarr"
    shutil.copytree(chain_store.path, store)
    victim = next((store / "b1" / "c").iterdir())
    while victim.is_dir():
        victim = next(victim.iterdir())
    data = bytearray(victim.read_bytes())
    data[5] ^= 0x40
    victim.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="b1"):
        KeyStore(store).b1[:]


def test_refuses_to_overwrite_and_non_stores(tmp_path: Path) -> None:
    out = tmp_path / "k.zarr"
    import_key(MINI, out)
    with pytest.raises(FormatError, match="already exists"):
        import_key(MINI, out)
    import_key(MINI, out, overwrite=True)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FormatError, match="not a distprove key store"):
        open_key(tmp_path / "empty")
    with pytest.raises(FormatError, match="no such"):
        open_key(tmp_path / "missing.zarr")


def test_import_of_a_bad_point_names_it_and_leaves_no_store(tmp_path: Path) -> None:
    """Every point is checked on import: one flipped bit in B2 fails with its index, no store."""
    z = read_zkey(CHAIN)
    raw = bytearray(CHAIN.read_bytes())
    at = bytes(raw).index(z.b2[3].tobytes())  # row 3 of B2, found by its bytes
    raw[at + 5] ^= 0x10
    bad = tmp_path / "bad.zkey"
    bad.write_bytes(bytes(raw))
    out = tmp_path / "bad.zarr"
    with pytest.raises(FormatError, match=r"bad\.zkey: B2 point 3 (is not on the curve|has a coordinate >= q)$"):
        import_key(bad, out, device="cpu")
    assert not out.exists() and not list(tmp_path.glob(".bad.zarr.tmp-*"))


def test_import_of_a_bad_coefficient_names_it_and_keeps_the_old_store(tmp_path: Path) -> None:
    """The record checks run beside the chunk writes: a record of matrix 2 fails the import with
    one line naming the file, and a store already under the name (overwrite=True) is left whole."""
    from distprove.formats.container import open_container

    s4 = open_container(CHAIN, "zkey", 2).sections[4]
    raw = bytearray(CHAIN.read_bytes())
    raw[s4.offset + 4 + 44 * 7] = 2  # record 7's matrix field
    bad = tmp_path / "bad.zkey"
    bad.write_bytes(bytes(raw))
    out = tmp_path / "k.zarr"
    import_key(MINI, out, device="cpu")
    with pytest.raises(FormatError, match=r"bad\.zkey: coefficient 7 has matrix 2 \(expected 0 = A or 1 = B\)$"):
        import_key(bad, out, overwrite=True, device="cpu")
    assert not list(tmp_path.glob(".k.zarr.tmp-*"))
    assert KeyStore(out).n_vars == 6


def test_a_store_made_meanwhile_is_not_replaced_without_overwrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The final name is checked again at commit: a store that appeared while the import ran
    (here: made during the point checks) stays, the import fails and leaves no temporary."""
    from distprove import keystore

    out = tmp_path / "k.zarr"
    check = keystore.ZkeyKey.check_points

    def check_then_race(self: keystore.ZkeyKey) -> None:
        check(self)
        out.mkdir()
        (out / "mine").write_text("kept")

    monkeypatch.setattr(keystore.ZkeyKey, "check_points", check_then_race)
    with pytest.raises(FormatError, match="already exists"):
        import_key(MINI, out, device="cpu")
    assert (out / "mine").read_text() == "kept" and not list(tmp_path.glob(".k.zarr.tmp-*"))


def test_a_failed_chunk_write_leaves_no_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk write failing (here ENOSPC on the first B2 chunk) fails the import with that error;
    the other writes already queued are cancelled or finished and the temporary directory goes."""
    import errno

    from distprove import keystore

    write = keystore._write_chunk

    def failing(stage: str, path: Path, block: np.ndarray, nbytes: int) -> None:
        if stage == "write b2":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        write(stage, path, block, nbytes)

    monkeypatch.setattr(keystore, "_write_chunk", failing)
    out = tmp_path / "k.zarr"
    with pytest.raises(OSError, match="No space left"):
        import_key(CHAIN, out, chunk_bytes=4096, device="cpu")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_import_reads_its_written_arrays_back_before_the_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The import checks the arrays it wrote (shapes, row pointers) under the temporary name, so a
    chunk written wrong (here a row-pointer chunk reversed, its CRC32C matching) fails the import
    and no store appears; the reopen after the rename then leaves those checks out."""
    from distprove import keystore

    write = keystore._write_chunk

    def reversing(stage: str, path: Path, block: np.ndarray, nbytes: int) -> None:
        write(stage, path, block[::-1].copy() if stage == "write a_row_ptr" else block, nbytes)

    monkeypatch.setattr(keystore, "_write_chunk", reversing)
    out = tmp_path / "k.zarr"
    with pytest.raises(FormatError, match=r"a_row_ptr.*row_ptr\[0\]"):
        import_key(CHAIN, out, chunk_bytes=1 << 20, device="cpu")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_overwrite_keeps_the_old_store_until_the_new_one_takes_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With overwrite, an import that fails after every check passed (a chunk write, ENOSPC)
    leaves the old store whole; one that succeeds replaces it and leaves nothing beside it."""
    import errno

    from distprove import keystore

    out = tmp_path / "k.zarr"
    import_key(MINI, out, device="cpu")
    write = keystore._write_chunk

    def failing(stage: str, path: Path, block: np.ndarray, nbytes: int) -> None:
        if stage == "write b_value":  # the last array queued: every check has passed by then
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        write(stage, path, block, nbytes)

    with monkeypatch.context() as m:
        m.setattr(keystore, "_write_chunk", failing)
        with pytest.raises(OSError, match="No space left"):
            import_key(CHAIN, out, chunk_bytes=4096, device="cpu", overwrite=True)
    assert KeyStore(out).n_vars == 6 and sorted(p.name for p in tmp_path.iterdir()) == ["k.zarr"]
    store = import_key(CHAIN, out, chunk_bytes=4096, device="cpu", overwrite=True)
    assert store.n_vars != 6 and sorted(p.name for p in tmp_path.iterdir()) == ["k.zarr"]


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread niceness is Linux's")
def test_chunk_writers_are_nicer_than_the_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer threads run WRITER_NICENESS nicer than the thread that imports (and the hash's),
    so with every core busy the hash, the import's floor, keeps its core."""
    import os
    import threading

    from distprove import keystore

    write, seen = keystore._write_chunk, set()

    def noted(stage: str, path: Path, block: np.ndarray, nbytes: int) -> None:
        seen.add(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        write(stage, path, block, nbytes)

    monkeypatch.setattr(keystore, "_write_chunk", noted)
    import_key(CHAIN, tmp_path / "k.zarr", chunk_bytes=4096, device="cpu")
    here = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert seen == {min(19, here + keystore.WRITER_NICENESS)}


def test_imported_chunk_files_are_the_reference_bytes(tmp_path: Path) -> None:
    """Every chunk file (path under the store and bytes: data, edge padding, CRC32C) of the chain
    key imported in 4096-byte chunks, against the digest of a store written through zarr's own
    chunk key encoding: the hand-written chunk files are what zarr would write."""
    import hashlib

    root = import_key(CHAIN, tmp_path / "k.zarr", chunk_bytes=4096, device="cpu").path
    h = hashlib.sha256()
    for p in sorted(Path(root).rglob("*")):
        if p.is_file() and p.name != "zarr.json":
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    assert h.hexdigest() == "a0a8a3abbee604d644ad7bd1a35c4832a4c8c48d8f36f1ef8e62a4f61d666eb9"


def test_import_logs_its_timeline_at_debug(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """With DEBUG on, every stage of an import is one record carrying its span, all inside the
    import's own span; the hash, checks, CSR builds and writes are among them."""
    import logging

    import_key(MINI, tmp_path / "k.zarr", device="cpu")
    with caplog.at_level(logging.DEBUG, logger="distprove.keystore"):
        import_key(CHAIN, tmp_path / "k.zarr", chunk_bytes=4096, device="cpu", overwrite=True)
    spans = [r.span for r in caplog.records if hasattr(r, "span")]
    names = {name for name, _, _ in spans}
    expected = {"import", "hash", "open", "check coefficients", "csr a", "csr b", "metadata", "remove old",
                "wait writes", "wait attributes", "attributes", "rename", "reopen"}
    expected |= {f"validate {n}" for n in ("IC", "A", "B1", "B2", "C", "H")}
    expected |= {f"write {n}" for n in ("a", "b1", "b2", "c", "h", "ic", "a_row_ptr", "b_value")}
    assert expected <= names
    (_, t0, t1), = [s for s in spans if s[0] == "import"]
    assert all(t0 <= a <= b <= t1 for name, a, b in spans if name != "hash")
    (_, h0, _), = [s for s in spans if s[0] == "hash"]
    assert t0 <= h0 <= t1


def test_gpu_validation_without_a_gpu_is_one_line(tmp_path: Path) -> None:
    from distprove.backends.gpu import available
    from distprove.errors import BackendUnavailable

    if available():
        pytest.skip("a GPU is present")
    with pytest.raises(BackendUnavailable, match="backend 'gpu' requested"):
        import_key(MINI, tmp_path / "k.zarr", device="gpu")
    assert import_key(MINI, tmp_path / "k.zarr", device="auto").n_vars == 6


def test_chunks_with_a_padded_edge_read_back_through_zarr(tmp_path: Path) -> None:
    # 3000-byte chunks divide no array evenly: every array ends in a zero-padded edge chunk whose
    # CRC32C covers the padding, as zarr's own writer stores it; zarr reads it all back and the
    # full validation (every chunk present and checksummed) passes.
    import zarr

    store = import_key(CHAIN, tmp_path / "odd.zarr", chunk_bytes=3000, device="cpu")
    z = read_zkey(CHAIN)
    group = zarr.open_group(str(store.path), mode="r")
    for name in ("a", "b1", "b2", "c", "h", "ic"):
        arr = group[name]
        assert arr.nchunks_initialized == arr.nchunks, name
        assert np.array_equal(arr[:], np.asarray(getattr(z, name))), name
    assert any(group[n].shape[0] % group[n].chunks[0] for n in ("a", "b2", "h", "a_signal", "b_value"))
    store.validate()
    assert store.attrs["source"]["sha256"] == file_sha256(CHAIN)
