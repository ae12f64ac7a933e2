"""The shape of a Groth16 proof that every layer agrees on: its five MSMs and their groups.

A proof takes five multi-scalar multiplications (DESIGN.md step 4): A, B1, C and H over G1 and
B2 over G2. Low in the layering (only :mod:`distprove.bn254` below it) so that the settings,
the stages, the backends and the prover all read the same names.
"""

from __future__ import annotations

from distprove.bn254 import G1, G2, Group

MSM_NAMES = ("A", "B1", "B2", "C", "H")
"""The five MSMs of a proof (DESIGN.md step 4), in the order their results are collected."""


def msm_group(which: str) -> Group:
    """The curve group of MSM ``which`` (B2 is G2, the others G1)."""
    if which not in MSM_NAMES:
        raise ValueError(f"unknown MSM {which!r}; expected one of {MSM_NAMES}")
    return G2 if which == "B2" else G1
