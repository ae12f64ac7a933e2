"""Witness generators: what turns a circom input (``*.json``) into its witness, whatever computes it.

A generator is named by a path, as ``circom`` writes it:

* a ``.wasm`` file (``circom --wasm``): the wasm calculator in wasmtime
  (:class:`distprove.witness.wasm.WitnessCalculator`);
* a folder written by ``circom --c`` (``<name>_cpp/``: ``main.cpp``, a ``Makefile`` and the
  circuit's ``<name>.dat``), or the binary built from one (an executable file with
  ``<binary>.dat`` beside it): the native generator (:class:`distprove.witness.native.NativeGenerator`,
  imported when first needed).

Every caller (``distprove wtns calculate``, the batch's check of a generator against its key, the
workers' witness processes) goes through :func:`generator` and the :class:`Generator` interface,
never a concrete class. :func:`calculate_folder` computes a folder of inputs in a process pool,
a bad input failing alone.
"""

from __future__ import annotations

import os
import stat
import threading
from typing import Any, Callable, Protocol

import numpy as np

from distprove.errors import FormatError, one_line

NOT_A_GENERATOR = "not a witness generator: expected a .wasm, a folder written by circom --c, or the binary built from one"
WASM = "wasm"
NATIVE = "native"


class Generator(Protocol):
    """The interface every witness generator has (duck-typed)."""

    path: str
    """What the user named: a ``.wasm``, a ``<name>_cpp/`` folder, or the binary built from one."""

    def calculate_file(self, input_path: str) -> np.ndarray:
        """The witness of the input file: an (n_vars, 8) uint32 array of standard-form limbs (what
        :mod:`distprove.formats.wtns` reads and writes). Raises FormatError(input_path, reason) for
        a bad input."""
        ...

    def check_key(self, key: Any) -> None:
        """Raise FormatError(generator path, problem) unless the generator computes witnesses of
        ``key``'s size and prime (``key`` has ``n_vars`` and ``path``)."""
        ...

    def close(self) -> None:
        """Free what the generator holds (processes, ...)."""
        ...


def is_circom_c_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder written by ``circom --c``: ``main.cpp``, a ``Makefile`` and a ``*.dat``."""
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return "main.cpp" in names and "Makefile" in names and any(n.endswith(".dat") for n in names)


def is_native_binary(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an executable regular file with ``<path>.dat`` beside it (a built
    ``circom --c`` generator)."""
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and os.access(p, os.X_OK) and os.path.isfile(p + ".dat")


def kind(path: str | os.PathLike[str]) -> str:
    """What generator ``path`` names: :data:`WASM`, :data:`NATIVE`; raises FormatError(path, why)
    for anything else (a missing path, a file that is neither)."""
    p = os.fspath(path)
    if not os.path.exists(p):
        raise FormatError(p, "no such witness generator (a .wasm, a folder written by circom --c, or the binary built from one)")
    if p.endswith(".wasm") and not os.path.isdir(p):
        return WASM
    if is_circom_c_folder(p) or is_native_binary(p):
        return NATIVE
    raise FormatError(p, NOT_A_GENERATOR)


def open_generator(path: str | os.PathLike[str], log_line: Callable[[str], None] | None = None) -> Generator:
    """A new generator of ``path`` (see :func:`kind`); ``log_line`` receives the lines a wasm
    circuit's ``log()`` prints (a native binary prints its own). Raises FormatError naming the
    path when it is no generator, or a broken one."""
    p = os.fspath(path)
    if kind(p) == WASM:
        from distprove.witness.wasm import WitnessCalculator

        return WitnessCalculator(p, log_line=log_line)
    from distprove.witness.native import NativeGenerator

    return NativeGenerator(p)


_local = threading.local()


