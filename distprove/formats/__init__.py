"""Readers and writers of the snarkjs file formats (zkey, wtns, r1cs, ptau, JSON)."""

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

__all__ = [
    "VerificationKey",
    "proof_to_json",
    "public_to_json",
    "read_proof",
    "read_public",
    "read_vk",
    "vk_to_json",
    "write_json_atomic",
]
