"""GPU point validation (kernels/validate.cu) against the CPU check on fresh random rows with
planted bad points: the first bad index and its reason agree, chunk edges included."""

from __future__ import annotations

import random

import numpy as np
import pytest

from distprove import bn254
from distprove.formats import pointcheck

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")


def _rows(g: bn254.Group, n: int, rng: random.Random) -> np.ndarray:
    p = bn254.mul(g, g.generator, rng.randrange(1, bn254.R))
    pts = []
    for i in range(64):
        pts.append(None if i % 9 == 4 else p)
        p = bn254.add(g, p, g.generator)
    base = bn254.points_to_limbs(g, pts)
    return np.ascontiguousarray(np.tile(base, (n // 64 + 1, 1))[:n], dtype=np.uint32)


@pytest.mark.parametrize("group", [bn254.G1, bn254.G2], ids=["G1", "G2"])
def test_gpu_matches_cpu(group: bn254.Group) -> None:
    from distprove.backends.gpu.validate import first_bad_point

    rng = random.Random()
    rows = _rows(group, 100_000, rng)
    assert first_bad_point(rows, group) is None
    chunk_bytes = 4096 * 4 * group.limbs  # 4096 rows a launch: several launches
    for where in (0, 4095, 4096, rng.randrange(100_000), 99_999):
        bad = rows.copy()
        if rng.random() < 0.5:
            bad[where, rng.randrange(group.limbs)] ^= np.uint32(1 << rng.randrange(32))
        else:
            c = 8 * rng.randrange(group.limbs // 8)
            bad[where, c : c + 8] = bn254.limbs_from_ints([bn254.Q + rng.randrange(1 << 200)])[0]
        for later in rng.sample(range(where + 1, 100_003), 3):  # later bad rows never win
            if later < 100_000:
                bad[later, rng.randrange(group.limbs)] ^= np.uint32(1)
        want = pointcheck.first_bad_point(bad, group)
        assert want is not None
        assert first_bad_point(bad, group, chunk_bytes=chunk_bytes) == want
        assert first_bad_point(bad, group) == want


def test_import_checks_points_on_the_gpu_beside_the_writes(tmp_path) -> None:
    """import_key runs the GPU point checks on a thread of its own, beside the chunk writes: a
    flipped bit in B2 is named in one line and leaves no store, and a sound key imports to the
    same store as with the CPU checks."""
    from pathlib import Path

    from distprove.errors import FormatError
    from distprove.formats.zkey import read_zkey
    from distprove.keystore import import_key

    chain = Path(__file__).parents[1] / "data" / "mul_chain_1k" / "circuit_final.zkey"
    z = read_zkey(chain, check_points=False)
    raw = bytearray(chain.read_bytes())
    at = bytes(raw).index(z.b2[3].tobytes())
    raw[at + 5] ^= 0x10
    bad = tmp_path / "bad.zkey"
    bad.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match=r"bad\.zkey: B2 point 3 (is not on the curve|has a coordinate >= q)$"):
        import_key(bad, tmp_path / "bad.zarr", device="gpu")
    assert not (tmp_path / "bad.zarr").exists() and not list(tmp_path.glob(".bad.zarr.tmp-*"))
    on_gpu = import_key(chain, tmp_path / "gpu.zarr", device="gpu", chunk_bytes=4096)
    on_cpu = import_key(chain, tmp_path / "cpu.zarr", device="cpu", chunk_bytes=4096)
    files = sorted(p.relative_to(on_cpu.path) for p in Path(on_cpu.path).rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(on_gpu.path) for p in Path(on_gpu.path).rglob("*") if p.is_file())
    for rel in files:
        assert (Path(on_gpu.path) / rel).read_bytes() == (Path(on_cpu.path) / rel).read_bytes(), rel