def generator(path: str | os.PathLike[str]) -> Generator:
    """This thread's generator of ``path``, made on first use and reused (a wasm's per file
    version: :func:`distprove.witness.wasm.calculator`)."""
    p = os.fspath(path)
    cache: dict[str, Generator] = getattr(_local, "generators", None) or {}
    _local.generators = cache
    gen = cache.get(p)  # a native one, made before
    if gen is not None:
        return gen
    if kind(p) == WASM:
        from distprove.witness.wasm import calculator

        return calculator(p)
    gen = cache[p] = open_generator(p)
    return gen


def calculate(gen_path: str | os.PathLike[str], input_path: str | os.PathLike[str]) -> np.ndarray:
    """The witness of the input file at ``input_path`` by the generator ``gen_path``: an
    (n_vars, 8) uint32 array of standard-form limbs, as :class:`distprove.formats.Wtns` holds
    them. Cheap to call many times in one process (the generator is made once per thread).
    Raises FormatError naming the file at fault."""
    return generator(gen_path).calculate_file(os.fspath(input_path))


def calculate_wtns(
    gen_path: str | os.PathLike[str],
    input_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
) -> np.ndarray:
    """Compute the witness of ``input_path`` and write it as a .wtns to ``out_path`` (byte for byte
    what ``snarkjs wtns calculate`` writes); returns the values."""
    from distprove.formats.wtns import write_wtns

    values = calculate(gen_path, input_path)
    write_wtns(out_path, values)
    return values


def failure_line(exc: Exception, input_path: str, out_path: str) -> str:
    """The one line a witness of ``input_path`` that was to be written at ``out_path`` fails with:
    the input's own (FormatError), the file that could not be written (OSError), or anything else
    as a failed calculation of that input."""
    if isinstance(exc, FormatError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"{out_path}: cannot write the witness: {exc.strerror or exc}"
    return f"{input_path}: the witness calculation failed: {one_line(exc)}"


def _calculate_one(gen_path: str, input_path: str, out_path: str) -> str:
    """In a worker process of :func:`calculate_folder`: "" once ``out_path`` is written, else
    :func:`failure_line`."""
    try:
        calculate_wtns(gen_path, input_path, out_path)
    except Exception as exc:  # fails this input alone
        return failure_line(exc, input_path, out_path)
    return ""


def calculate_folder(
    gen_path: str | os.PathLike[str],
    input_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    processes: int | None = None,
) -> list[tuple[str, str]]:
    """The witness of every ``*.json`` in ``input_dir`` (not its subfolders) into ``out_dir`` as
    ``<name>.wtns``, each as :func:`calculate_wtns` writes it, in ``processes`` processes at once
    (None: one per core; the generator made once in each). Returns (input path, "" or the
    one-line reason it failed) per input, in name order: a bad input fails alone. Raises
    FormatError, before any input, for a path that is no witness generator (or a broken one), a
    folder that cannot be listed and an output folder that cannot be made."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    gen = os.fspath(gen_path)
    generator(gen)  # a bad generator is one error, not one per input
    try:
        inputs = sorted(os.path.join(input_dir, e.name) for e in os.scandir(input_dir) if e.is_file() and e.name.endswith(".json"))
    except OSError as exc:
        raise FormatError(os.fspath(input_dir), f"cannot list the inputs: {exc.strerror or exc}") from None
    if not inputs:
        return []
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise FormatError(os.fspath(out_dir), f"cannot make the output folder: {exc.strerror or exc}") from None
    outs = [os.path.join(out_dir, os.path.basename(p)[: -len(".json")] + ".wtns") for p in inputs]
    from dask.system import CPU_COUNT

    n = max(1, min(processes or CPU_COUNT, len(inputs)))
    if n == 1:
        return [(p, _calculate_one(gen, p, o)) for p, o in zip(inputs, outs)]
    with ProcessPoolExecutor(n, mp_context=get_context("spawn")) as pool:
        chunk = max(1, len(inputs) // (4 * n))
        return list(zip(inputs, pool.map(_calculate_one, [gen] * len(inputs), inputs, outs, chunksize=chunk)))
