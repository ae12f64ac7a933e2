"""Witness sources: where a proof's witness comes from.

A witness file, or an input computed by a witness generator named by its path
(:mod:`~distprove.witness.generators`: the circuit's ``.wasm`` in wasmtime,
:mod:`~distprove.witness.wasm`, or the native generator built from ``circom --c``'s folder,
:mod:`~distprove.witness.native`), on a
worker in its process pool (:mod:`~distprove.witness.pool`) and handed to its proof tasks through
shared-memory slots (:mod:`~distprove.witness.slots`); a batch folder's witnesses and inputs,
their keys and generators: :mod:`~distprove.witness.discovery`. Nothing here imports
:mod:`distprove.cluster`, which schedules the tasks.
"""
