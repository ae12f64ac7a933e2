"""Prover backends: the interface (base), the CPU reference (cpu) and the GPU backend (gpu)."""
