"""Prover backends: the interface (base), the CPU reference (cpu) and the GPU backend (gpu)."""

BACKEND_NAMES = ("auto", "cpu", "gpu")
"""The backend names every command, option and setting accepts ("auto": the GPU when CuPy sees one)."""
