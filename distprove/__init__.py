"""distprove: batches of Groth16 proofs (BN254, snarkjs-compatible) on CPUs or Dask GPU clusters.

Public API (imported lazily so ``import distprove`` stays light)::

    distprove.import_key(zkey, store)   # .zkey -> zarr key store
    distprove.open_key(path)            # key store or .zkey
    distprove.prove(key, witness)       # -> Proof (to_json(), public_json(), write())
    distprove.prove_many(key, witnesses) # -> Proofs in order, each assembled beside the next's MSMs
    distprove.verify(vk, public, proof) # pairing check -> bool
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "import_key": "distprove.keystore",
    "open_key": "distprove.keystore",
    "KeyStore": "distprove.keystore",
    "prove": "distprove.prover",
    "prove_many": "distprove.prover",
    "Proof": "distprove.prover",
    "verify": "distprove.verifier",
    "verify_many": "distprove.verifier",
    "batch": "distprove.cluster.batching",
    "BatchReport": "distprove.cluster.batching",
    "DistproveError": "distprove.errors",
    "FormatError": "distprove.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'distprove' has no attribute {name!r}")
