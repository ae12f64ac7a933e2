"""The bundled example: a 1,021-constraint multiplication chain (mul_chain.circom) with its
witness calculator (``circom --wasm``), three inputs, a snarkjs 0.7.6 key and the three
witnesses snarkjs computed from the inputs; ``distprove example`` computes each witness from its
input, checks it against snarkjs's, proves and verifies it.

What it leaves in its output folder (the README's Python snippet runs on it)::

    key.zarr/                    the key store imported from mul_chain_1k.zkey
    verification_key.json        for snarkjs groth16 verify / distprove verify
    witnesses/input_<i>.wtns     the witness computed from inputs/input_<i>.json, as proved
    input_<i>.proof.json         its proof (verified) and public signals
    input_<i>.public.json

``witnesses/`` with the key in its parent folder is a batch's layout: ``distprove batch
<out>/witnesses`` finds ``<out>/key.zarr`` and writes to ``<out>/witnesses/proofs/``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

HERE = Path(__file__).parent
ZKEY = HERE / "mul_chain_1k.zkey"
WASM = HERE / "mul_chain_1k.wasm"
INPUT_DIR = HERE / "inputs"
WITNESS_DIR = HERE / "witnesses"
"""``witness_<i>.wtns``: what ``snarkjs wtns calculate`` made of ``inputs/input_<i>.json``."""


def run_example(out_dir: Path, backend: str = "auto", echo: Callable[[str], None] = print) -> bool:
    """Import the example key into ``out_dir/key.zarr``; for each input compute its witness with
    the circuit's wasm, compare it with snarkjs's, write it to ``out_dir/witnesses/``, prove it
    and verify the proof.

    Returns True when every witness is snarkjs's and every proof verifies. Raises
    BackendUnavailable, writing nothing, when ``backend`` cannot run here.
    """
    import numpy as np

    from ..backends.select import get_backend
    from ..formats.jsonio import write_json_atomic
    from ..formats.wtns import read_wtns, write_wtns
    from ..keystore import import_key
    from ..prover import prove
    from ..verifier import verify
    from ..witness.generators import generator

    get_backend(backend)  # BackendUnavailable (e.g. gpu without a GPU) before anything is written
    out_dir.mkdir(parents=True, exist_ok=True)
    key = import_key(ZKEY, out_dir / "key.zarr", overwrite=True)
    vk = key.vk_json()
    write_json_atomic(out_dir / "verification_key.json", vk)
    echo(f"key: {ZKEY.name} -> {out_dir / 'key.zarr'} ({key.n_vars} signals, domain 2^{key.power})")
    wc = generator(WASM)
    wc.check_key(key)
    witness_dir = out_dir / "witnesses"
    witness_dir.mkdir(exist_ok=True)
    ok = True
    for wtns in sorted(WITNESS_DIR.glob("*.wtns")):
        stem = wtns.stem
        source = INPUT_DIR / f"input_{stem.rsplit('_', 1)[-1]}.json"
        t0 = time.perf_counter()
        values = wc.calculate_file(source)
        t1 = time.perf_counter()
        same = np.array_equal(values, read_wtns(wtns).values)
        write_wtns(witness_dir / f"{source.stem}.wtns", values)
        proof = prove(key, values, backend=backend)
        proof.write(out_dir / f"{source.stem}.proof.json", out_dir / f"{source.stem}.public.json")
        valid = verify(vk, proof.public_json(), proof.to_json())
        ok &= valid and same
        echo(f"{source.name}: witness in {t1 - t0:.3f} s ({'as snarkjs computes it' if same else 'DIFFERS from snarkjs'}), "
             f"proved in {time.perf_counter() - t1:.2f} s, {'verified OK' if valid else 'INVALID'}")
    echo(f"witnesses in {witness_dir}/, proofs in {out_dir}/; check one with snarkjs: "
         f"snarkjs groth16 verify {out_dir}/verification_key.json {out_dir}/input_0.public.json {out_dir}/input_0.proof.json")
    return ok
