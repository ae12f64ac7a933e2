"""``ptau prepare`` (snarkjs ``powersoftau prepare phase2``, byte-identical) and ``ptau new --dev``.

prepare: the output keeps sections 2-7 of the input unchanged, rewrites the header with
ceremonyPower = power and appends the Lagrange sections 12-15 (SNARKJS_FORMATS.md §5.1, §9):
level p of a section is the size-2^p group inverse DFT of the first 2^p points of its source
(tauG1 2 → 12 with levels 0 … power+1, the last one's missing input being infinity; tauG2 3 → 13,
alphaTauG1 4 → 14, betaTauG1 5 → 15 with levels 0 … power), scaled by 2^-p, affine LEM,
levels concatenated (level p at point offset 2^p − 1). At power 28 tauG1's level 29 exceeds the
2-adicity of Fr and is ffjavascript's coset construction (:func:`level_points`).

Sections are produced level by level and streamed into the file, so only one level of one
section is ever in host memory (besides the memory-mapped input).
"""

from __future__ import annotations

import logging
import os
import random
import secrets
import sys
import time
from typing import Iterator

import numpy as np

from .bn254 import FR_S, FR_SHIFT, G1, G2, R, Group
from .errors import BackendUnavailable
from .formats.ptau import PtauHeader, read_ptau, write_ptau

log = logging.getLogger(__name__)

DEV_WARNING = (
    "distprove ptau new --dev: INSECURE powers of tau for tests and benchmarks only - tau, alpha "
    "and beta are known to this process (no ceremony); never use it for real keys"
)

# (source section, Lagrange section, group, extra level for tauG1)
LAGRANGE_SECTIONS: tuple[tuple[int, int, Group, bool], ...] = (
    (2, 12, G1, True),
    (3, 13, G2, False),
    (4, 14, G1, False),
    (5, 15, G1, False),
)


def resolve_backend(backend: str) -> str:
    """"cpu" or "gpu" for a requested "auto" | "cpu" | "gpu" ("auto": the GPU when CuPy sees one)."""
    if backend not in ("auto", "cpu", "gpu"):
        raise ValueError(f"backend must be auto, cpu or gpu, not {backend!r}")
    if backend == "cpu":
        return "cpu"
    from .backends.gpu import available

    if available():
        return "gpu"
    if backend == "gpu":
        raise BackendUnavailable("backend 'gpu' requested but CuPy sees no CUDA device")
    return "cpu"


def level_input(section: np.ndarray, p: int, group: Group) -> np.ndarray:
    """The 2^p input points of level p: the section's first 2^p rows, padded with infinity (zero
    rows) when the section is shorter (tauG1 at level power+1 has 2^(power+1) − 1 points)."""
    n = 1 << p
    rows = np.asarray(section[:n])
    if rows.shape[0] == n:
        return rows
    pad = np.zeros((n - rows.shape[0], group.limbs), dtype="<u4")
    return np.concatenate([rows, pad])


def level_points(group: Group, section: np.ndarray, p: int, backend: str = "cpu") -> np.ndarray:
    """Lagrange level p of one source section as (2^p, 16|32) Montgomery limbs.

    p ≤ 28: the inverse DFT over ⟨Fr.w[p]⟩. p = 29 (tauG1 of a power-28 file): the Lagrange
    points of ⟨Fr.w[28]⟩ ∪ 25·⟨Fr.w[28]⟩, as ffjavascript's ``lagrangeEvaluations`` builds them.
    Callable on its own (one level, one section), e.g. from a Dask task.
    """
    inp = level_input(section, p, group)
    if backend == "gpu":
        from .backends.gpu.groupfft import coset_level_gpu, ifft_level_gpu

        return coset_level_gpu(group, inp, FR_S, FR_SHIFT) if p > FR_S else ifft_level_gpu(group, inp)
    from .backends.cpu.groupfft import coset_level, ifft_level

    return coset_level(group, inp, FR_S, FR_SHIFT) if p > FR_S else ifft_level(group, inp)


