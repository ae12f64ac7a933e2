"""The compiled point validator (distprove.formats.pointcheck) against a reference built from bn254's
own integer arithmetic (decode each row, compare with q, bn254.is_on_curve), on valid points,
infinity, flipped bits, coordinates equal to and above q, and bad points at block and chunk edges."""

from __future__ import annotations

import random

import numpy as np
import pytest

from distprove import bn254
from distprove.bn254 import G1, G2, Q
from distprove.errors import FormatError
from distprove.formats.container import check_points
from distprove.formats.pointcheck import COORD_GE_Q, OFF_CURVE, OK, first_bad_point, point_status


def reference_status(g: bn254.Group, row: np.ndarray) -> int:
    """OK, COORD_GE_Q or OFF_CURVE for one limb row, by Python integers."""
    if not row.any():
        return OK
    if any(c >= Q for c in bn254.ints_from_limbs(row.reshape(-1, 8))):
        return COORD_GE_Q
    return OK if bn254.is_on_curve(g, bn254.points_from_limbs(g, row[None])[0]) else OFF_CURVE


def reference_first(g: bn254.Group, limbs: np.ndarray) -> tuple[int, int] | None:
    for i, row in enumerate(limbs):
        s = reference_status(g, row)
        if s != OK:
            return i, s
    return None


def valid_rows(g: bn254.Group, n: int, rng: random.Random) -> np.ndarray:
    """n rows: distinct valid points (a walk P, P+G, P+2G, ...), every 9th one infinity."""
    p = bn254.mul(g, g.generator, rng.randrange(1, bn254.R))
    pts: list[bn254.Affine] = []
    for i in range(n):
        pts.append(None if i % 9 == 4 else p)
        p = bn254.add(g, p, g.generator)
    return bn254.points_to_limbs(g, pts)


@pytest.fixture(scope="module", params=[G1, G2], ids=["G1", "G2"])
def group_rows(request: pytest.FixtureRequest) -> tuple[bn254.Group, np.ndarray]:
    g = request.param
    base = valid_rows(g, 64, random.Random(11 if g is G1 else 12))
    return g, np.tile(base, (40, 1))  # 2560 rows: crosses the 1024-point blocks


def test_valid_points_and_infinity_pass(group_rows) -> None:
    g, rows = group_rows
    assert not point_status(rows, g).any()
    assert first_bad_point(rows, g) is None
    assert first_bad_point(np.zeros((5, g.limbs), np.uint32), g) is None
    assert first_bad_point(np.zeros((0, g.limbs), np.uint32), g) is None
    check_points("f", "S", rows, g)


def test_flipped_bits_match_reference(group_rows) -> None:
    g, rows = group_rows
    rng = random.Random(5)
    bad = rows.copy()
    hit = sorted(rng.sample(range(rows.shape[0]), 60))
    for i in hit:
        bad[i, rng.randrange(g.limbs)] ^= np.uint32(1 << rng.randrange(32))
    got = point_status(bad, g)
    for i in hit + [0, 1023, 1024, 2559]:
        assert got[i] == reference_status(g, bad[i]), i
    assert set(np.flatnonzero(got)) <= set(hit)
    assert first_bad_point(bad, g) == reference_first(g, bad)


@pytest.mark.parametrize("value", [Q, Q + 1, 2**256 - 1, Q + (1 << 200)], ids=["q", "q+1", "max", "q+2^200"])
def test_coordinate_at_or_above_q(group_rows, value: int) -> None:
    g, rows = group_rows
    for coord in range(g.limbs // 8):
        bad = rows[:40].copy()
        bad[17, 8 * coord : 8 * coord + 8] = bn254.limbs_from_ints([value])[0]
        assert first_bad_point(bad, g) == (17, COORD_GE_Q) == reference_first(g, bad)


def test_q_minus_one_is_below_q(group_rows) -> None:
    g, rows = group_rows
    bad = rows[:8].copy()
    bad[3, :8] = bn254.limbs_from_ints([Q - 1])[0]
    assert first_bad_point(bad, g) == reference_first(g, bad)
    assert reference_first(g, bad)[1] == OFF_CURVE  # a coordinate of q - 1 is in range; the point is off


@pytest.mark.parametrize("where", [0, 6, 7, 13, 1023, 1024, 2047, 2559])
def test_first_bad_at_chunk_and_block_edges(group_rows, where: int) -> None:
    g, rows = group_rows
    bad = rows.copy()
    bad[where, 1] ^= np.uint32(4)  # off the curve (or >= q, the reference decides which)
    bad[-1, g.limbs - 1] = np.uint32(0xFFFFFFFF)  # a later bad point never wins
    want = reference_first(g, bad)
    assert want is not None and want[0] == where
    for chunk in (7, 1024, 1 << 20):
        assert first_bad_point(bad, g, chunk=chunk) == want
    why = "has a coordinate >= q" if want[1] == COORD_GE_Q else "is not on the curve"
    with pytest.raises(FormatError, match=rf"^f: S point {where} {why}$"):
        check_points("f", "S", bad, g)


def test_wrong_width_is_refused() -> None:
    with pytest.raises(ValueError, match="expected"):
        point_status(np.zeros((3, 16), np.uint32), G2)
