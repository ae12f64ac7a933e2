"""Readers and writers of the snarkjs file formats (zkey, wtns, r1cs, ptau, JSON)."""

from distprove.formats.container import Container, Section, check_points, open_container, write_container
from distprove.formats.jsonio import (
    VerificationKey,
    proof_to_json,
    public_to_json,
    read_proof,
    read_public,
    read_vk,
    vk_to_json,
    write_json_atomic,
)
from distprove.formats.ptau import Ptau, PtauHeader, lagrange_level, read_ptau, write_ptau
from distprove.formats.r1cs import CSR, R1CS, read_r1cs, write_r1cs
from distprove.formats.wtns import Wtns, read_wtns, write_wtns
from distprove.formats.zkey import ZKey, read_zkey

__all__ = [
    "CSR",
    "Container",
    "Ptau",
    "PtauHeader",
    "R1CS",
    "Section",
    "VerificationKey",
    "Wtns",
    "ZKey",
    "check_points",
    "lagrange_level",
    "open_container",
    "proof_to_json",
    "public_to_json",
    "read_proof",
    "read_ptau",
    "read_public",
    "read_r1cs",
    "read_vk",
    "read_wtns",
    "read_zkey",
    "vk_to_json",
    "write_container",
    "write_json_atomic",
    "write_ptau",
    "write_r1cs",
    "write_wtns",
]
