"""Group writes of checked proofs (formats.atomic.write_group, cluster.output.write_proofs): each proof
file appears exactly once and whole, one proof's failure fails it alone, nothing temporary stays."""

from __future__ import annotations

import errno
import json
import os
import random
from pathlib import Path

import pytest

from distprove import bn254
from distprove.cluster import output
from distprove.cluster.tasks import Assembled, ProofSpec, Status
from distprove.formats import atomic
from distprove.formats.jsonio import json_bytes, proof_json_bytes, proof_to_json, public_json_bytes, public_to_json
from distprove.prover import Proof


def _proof(rng: random.Random, n_public: int = 2) -> Proof:
    def q() -> int:
        return rng.randrange(bn254.Q)

    return Proof((q(), q()), ((q(), q()), (q(), q())), (q(), q()), [rng.randrange(bn254.R) for _ in range(n_public)])


def _files(out: Path, n: int, seed: int = 0) -> list[tuple[bytes, bytes, str, str]]:
    rng = random.Random(seed)
    files = []
    for i in range(n):
        p = _proof(rng)
        files.append((proof_json_bytes(*p.points), public_json_bytes(p.public), str(out / f"w{i}.proof.json"), str(out / f"w{i}.public.json")))
    return files


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _outputs(n: int, but: tuple[int, ...] = ()) -> list[str]:
    return sorted(f"w{i}.{kind}.json" for i in range(n) if i not in but for kind in ("proof", "public"))


def test_proof_and_public_bytes_are_the_json_writers_bytes() -> None:
    rng = random.Random(1)
    for _ in range(20):
        p = _proof(rng, rng.randrange(4))
        assert proof_json_bytes(*p.points) == json.dumps(proof_to_json(*p.points), indent=1).encode() == json_bytes(p.to_json())
        assert public_json_bytes(p.public) == json.dumps(public_to_json(p.public), indent=1).encode()
    assert proof_json_bytes(None, None, None) == json_bytes(proof_to_json(None, None, None))  # points at infinity
    assert public_json_bytes([]) == b"[]"
    with pytest.raises(ValueError, match="not in"):
        public_json_bytes([bn254.R])


def test_a_group_is_written_whole_with_nothing_temporary_left(tmp_path: Path) -> None:
    files = _files(tmp_path / "new" / "folder", 6)
    assert output.write_proofs(files) == [True] * 6
    out = tmp_path / "new" / "folder"
    assert _names(out) == _outputs(6)
    for proof, public, proof_path, public_path in files:
        assert Path(proof_path).read_bytes() == proof and Path(public_path).read_bytes() == public
        assert os.stat(proof_path).st_mode & 0o777 == 0o644


def test_proofs_written_before_are_reported_and_left_byte_identical(tmp_path: Path) -> None:
    files = _files(tmp_path, 6)
    earlier = _files(tmp_path, 6, seed=9)  # another attempt's proofs of w1 and w4 (other blindings)
    assert output.write_proofs([earlier[1], earlier[4]]) == [True, True]
    before = {i: (os.stat(files[i][2]), Path(files[i][2]).read_bytes(), Path(files[i][3]).read_bytes()) for i in (1, 4)}
    assert output.write_proofs(files) == [True, False, True, True, False, True]
    for i, (st, proof, public) in before.items():
        now = os.stat(files[i][2])
        assert (now.st_ino, now.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
        assert Path(files[i][2]).read_bytes() == proof == earlier[i][0] and Path(files[i][3]).read_bytes() == public
    assert _names(tmp_path) == _outputs(6)


def test_an_attempt_that_links_first_wins_and_is_not_overwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another attempt's proof file appears after this group's check for it, before the link."""
    files = _files(tmp_path, 4)
    real = atomic._write_temp

    def races(target: atomic.Target, fsync: bool) -> str:
        if target.path == files[2][2]:
            Path(target.path).write_bytes(b"the other attempt's proof")
        return real(target, fsync)

    monkeypatch.setattr(atomic, "_write_temp", races)
    assert output.write_proofs(files) == [True, True, False, True]
    assert Path(files[2][2]).read_bytes() == b"the other attempt's proof"
    assert Path(files[2][3]).read_bytes() == files[2][1]  # its public file was replaced whole (the same signals)
    assert _names(tmp_path) == _outputs(4)


def test_an_unwritable_target_fails_its_proof_alone(tmp_path: Path) -> None:
    """w1's folder is a file (cannot be created) and w3's public path is a folder (the move fails):
    those two fail, each with one line, nothing of theirs is written; the others are."""
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "blocked").write_text("a file where a folder should be")
    (out / "w3.public.json").mkdir()
    rng = random.Random(3)
    items = []
    for i in range(5):
        folder = tmp_path / "blocked" if i == 1 else out
        spec = ProofSpec(f"w{i}", "", "k.zarr", "h", str(folder / f"w{i}.proof.json"), str(folder / f"w{i}.public.json"))
        items.append(Assembled(spec, _proof(rng), {}))
    outcomes = output.check_and_write(items, {}, False, "here")
    assert [o.status for o in outcomes] == [Status.PROVED, Status.FAILED, Status.PROVED, Status.FAILED, Status.PROVED]
    for o in (outcomes[1], outcomes[3]):
        assert "cannot write" in o.reason and "\n" not in o.reason and o.reason.startswith(str(tmp_path))
    assert all("write" in o.seconds for o in outcomes if o.status == Status.PROVED)
    assert _names(out) == sorted(_outputs(5, but=(1, 3)) + ["w3.public.json"])
    assert not any((out / "w3.public.json").iterdir())


def test_a_failed_sync_is_traced_to_its_own_proof(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The filesystem's syncfs reports a write error: each file is then fsynced, and only the proof
    whose file fails (ENOSPC on w2's proof) fails; nothing temporary is left."""
    files = _files(tmp_path, 4)
    monkeypatch.setattr(atomic, "_syncfs", lambda: lambda fd: -1)
    synced: list[str] = []

    def fsync_path(path: str) -> None:
        synced.append(path)
        if os.path.basename(path).startswith(".w2.proof.json."):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic, "fsync_path", fsync_path)
    results = output.write_proofs(files)
    assert results[:2] == [True, True] and results[3] is True
    assert isinstance(results[2], OSError) and results[2].errno == errno.ENOSPC
    assert len(synced) == 8
    assert _names(tmp_path) == _outputs(4, but=(2,))


def test_a_group_is_made_durable_by_one_syncfs_not_an_fsync_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _files(tmp_path, 4)
    calls: list[int] = []
    monkeypatch.setattr(atomic, "_syncfs", lambda: lambda fd: calls.append(fd) or 0)
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(fd) or real_fsync(fd))
    assert output.write_proofs(files) == [True] * 4
    assert len(calls) == 1 and len(fsyncs) == 2  # one syncfs; one fsync per folder per round (publics, proofs)
    # Without syncfs (another OS, or a kernel that does not report its errors), an fsync a file.
    monkeypatch.setattr(atomic, "_syncfs", lambda: None)
    fsyncs.clear()
    assert output.write_proofs(_files(tmp_path / "b", 4)) == [True] * 4
    assert len(fsyncs) == 8 + 2


def test_a_content_function_that_raises_leaves_nothing(tmp_path: Path) -> None:
    def broken(f: object) -> None:
        raise ValueError("not JSON")

    entries = [[atomic.Target(str(tmp_path / "a.json"), b"[]")], [atomic.Target(str(tmp_path / "b.json"), broken)]]
    with pytest.raises(ValueError, match="not JSON"):
        atomic.write_group(entries)
    assert _names(tmp_path) == []
