"""The CPU backend: plain Python ints, the reference every other backend is checked against."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from distprove import bn254
from distprove.backends.base import BASE_ATTR, Backend, Evals, resolve_constant_work
from distprove.backends.cpu import gather as _gather
from distprove.backends.cpu import msm as _msm
from distprove.backends.cpu import ntt as _ntt
from distprove.bn254 import Affine
from distprove.errors import BackendUnavailable
from distprove.groth16 import msm_group


class _KeyState:
    """Per-key conversions, made on first use: affine bases and decoded coefficients."""

    def __init__(self) -> None:
        self.bases: dict[str, list[Affine]] = {}
        self.coefs: dict[str, list[int]] = {}


class CpuBackend(Backend):
    """Reference backend. Vectors are lists of Python ints (standard form).

    Per-key state is cached by ``key.content_hash`` in an LRU of ``max_keys`` entries (safe to
    share between threads, e.g. a Dask worker's).
    ``use_gmpy2``: MSM arithmetic on gmpy2.mpz (None = when installed, True = require it,
    False = plain ints); the results are identical either way.
    """

    name = "cpu"
    min_chunk = 64
    """A chunked MSM's chunks may be small: the CPU pays no launch for one."""

    def __init__(self, max_keys: int = 2, use_gmpy2: bool | None = None) -> None:
        if max_keys < 1:
            raise ValueError("max_keys must be at least 1")
        if use_gmpy2 and not _msm.mpz_available():
            raise BackendUnavailable("CpuBackend(use_gmpy2=True) but gmpy2 is not installed")
        self._mpz = _msm.mpz_available() if use_gmpy2 is None else use_gmpy2
        self._max_keys = max_keys
        self._states: OrderedDict[str, _KeyState] = OrderedDict()
        self._lock = threading.Lock()

    def _state(self, key: Any) -> _KeyState:
        h = key.content_hash
        with self._lock:
            st = self._states.get(h)
            if st is None:
                st = self._states[h] = _KeyState()
                while len(self._states) > self._max_keys:
                    self._states.popitem(last=False)
            else:
                self._states.move_to_end(h)
            return st

    def _bases(self, key: Any, which: str) -> list[Affine]:
        st = self._state(key)
        if which not in st.bases:
            group = msm_group(which)
            pts = bn254.points_from_limbs(group, getattr(key, BASE_ATTR[which])[:])
            st.bases[which] = _msm.to_mpz_points(group, pts) if self._mpz else pts
        return st.bases[which]

    def _coefs(self, key: Any, matrix: str) -> list[int]:
        st = self._state(key)
        if matrix not in st.coefs:
            st.coefs[matrix] = _gather.decode_coefficients(getattr(key, f"{matrix}_value")[:])
        return st.coefs[matrix]

    def gather(self, key: Any, witness: Any) -> Evals:
        w = bn254.ints_from_limbs(witness)
        if len(w) != key.n_vars:
            raise ValueError(f"witness has {len(w)} values, the key expects {key.n_vars}")
        a, b = (
            _gather.evaluate_rows(
                np.asarray(getattr(key, f"{m}_row_ptr")[:]),
                np.asarray(getattr(key, f"{m}_signal")[:]),
                self._coefs(key, m),
                w,
            )
            for m in ("a", "b")
        )
        return Evals(a, b, _gather.pointwise_product(a, b))

    def h_scalars(self, key: Any, evals: Evals) -> np.ndarray:
        return bn254.limbs_from_ints(_ntt.h_scalars(evals.a, evals.b, evals.c))

    def msm_windows(
        self,
        key: Any,
        which: str,
        scalars: Any,
        c: int,
        lo: int,
        hi: int,
        *,
        constant_work: bool | None = None,
    ) -> list[Affine]:
        group = msm_group(which)
        s = np.asarray(scalars, dtype="<u4").reshape(-1, 8)
        if which == "C":
            s = s[key.n_public + 1 :]
        return _msm.msm_windows(
            group, self._bases(key, which), s, c, lo, hi, resolve_constant_work(constant_work)
        )

    def msm_chunk_bases(self, key: Any, which: str, lo: int, hi: int, slot: int, streamed: bool) -> Any:
        """A streamed chunk's rows read from the key (converted by :meth:`msm_chunk_start`), or a
        slice of the key's converted bases."""
        if streamed:
            return super().msm_chunk_bases(key, which, lo, hi, slot, streamed)
        return self._bases(key, which)[lo:hi]

    def msm_chunk_start(self, which: str, bases: Any, scalars: Any, c: int, lo: int, hi: int, slot: int,
                        *, constant_work: bool | None = None) -> Any:
        if isinstance(bases, np.ndarray):
            group = msm_group(which)
            points = bn254.points_from_limbs(group, bases)
            bases = _msm.to_mpz_points(group, points) if self._mpz else points
        return super().msm_chunk_start(which, bases, scalars, c, lo, hi, slot, constant_work=constant_work)

    def ntt(self, values: np.ndarray, inverse: bool = False) -> np.ndarray:
        return bn254.limbs_from_ints(_ntt.ntt(bn254.ints_from_limbs(values), inverse))

    def to_host(self, vector: Any) -> np.ndarray:
        if isinstance(vector, np.ndarray):
            return super().to_host(vector)
        return bn254.limbs_from_ints(vector)
