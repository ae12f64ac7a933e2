"""Witness calculation: a circom 2 circuit's ``.wasm`` and an ``input.json`` to the witness values.

The wasm is the witness calculator ``circom --wasm`` writes; it runs here in wasmtime, driven by
the protocol that circom_runtime's ``witness_calculator.js`` (what ``snarkjs wtns calculate``
uses) speaks to it:

* imports ``runtime.exceptionHandler(code)`` (the wasm gives up: an assertion failed, an unknown
  signal, ...), ``printErrorMessage``/``writeBufferMessage`` (a message, read character by
  character with ``getMessageChar``: the error's template and line, or a ``log()`` item),
  ``showSharedRWMemory`` (a field element ``log()`` prints) and, in debug builds, the
  ``log*Signal``/``log*Component`` hooks, which are no-ops here as in snarkjs;
* ``getFieldNumLen32`` (n32: 32-bit words per field element), ``getRawPrime`` (the prime into
  the shared read/write memory, words read with ``readSharedRWMemory``), ``getWitnessSize``,
  ``getInputSize``;
* per calculation ``init(0)``, then per input signal its FNV-1a 64-bit name hash as two i32
  halves: ``getInputSignalSize(hMSB, hLSB)`` (-1 for an unknown name), and per value its n32
  words written with ``writeSharedRWMemory`` (least significant first) and
  ``setInputSignal(hMSB, hLSB, i)``; the last input value runs the circuit;
* ``getWitness(i)`` puts witness value i (standard form) into the shared memory.

Every value crosses the Python/wasm border through a small helper module linked to the
circuit's exports: a call from Python into wasm costs 10-25 microseconds in wasmtime-py,
against nanoseconds from wasm to wasm, so the helper runs a whole calculation (``init``, every
input value, the witness readout) in one call, and each input signal's size is asked once per
name. What is left is the circuit's own code: wasmtime's (Cranelift's) machine code for it runs
1.3x as long as node's (V8's) on the multiplication chains and 0.9-1.2x on the Poseidon, bit and
Merkle circuits, at any Cranelift opt level (``pipelines/bench_witnessgen.py``, its ``run``
columns); the readout, which node makes word by word from JavaScript, makes up for it: a whole
witness takes 0.75-0.96x node's time, 2^10 to 2^20 values.

Input values are read as snarkjs 0.7.6 reads them (``unstringifyBigInts`` then ``BigInt``):
JSON integers, integer-valued numbers, decimal strings with an optional sign, ``0x``/``0o``/``0b``
strings, booleans; nested arrays are flattened in order; values are reduced modulo the prime
(a negative v becomes p - (|v| mod p)). Two inputs snarkjs takes and this module refuses, as
they are almost surely mistakes: an empty string (snarkjs reads 0) and a JSON number beyond 2^53
(JavaScript rounds it to a double first; write it as a string).

One process compiles a wasm once (wasmtime's on-disk cache keeps the machine code between
processes) and each thread keeps its own instance, reused for every input (:func:`calculator`).
Callers name a generator, wasm or native, through :mod:`distprove.witness.generators`.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

from distprove.bn254 import R
from distprove.errors import FormatError
from distprove.witness.inputs import field_values, fnv1a64, read_input

if TYPE_CHECKING:
    import wasmtime

log = logging.getLogger(__name__)

_EXCEPTIONS = {
    1: "Signal not found.",
    2: "Too many signals set.",
    3: "Signal already set.",
    4: "Assert Failed.",
    5: "Not enough memory.",
    6: "Input signal array access exceeds the size.",
    7: "Out of bounds array access.",
}
"""circom 2's exceptionHandler codes, worded as circom's own witness_calculator.js words them."""

_NOOP_IMPORTS = frozenset(
    {"printDebug", "log", "logGetSignal", "logSetSignal", "logStartComponent", "logFinishComponent"}
)
"""Debug hooks some circom builds import; snarkjs ignores them unless asked to trace, and so does this."""

_REQUIRED_EXPORTS = (
    "getVersion",
    "getFieldNumLen32",
    "getRawPrime",
    "readSharedRWMemory",
    "writeSharedRWMemory",
    "init",
    "setInputSignal",
    "getWitnessSize",
    "getWitness",
    "getInputSize",
)

_HELPER_WAT = """
(module
  (import "c" "init" (func $init (param i32)))
  (import "c" "getWitness" (func $getWitness (param i32)))
  (import "c" "readSharedRWMemory" (func $read (param i32) (result i32)))
  (import "c" "writeSharedRWMemory" (func $write (param i32 i32)))
  (import "c" "setInputSignal" (func $set (param i32 i32 i32)))
  (memory (export "buf") 1)
  ;; One whole calculation. buf from address 0 holds $nsig signal records, each its hash
  ;; (hi, lo), its value count and that many values of n32 words; each value is written to the
  ;; shared memory and set (the last one runs the circuit), then witness values 0..n-1 are read
  ;; back into buf from address 0, n32 words each.
  (func (export "calculate") (param $nsig i32) (param $n i32) (param $n32 i32)
    (local $s i32) (local $i i32) (local $j i32) (local $p i32)
    (local $hi i32) (local $lo i32) (local $count i32)
    (call $init (i32.const 0))
    (block $sigs_done (loop $sig
      (br_if $sigs_done (i32.ge_u (local.get $s) (local.get $nsig)))
      (local.set $hi (i32.load (local.get $p)))
      (local.set $lo (i32.load offset=4 (local.get $p)))
      (local.set $count (i32.load offset=8 (local.get $p)))
      (local.set $p (i32.add (local.get $p) (i32.const 12)))
      (local.set $i (i32.const 0))
      (block $vals_done (loop $val
        (br_if $vals_done (i32.ge_u (local.get $i) (local.get $count)))
        (local.set $j (i32.const 0))
        (block $wd (loop $word
          (br_if $wd (i32.ge_u (local.get $j) (local.get $n32)))
          (call $write (local.get $j) (i32.load (local.get $p)))
          (local.set $p (i32.add (local.get $p) (i32.const 4)))
          (local.set $j (i32.add (local.get $j) (i32.const 1)))
          (br $word)))
        (call $set (local.get $hi) (local.get $lo) (local.get $i))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $val)))
      (local.set $s (i32.add (local.get $s) (i32.const 1)))
      (br $sig)))
    (local.set $i (i32.const 0))
    (local.set $p (i32.const 0))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (call $getWitness (local.get $i))
      (local.set $j (i32.const 0))
      (block $wd (loop $word
        (br_if $wd (i32.ge_u (local.get $j) (local.get $n32)))
        (i32.store (local.get $p) (call $read (local.get $j)))
        (local.set $p (i32.add (local.get $p) (i32.const 4)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $word)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))
)
"""



class _WasmGaveUp(Exception):
    """Raised inside the exceptionHandler import to unwind the wasm."""


def _i32(x: int) -> int:
    """An unsigned 32-bit value as the signed i32 wasmtime's calls take."""
    return x - (1 << 32) if x >= 1 << 31 else x


@dataclass(frozen=True)
class CircuitInfo:
    """What a witness calculator says of its circuit, to check it against a key before proving."""

    version: tuple[int, int, int]
    """circom version that compiled the wasm (major, minor, patch; 0 where the wasm does not say)."""
    prime: int
    n32: int
    witness_size: int
    """Number of witness values (the key's nVars for this circuit)."""
    input_size: int
    """Number of input values (all input signals, arrays flattened)."""


_engine_lock = threading.Lock()
_engine: wasmtime.Engine | None = None
_modules: dict[tuple[str, int, int], wasmtime.Module] = {}
_helper: list[wasmtime.Module] = []
_local = threading.local()


def _get_engine() -> wasmtime.Engine:
    """The process's wasmtime engine, with wasmtime's on-disk code cache where it can be used."""
    global _engine
    import wasmtime

    with _engine_lock:
        if _engine is None:
            config = wasmtime.Config()
            try:
                config.cache = True
            except wasmtime.WasmtimeError as exc:  # no usable cache directory: compile every time
                log.debug("wasmtime code cache off: %s", exc)
            _engine = wasmtime.Engine(config)
        return _engine


def _compile(wasm_path: str) -> tuple[wasmtime.Module, wasmtime.Module]:
    """The compiled circuit module (once per process and file version) and the helper module."""
    import wasmtime

    try:
        st = os.stat(wasm_path)
    except OSError as exc:
        raise FormatError(wasm_path, f"cannot read: {exc.strerror or exc}") from None
    key = (os.path.realpath(wasm_path), st.st_mtime_ns, st.st_size)
    engine = _get_engine()
    with _engine_lock:
        module = _modules.get(key)
        if not _helper:
            _helper.append(wasmtime.Module(engine, _HELPER_WAT))
    if module is None:
        try:
            with open(wasm_path, "rb") as f:
                module = wasmtime.Module(engine, f.read())
        except OSError as exc:
            raise FormatError(wasm_path, f"cannot read: {exc.strerror or exc}") from None
        except wasmtime.WasmtimeError as exc:
            raise FormatError(wasm_path, f"not a WebAssembly module ({str(exc).splitlines()[0]})") from None
        with _engine_lock:
            _modules[key] = module
    return module, _helper[0]


class WitnessCalculator:
    """One instance of a circuit's witness calculator; :meth:`calculate` runs it on one input.

    Not thread-safe (a wasm instance is not): one per thread, as :func:`calculator` keeps them.
    ``log_line`` receives each line the circuit's ``log()`` prints (default: this module's logger
    at INFO).
    """

    def __init__(self, wasm_path: str | os.PathLike[str], log_line: Callable[[str], None] | None = None) -> None:
        self.path = os.fspath(wasm_path)
        self.log_line = log_line or (lambda line: log.info("%s: %s", self.path, line))
        self._module, self._helper_module = _compile(self.path)
        self._signals: dict[str, tuple[int, int, int | None]] = {}
        self._instantiate()
        ex = self._ex
        self.info = CircuitInfo(
            version=tuple(  # type: ignore[arg-type]
                int(ex[f](self._store)) if f in ex else 0 for f in ("getVersion", "getMinorVersion", "getPatchVersion")
            ),
            prime=self._read_prime(),
            n32=self._n32,
            witness_size=int(ex["getWitnessSize"](self._store)),
            input_size=int(ex["getInputSize"](self._store)),
        )
        if self.info.prime != R:
            raise FormatError(self.path, f"the circuit is over the prime {self.info.prime}, not BN254's scalar field r")

    def _instantiate(self) -> None:
        """A fresh store and instance (at start, and after the wasm gave up mid-calculation)."""
        import wasmtime

        store = wasmtime.Store(_get_engine())
        self._store = store
        self._errors: list[str] = []
        self._log_items: list[str] = []
        self._code: int | None = None
        imports: list[Any] = []
        for imp in self._module.imports:
            ty = imp.type
            if imp.module == "env" and imp.name == "memory" and isinstance(ty, wasmtime.MemoryType):
                imports.append(wasmtime.Memory(store, ty))
                continue
            fn = self._host_function(imp.module, imp.name)
            if fn is None or not isinstance(ty, wasmtime.FuncType) or ty.results:
                raise FormatError(
                    self.path, f"imports {imp.module}.{imp.name}, which is not part of the circom 2 witness-calculator protocol"
                )
            imports.append(wasmtime.Func(store, ty, fn))
        try:
            instance = wasmtime.Instance(store, self._module, imports)
        except (wasmtime.WasmtimeError, wasmtime.Trap) as exc:
            raise FormatError(self.path, f"cannot instantiate the wasm ({str(exc).splitlines()[0]})") from None
        ex = instance.exports(store)
        missing = [name for name in _REQUIRED_EXPORTS if name not in ex]
        if missing:
            raise FormatError(self.path, f"not a circom 2 witness calculator (no export {', '.join(missing)})")
        version = int(ex["getVersion"](store))
        if version != 2:
            raise FormatError(self.path, f"circom {version} witness calculators are not supported (circom 2 only)")
        self._ex = ex
        self._n32 = int(ex["getFieldNumLen32"](store))
        self._has_size = "getInputSignalSize" in ex
        helper = wasmtime.Instance(
            store,
            self._helper_module,
            [ex["init"], ex["getWitness"], ex["readSharedRWMemory"], ex["writeSharedRWMemory"], ex["setInputSignal"]],
        )
        hx = helper.exports(store)
        self._buf: wasmtime.Memory = hx["buf"]
        self._view = np.empty(0, np.uint8)
        self._run = hx["calculate"]

    # ---- imports -------------------------------------------------------------------------------

    def _host_function(self, module: str, name: str) -> Callable[..., None] | None:
        """The Python function behind one import of the circuit, or None if it is not one of circom's."""
        if module != "runtime":
            return None
        if name == "exceptionHandler":
            return self._on_exception
        if name == "printErrorMessage":
            return lambda: self._errors.append(self._message())
        if name == "writeBufferMessage":
            return self._on_log_message
        if name == "showSharedRWMemory":
            return lambda: self._log_items.append(str(self._read_shared()))
        if name in _NOOP_IMPORTS:
            return lambda *args: None
        return None

    def _on_exception(self, code: int) -> None:
        self._code = code
        raise _WasmGaveUp(code)

    def _on_log_message(self) -> None:
        msg = self._message()
        if msg == "\n":  # a log() call ends with a lone newline: the line is complete
            self.log_line(" ".join(self._log_items))
            self._log_items = []
        else:
            self._log_items.append(msg)

    def _message(self) -> str:
        """The wasm's pending message, read a character at a time as circom_runtime does."""
        get = self._ex["getMessageChar"]
        chars = []
        c = get(self._store)
        while c != 0:
            chars.append(chr(c & 0xFFFF))
            c = get(self._store)
        return "".join(chars)

    def _read_shared(self) -> int:
        """The field element in the shared read/write memory."""
        read = self._ex["readSharedRWMemory"]
        words = [int(read(self._store, j)) & 0xFFFFFFFF for j in range(self._n32)]
        return sum(w << (32 * j) for j, w in enumerate(words))

    def _read_prime(self) -> int:
        self._ex["getRawPrime"](self._store)
        return self._read_shared()

    # ---- calculation ---------------------------------------------------------------------------

    def _buffer(self, nbytes: int) -> np.ndarray:
        """The helper's memory as bytes, grown to hold at least ``nbytes`` (the view is kept until
        the memory grows or the instance is replaced: asking wasmtime for it costs microseconds)."""
        if self._view.size < nbytes:
            have = self._buf.data_len(self._store)
            if have < nbytes:
                self._buf.grow(self._store, -(-(nbytes - have) // 65536))
            size = self._buf.data_len(self._store)
            self._view = np.ctypeslib.as_array(self._buf.data_ptr(self._store), shape=(size,))
        return self._view

    def _signal(self, source: str, name: str, count: int) -> tuple[int, int]:
        """The hash halves (hi, lo) of input signal ``name``, checked to take ``count`` values
        (the circuit's sizes are asked once per name and kept: they are the wasm's, not the input's)."""
        known = self._signals.get(name)
        if known is None:
            h = fnv1a64(name)
            hi, lo = _i32(h >> 32), _i32(h & 0xFFFFFFFF)
            size = int(self._ex["getInputSignalSize"](self._store, hi, lo)) if self._has_size else None
            known = self._signals[name] = (hi, lo, size)
        hi, lo, size = known
        if size is not None:
            if size < 0 or (size == 0 and count):  # an unknown hash reads as -1 or 0, by the table's state
                raise FormatError(source, f"{name!r} is not an input signal of the circuit")
            if count != size:
                raise FormatError(
                    source, f"input {name} has {count} value{'s' * (count != 1)}, the circuit's signal has {size}"
                )
        return hi, lo

    def calculate(self, inputs: Mapping[str, Any], source: str = "<input>") -> np.ndarray:
        """The witness of one input, as an (witness_size, n32) uint32 array of standard-form limbs.

        ``inputs`` maps each input signal's name to a value or a nested list of values (a parsed
        input.json); ``source`` names it in errors. Raises FormatError(source, problem) for an
        unknown or missing signal, a wrong number of values, a value that is not an integer, or a
        circuit that rejects the input (circom's own message, e.g. ``Assert Failed.`` with the
        template and line).

        The input is encoded here as the helper's signal records (hash, count, values reduced
        modulo the prime) and the whole calculation, readout included, is one call into wasm.
        """
        return self._execute(inputs, source, self.info.witness_size)

    def run(self, inputs: Mapping[str, Any], source: str = "<input>") -> None:
        """:meth:`calculate` without reading the witness back: the circuit's own code and the
        input's encoding alone, which is what benchmarks compare with other engines."""
        self._execute(inputs, source, 0)

    def _execute(self, inputs: Mapping[str, Any], source: str, n: int) -> np.ndarray:
        """Set every input value, run the circuit and read witness values 0..n-1 back."""
        p, nbytes = self.info.prime, 4 * self._n32
        records = bytearray()
        count = 0
        for name, values in field_values(inputs, source, p).items():
            hi, lo = self._signal(source, name, len(values))
            records += struct.pack("<iiI", hi, lo, len(values))
            for x in values:
                records += x.to_bytes(nbytes, "little")
            count += len(values)
        if count < self.info.input_size:
            raise FormatError(
                source, f"missing input signals: {count} of the circuit's {self.info.input_size} input values are given"
            )
        out_bytes = n * nbytes
        try:
            buf = self._buffer(max(len(records), out_bytes))
            buf[: len(records)] = np.frombuffer(records, np.uint8)
            self._run(self._store, len(inputs), n, self._n32)
            out = buf[:out_bytes].view("<u4").reshape(n, self._n32).copy()
        except Exception as exc:
            raise self._failure(source, exc) from None
        return out

    def _failure(self, source: str, exc: Exception) -> FormatError:
        """The one-line error of a calculation the wasm gave up (the instance is replaced)."""
        if self._code is not None:
            text = _EXCEPTIONS.get(self._code, f"Unknown error (code {self._code}).")
            detail = "; ".join(line.strip() for e in self._errors for line in e.splitlines() if line.strip())
            problem = f"the circuit rejects the input: {text}" + (f" {detail}" if detail else "")
        else:
            problem = f"the witness calculator failed: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
        self._instantiate()
        return FormatError(source, problem)

    def check_key(self, key: Any) -> None:
        """Raise FormatError(wasm path, problem) unless this circuit's witness fits ``key`` (an
        opened key: its ``n_vars``), i.e. unless the wasm and the key come from one circuit. The
        prime needs no check: a calculator exists only for BN254's r, the prime of every key."""
        if self.info.witness_size != key.n_vars:
            raise FormatError(
                self.path,
                f"the circuit has {self.info.witness_size} witness values but the key "
                f"{os.path.basename(os.fspath(key.path))} expects {key.n_vars} (nVars): a wasm of another circuit",
            )

    def calculate_file(self, input_path: str | os.PathLike[str]) -> np.ndarray:
        """:meth:`calculate` on the input file at ``input_path`` (errors name that file)."""
        return self.calculate(read_input(input_path), os.fspath(input_path))

    def close(self) -> None:
        """Nothing to free: the instance goes with the object (the generator interface's close)."""


def calculator(wasm_path: str | os.PathLike[str]) -> WitnessCalculator:
    """This thread's :class:`WitnessCalculator` of ``wasm_path``, made on first use (per file version)."""
    path = os.fspath(wasm_path)
    cache: dict[str, WitnessCalculator] = getattr(_local, "calculators", None) or {}
    _local.calculators = cache
    wc = cache.get(path)
    if wc is None or wc._module is not _compile(path)[0]:
        wc = cache[path] = WitnessCalculator(path)
    return wc
