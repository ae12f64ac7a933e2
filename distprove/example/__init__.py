"""The bundled example: a 1,021-constraint multiplication chain (mul_chain.circom) with a
snarkjs 0.7.6 key and three witnesses, proved and verified by ``distprove example``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

HERE = Path(__file__).parent
ZKEY = HERE / "mul_chain_1k.zkey"
WITNESS_DIR = HERE / "witnesses"


def run_example(out_dir: Path, backend: str = "auto", echo: Callable[[str], None] = print) -> bool:
    """Import the example key into ``out_dir/key.zarr``, prove every witness, verify each proof.

    Returns True when every proof verifies. Raises BackendUnavailable, writing nothing, when
    ``backend`` cannot run here.
    """
    from ..backends.select import get_backend
    from ..formats.jsonio import write_json_atomic
    from ..keystore import import_key
    from ..prover import prove
    from ..verifier import verify

    get_backend(backend)  # BackendUnavailable (e.g. gpu without a GPU) before anything is written
    out_dir.mkdir(parents=True, exist_ok=True)
    key = import_key(ZKEY, out_dir / "key.zarr", overwrite=True)
    vk = key.vk_json()
    write_json_atomic(out_dir / "verification_key.json", vk)
    echo(f"key: {ZKEY.name} -> {out_dir / 'key.zarr'} ({key.n_vars} signals, domain 2^{key.power})")
    ok = True
    for wtns in sorted(WITNESS_DIR.glob("*.wtns")):
        t0 = time.perf_counter()
        proof = prove(key, wtns, backend=backend)
        stem = wtns.stem
        proof.write(out_dir / f"{stem}.proof.json", out_dir / f"{stem}.public.json")
        valid = verify(vk, proof.public_json(), proof.to_json())
        ok &= valid
        echo(f"{wtns.name}: proved in {time.perf_counter() - t0:.2f} s, {'verified OK' if valid else 'INVALID'}")
    echo(f"proofs in {out_dir}/; check one with snarkjs: "
         f"snarkjs groth16 verify {out_dir}/verification_key.json {out_dir}/witness_0.public.json {out_dir}/witness_0.proof.json")
    return ok