def _lagrange_section(group: Group, section: np.ndarray, top: int, backend: str, name: str) -> Iterator[np.ndarray]:
    for p in range(top + 1):
        t0 = time.perf_counter()
        out = level_points(group, section, p, backend)
        log.info("ptau prepare: %s level %d (%d points) in %.2f s", name, p, 1 << p, time.perf_counter() - t0)
        yield out


def prepare(in_path: str | os.PathLike[str], out_path: str | os.PathLike[str], backend: str = "auto") -> None:
    """Write ``out_path``: ``in_path`` prepared for phase 2, byte-identical to
    ``snarkjs powersoftau prepare phase2 in out`` (sections 1-7 and 12-15, nSections 11).

    ``backend``: "auto" (GPU when available), "cpu" or "gpu". Raises FormatError on a bad input,
    BackendUnavailable when "gpu" is asked for without a device.
    """
    be = resolve_backend(backend)
    src = read_ptau(in_path)
    power = src.power
    sources = {2: src.tau_g1, 3: src.tau_g2, 4: src.alpha_tau_g1, 5: src.beta_tau_g1}
    names = {2: "tauG1", 3: "tauG2", 4: "alphaTauG1", 5: "betaTauG1"}
    sections: dict[int, object] = {
        2: src.tau_g1, 3: src.tau_g2, 4: src.alpha_tau_g1, 5: src.beta_tau_g1,
        6: src.beta_g2.reshape(1, -1), 7: src.contributions,
    }
    for sid, lid, group, extra in LAGRANGE_SECTIONS:
        top = power + 1 if extra else power
        sections[lid] = _lagrange_section(group, sources[sid], top, be, names[sid])
    write_ptau(out_path, PtauHeader(power=power, ceremony_power=power), sections)  # type: ignore[arg-type]


# --- ptau new --dev ----------------------------------------------------------------------


def dev_secrets(seed: int | None) -> tuple[int, int, int]:
    """(τ, α, β), nonzero in Fr: from ``seed`` (reproducible) or from :mod:`secrets`."""
    if seed is None:
        return tuple(1 + secrets.randbelow(R - 1) for _ in range(3))  # type: ignore[return-value]
    rng = random.Random(f"distprove-ptau-dev-{seed}")
    return tuple(rng.randrange(1, R) for _ in range(3))  # type: ignore[return-value]


def new_dev(
    out_path: str | os.PathLike[str], power: int, seed: int | None = None, device: str = "auto", workers: int = 1,
    warn: bool = True,
) -> tuple[int, int, int]:
    """Write an INSECURE .ptau of ``power`` (sections 1-7 as ``snarkjs powersoftau new`` lays them
    out, zero contribution records) for random τ, α, β; returns (τ, α, β).

    tauG1 = [τ^i]₁ (i < 2N − 1), tauG2 = [τ^i]₂, alphaTauG1 = [α·τ^i]₁, betaTauG1 = [β·τ^i]₁
    (i < N), betaG2 = [β]₂, N = 2^power, by fixed-base multiplication (GPU when ``device`` allows).
    """
    from .devsetup import fixed_base, powers
    from .formats.ptau import MAX_POWER
    from .synth import limbs_from_field

    if not 1 <= power <= MAX_POWER:
        raise ValueError(f"power must be in 1 … {MAX_POWER}, not {power}")
    if warn:
        print("WARNING: " + DEV_WARNING, file=sys.stderr)
    tau, alpha, beta = dev_secrets(seed)
    n = 1 << power
    tpow = powers(tau, 2 * n - 1)

    def pts(group: Group, scalars: np.ndarray) -> np.ndarray:
        return fixed_base(group, limbs_from_field(scalars), device=device, workers=workers)

    sections = {
        2: pts(G1, tpow),
        3: pts(G2, tpow[:n]),
        4: pts(G1, tpow[:n] * alpha % R),
        5: pts(G1, tpow[:n] * beta % R),
        6: pts(G2, np.array([beta], dtype=object)),
        7: np.zeros(4, dtype=np.uint8),
    }
    write_ptau(out_path, PtauHeader(power=power, ceremony_power=power), sections)  # type: ignore[arg-type]
    return tau, alpha, beta
