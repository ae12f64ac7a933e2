"""circom's native (C++) witness generators: a folder written by ``circom --c``, or its binary.

A ``<name>_cpp/`` folder (``<name>.cpp``, ``<name>.dat``, circom's runtime and its Makefile) is
built once per host into distprove's cache (:func:`distprove.cachedir.cache_dir`, under
``witness/<name>-<hash of the folder's sources>/``), never in the user's folder: the folder's own
Makefile compiles the circuit and circom's runtime, and :file:`native_driver.cpp` (distprove's,
in place of circom's ``main.cpp``) is linked with them. That driver stays alive and computes
input after input: it loads ``<name>.dat`` once, takes each input's values over its stdin and
returns the witness over its stdout, so an input costs no process start and no file round trip.
Inputs are read here, as the wasm calculator reads them (:mod:`distprove.witness.inputs`: snarkjs's
rules), and sent as values; the driver checks the names and sizes against the circuit.

The driver is linked statically (``-static ... -lgmp``, libgmp.a comes with libgmp-dev), so the
built cache runs on hosts that have neither gmp nor a compiler, GPU workers for instance: build
once where the tools are (``python -m distprove.witness.native FOLDER...`` prints each build's
folder), carry the cache's ``witness/`` folder there into ``$DISTPROVE_CACHE_DIR/witness/``, with
the same ``_cpp`` folder: the build is found by the hash of that folder's sources, of this
distprove's driver source and of ``distprove.witness.build-flags``, so all three must be the same
on both hosts. Where no static libc or gmp exists the driver is linked dynamically, and says so
in the log.

A plain binary (the user built the folder themselves; ``<binary>.dat`` beside it) runs once per
input: ``BIN input.json out.wtns``, the input rewritten with the values as read here, the output
in a temporary folder on tmpfs where there is one.

Either way an input fails alone, with one line: a value or signal the circuit does not take, a
circuit assertion (circom's C++ ``assert`` aborts the process: its message is read from the
process's stderr and a fresh driver starts for the next input), a crash, or an input that runs
longer than ``distprove.witness.timeout`` seconds (its process is killed).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any, Callable

import numpy as np

from distprove.bn254 import R
from distprove.cachedir import cache_dir
from distprove.errors import FormatError
from distprove.witness.inputs import field_values, fnv1a64, read_input

log = logging.getLogger(__name__)

DRIVER_SOURCE = Path(__file__).with_name("native_driver.cpp")
SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".asm", ".dat")
"""The files of a ``circom --c`` folder that make a build (with its ``Makefile``); build outputs
a user's own ``make`` left there (``*.o``, the binary) are no part of it."""
RUNTIME_OBJECTS = ("calcwit.o", "fr.o", "fr_asm.o")
"""circom's runtime objects the driver links, made by the folder's Makefile (main.o is not)."""
_N8 = 32
_ANSWER_OK, _ANSWER_UNKNOWN, _ANSWER_SIZE, _ANSWER_MISSING = 0, 1, 2, 3

_MISSING_TOOLS: tuple[tuple[str, str], ...] = (
    (r"\bmake: (?:not found|No such file)|No such file or directory: 'make'", "make is missing (apt-get install make)"),
    (r"\bg\+\+: (?:not found|No such file|command not found)|No such file or directory: 'g\+\+'",
     "g++ is missing (apt-get install g++)"),
    (r"cannot execute .(?:as|ld|collect2).: ", "g++'s assembler or linker is missing (apt-get install binutils)"),
    (r"\bnasm: (?:not found|No such file|command not found)", "nasm is missing (apt-get install nasm)"),
    (r"gmp\.h: No such file", "gmp.h is missing (apt-get install libgmp-dev)"),
    (r"nlohmann/json\.hpp: No such file", "nlohmann/json.hpp is missing (apt-get install nlohmann-json3-dev)"),
    (r"cannot find -lgmp", "libgmp is missing (apt-get install libgmp-dev)"),
)
"""What a failed build's output says, as the one missing tool or header it names."""


def _tmpfs() -> str | None:
    """A writable tmpfs folder (/dev/shm) for per-input scratch files, or None (the default temp folder)."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


# ---- what a path is ----------------------------------------------------------------------------


def circuit_name(folder: Path) -> str:
    """The circuit's name in a folder written by ``circom --c``: the ``<name>`` of its
    ``<name>.dat`` and ``<name>.cpp``. Raises FormatError when the folder is not one."""
    names = sorted(p.stem for p in folder.glob("*.dat") if (folder / f"{p.stem}.cpp").is_file())
    if len(names) != 1 or not (folder / "Makefile").is_file():
        raise FormatError(
            folder, "not a folder written by circom --c (expected one <name>.cpp with its <name>.dat, and a Makefile)"
        )
    return names[0]


DEFAULT_CFLAGS = "-std=c++11 -O3 -I."
"""The compiler flags of circom's Makefile, which the driver is compiled with too."""


def build_flags() -> str | None:
    """``distprove.witness.build-flags``: compiler flags replacing the Makefile's, or None."""
    from distprove import config

    flags = config.get("witness.build-flags", None)
    return str(flags) if flags else None


def _build_inputs(folder: Path) -> list[Path]:
    """The files of a ``circom --c`` folder its build reads (sources and the Makefile), by name."""
    return sorted(p for p in folder.iterdir() if p.is_file() and (p.suffix in SOURCE_SUFFIXES or p.name == "Makefile"))


def source_hash(folder: Path, cflags: str | None = None) -> str:
    """SHA-256 over the folder's build inputs (name and bytes of each, in name order), the
    driver's source and the compiler flags that replace the Makefile's: the build's cache key."""
    h = hashlib.sha256(DRIVER_SOURCE.read_bytes())
    h.update(f"\0cflags\0{cflags or ''}".encode())
    for p in _build_inputs(folder):
        data = p.read_bytes()
        h.update(f"\0{p.name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


# ---- the build ---------------------------------------------------------------------------------


def _build_failure(folder: Path, output: str) -> FormatError:
    """The one line of a failed build: the tool or header it lacked, else the compiler's first error."""
    for pattern, problem in _MISSING_TOOLS:
        if re.search(pattern, output):
            return FormatError(folder, f"cannot build the native witness generator: {problem}")
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    first = next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else "no output")
    return FormatError(folder, f"cannot build the native witness generator: {first[:200]}")


def _run(cmd: list[str], cwd: Path) -> tuple[bool, str]:
    """Run one build step: (whether it succeeded, its output); a missing program is a failure."""
    try:
        res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, errors="replace")
    except FileNotFoundError:
        return False, f"No such file or directory: '{cmd[0]}'"
    return res.returncode == 0, res.stdout + res.stderr


def _compile_into(folder: Path, name: str, work: Path, cflags: str | None) -> None:
    """Build the driver of ``folder`` in ``work`` (a fresh folder): ``work/driver`` and
    ``work/<name>.dat``, compiled with ``cflags`` (None: the Makefile's). Raises
    FormatError(folder, the one missing tool or first error)."""
    src = work / "src"
    src.mkdir()
    for p in _build_inputs(folder):
        shutil.copyfile(p, src / p.name)
    shutil.copyfile(DRIVER_SOURCE, src / DRIVER_SOURCE.name)
    from dask.system import CPU_COUNT

    jobs = str(min(4, CPU_COUNT))
    overrides = [f"CFLAGS={cflags}"] if cflags else []
    ok, out = _run(["make", "-j", jobs, *overrides, *RUNTIME_OBJECTS, f"{name}.o"], src)
    if ok:
        ok, out = _run(["g++", *(cflags or DEFAULT_CFLAGS).split(), "-c", DRIVER_SOURCE.name, "-o", "driver.o"], src)
    objects = ["driver.o", *RUNTIME_OBJECTS, f"{name}.o"]
    if ok:
        ok, out = _run(["g++", "-static", "-o", "../driver", *objects, "-lgmp", "-pthread"], src)
        if not ok:
            static_out = out
            ok, out = _run(["g++", "-o", "../driver", *objects, "-lgmp", "-pthread"], src)
            if ok:
                log.warning("%s: native witness generator linked dynamically (no static link: %s); "
                            "hosts that run it need libgmp", folder, static_out.strip().splitlines()[-1][:120])
    if not ok:
        raise _build_failure(folder, out)
    shutil.copyfile(folder / f"{name}.dat", work / f"{name}.dat")
    shutil.rmtree(src)


def built_driver(folder: str | os.PathLike[str]) -> Path:
    """The built driver of a ``circom --c`` folder, building it on first use on this host.

    The build lives in ``<cache>/witness/<name>-<hash>/`` (``driver`` and a copy of
    ``<name>.dat``), keyed by :func:`source_hash` (with :func:`build_flags`). Concurrent callers of one host (threads or
    processes) build once: a file lock per key serialises them, and the build goes to a temporary
    folder renamed into place when complete, so no reader ever sees half a build.
    Raises FormatError(folder, problem) for a folder that is not circom's or a failed build.
    """
    path = Path(os.path.abspath(folder))
    name = circuit_name(path)
    cflags = build_flags()
    key = source_hash(path, cflags)
    root = cache_dir() / "witness"
    final = root / f"{name}-{key[:24]}"
    if (final / "driver").is_file():
        return final
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = open(root / f".{final.name}.lock", "a")
    except OSError as exc:
        raise FormatError(root, f"cannot use the build cache: {exc.strerror or exc}") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "driver").is_file():
            return final
        work = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
        try:
            log.info("%s: building the native witness generator into %s", path, final)
            _compile_into(path, name, work, cflags)
            work.chmod(0o755)  # mkdtemp's 0700 would keep a shared or carried cache from other users
            os.rename(work, final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return final


# ---- inputs ------------------------------------------------------------------------------------


def encode_request(values: dict[str, list[int]]) -> bytes:
    """The driver's request for one input: per signal its name's hash, its count and its values."""
    parts = [struct.pack("<I", len(values))]
    for name, vals in values.items():
        parts.append(struct.pack("<QI", fnv1a64(name), len(vals)))
        parts.extend(x.to_bytes(_N8, "little") for x in vals)
    return b"".join(parts)


# ---- failures ----------------------------------------------------------------------------------

_ASSERT_LINE = re.compile(r"Failed assert in template/function (\S+) line (\d+)")
_ABORT_LINE = re.compile(r"(Assertion .* failed\.|terminate called .*|what\(\): .*|distprove driver: .*)")


def _death(returncode: int, stderr: str) -> str:
    """The one-line reason a generator process that ended mid-input gives (no log line, which may
    hold values, is repeated: only circom's assertion text, the C++ runtime's own abort line or
    the driver's own error)."""
    m = _ASSERT_LINE.search(stderr)
    if m:
        return f"the circuit rejects the input: Assert Failed in template {m.group(1)} line {m.group(2)}"
    if returncode < 0:
        try:
            how = f"died of {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"died of signal {-returncode}"
    else:
        how = f"exited with status {returncode}"
    lines = [m.group(1) for m in map(_ABORT_LINE.search, stderr.splitlines()) if m]
    return f"the native witness generator {how}" + (f": {lines[-1][:200]}" if lines else "")


class _Stderr:
    """A process's stderr as an unlinked temporary file (tmpfs where there is one), read and
    emptied after each input, so the process never blocks on a full pipe."""

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile(dir=_tmpfs())
        fd = self.file.fileno()
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)

    def take(self) -> str:
        """What the process wrote since the last take."""
        fd = self.file.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, size, 0) if size else b""
        os.ftruncate(fd, 0)
        return data.decode("utf-8", "replace")

    def close(self) -> None:
        self.file.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End a generator process (its stdin closed first: a driver then exits by itself)."""
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    try:
        proc.wait(timeout=1)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ---- the generator -----------------------------------------------------------------------------


class _Timeout(Exception):
    pass


class NativeGenerator:
    """The witness generator of a ``circom --c`` folder (built into the cache, run as a
    long-lived driver) or of the binary built from one (one process per input).

    Implements the witness-generator interface: :meth:`calculate_file`, :meth:`check_key`,
    :meth:`close`. Not thread-safe: one per thread. ``timeout``: seconds an input may take
    (None: ``distprove.witness.timeout``). ``log_line`` receives each line the circuit's
    ``log()`` prints (default: this module's logger at INFO).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        timeout: float | None = None,
        log_line: Callable[[str], None] | None = None,
    ) -> None:
        self.path = os.fspath(path)
        if timeout is None:
            from distprove import config

            timeout = float(config.get("witness.timeout"))
        self.timeout = timeout
        self.log_line = log_line or (lambda line: log.info("%s: %s", self.path, line))
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: _Stderr | None = None
        self._finalizer: weakref.finalize | None = None
        self._key_size: int | None = None
        self._key_name = ""
        p = Path(self.path)
        if p.is_dir():
            built = built_driver(p)
            self._command = [str(built / "driver"), str(built / f"{circuit_name(p)}.dat")]
            self._binary: str | None = None
            self.witness_size = self._start()[1]
        elif p.is_file() and os.access(p, os.X_OK) and Path(f"{self.path}.dat").is_file():
            self._binary = os.path.abspath(self.path)
            self.witness_size = 0  # learnt from its first witness
        else:
            raise FormatError(
                self.path, "not a native witness generator: expected a folder written by circom --c, "
                "or the binary built from one with <binary>.dat beside it"
            )

    # ---- the driver process --------------------------------------------------------------------

    def _start(self) -> tuple[int, int, int]:
        """Start a driver and read its hello: (prime, witness size, input values)."""
        self._stderr = _Stderr()
        try:
            self._proc = subprocess.Popen(
                self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr.file, bufsize=0
            )
        except OSError as exc:
            self._discard()
            raise FormatError(self.path, f"cannot start the native witness generator: {exc.strerror or exc}") from None
        self._finalizer = weakref.finalize(self, _stop, self._proc)
        try:
            head = self._read(8)
            if head[:4] != b"DPW1":
                self._discard()
                raise FormatError(self.path, "the native witness generator's driver does not speak distprove's protocol")
            n8 = struct.unpack_from("<I", head, 4)[0]
            rest = self._read(n8 + 8)
        except (EOFError, _Timeout) as exc:
            if isinstance(exc, _Timeout):
                reason = f"the native witness generator did not start within {self.timeout:g} s"
            else:
                reason = _death(self._end(), self._stderr.take())
            self._discard()
            raise FormatError(self.path, reason) from None
        prime = int.from_bytes(rest[:n8], "little")
        witness_size, input_size = struct.unpack_from("<II", rest, n8)
        if n8 != _N8 or prime != R:
            self._discard()
            raise FormatError(self.path, f"the circuit is over the prime {prime}, not BN254's scalar field r")
        return prime, witness_size, input_size

    def _read(self, n: int, out: memoryview | None = None) -> bytes | memoryview:
        """``n`` bytes of the driver's answer (into ``out`` when given) within the timeout.
        Raises EOFError when the driver ended first, _Timeout when the time is up."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        buf = out if out is not None else memoryview(bytearray(n))
        got = 0
        deadline = time.monotonic() + self.timeout
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise _Timeout
            k = os.readv(fd, [buf[got:n]])
            if k == 0:
                raise EOFError
            got += k
        return buf if out is not None else bytes(buf)

    def _end(self) -> int:
        """The ended driver's exit status (waited for)."""
        assert self._proc is not None
        try:
            return self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            return self._proc.wait()

    def _discard(self) -> None:
        """Kill and forget the driver (a fresh one starts for the next input)."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            _stop(self._proc)
            self._proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _timed_out(self, source: str) -> FormatError:
        """The error of an input that ran past ``distprove.witness.timeout``."""
        return FormatError(
            source, f"the native witness generator took more than {self.timeout:g} s (distprove.witness.timeout); stopped"
        )

    def _flush_log(self, text: str) -> None:
        """Hand the circuit's log() lines in a process's stderr to ``log_line`` (not the lines
        of a failure, which its error carries)."""
        for line in text.splitlines():
            if line.strip() and not _ASSERT_LINE.search(line) and not _ABORT_LINE.search(line):
                self.log_line(line)

    def _drive(self, inputs: dict[str, Any], source: str) -> np.ndarray:
        """One input through the long-lived driver."""
        values = field_values(inputs, source, R)
        names = list(values)
        request = encode_request(values)
        if self._proc is None:
            self._start()
        assert self._proc is not None and self._proc.stdin is not None and self._stderr is not None
        try:
            view = memoryview(request)
            while view:  # a pipe may take a large request in parts
                view = view[os.write(self._proc.stdin.fileno(), view):]
            status = struct.unpack("<I", self._read(4))[0]
            if status == _ANSWER_OK:
                out = np.empty((self.witness_size, 8), "<u4")
                self._read(out.nbytes, memoryview(out.view(np.uint8).reshape(-1)))
                self._flush_log(self._stderr.take())
                return out
            if status == _ANSWER_UNKNOWN:
                a, b = struct.unpack("<I", self._read(4))[0], 0
            elif status in (_ANSWER_SIZE, _ANSWER_MISSING):
                a, b = struct.unpack("<II", self._read(8))
            else:
                self._discard()
                raise FormatError(source, f"the native witness generator answered {status}, not a status it knows")
        except _Timeout:
            self._flush_log(self._stderr.take())
            self._discard()
            raise self._timed_out(source) from None
        except (EOFError, BrokenPipeError):
            reason = _death(self._end(), text := self._stderr.take())
            self._flush_log(text)
            self._discard()
            raise FormatError(source, reason) from None
        self._flush_log(self._stderr.take())
        if status == _ANSWER_UNKNOWN:
            raise FormatError(source, f"{names[a]!r} is not an input signal of the circuit")
        if status == _ANSWER_SIZE:
            count = len(values[names[a]])
            raise FormatError(source, f"input {names[a]} has {count} value{'s' * (count != 1)}, the circuit's signal has {b}")
        raise FormatError(source, f"missing input signals: {a} of the circuit's {b} input values are given")

    # ---- a plain binary ------------------------------------------------------------------------

    def _run_binary(self, inputs: dict[str, Any], source: str) -> np.ndarray:
        """One input through a process of the user's own binary (input and witness files in tmpfs)."""
        from distprove.formats.wtns import read_wtns

        assert self._binary is not None
        normal = {name: [str(x) for x in vals] for name, vals in field_values(inputs, source, R).items()}
        with tempfile.TemporaryDirectory(prefix="distprove-wtns-", dir=_tmpfs()) as tmp:
            in_path, out_path = os.path.join(tmp, "input.json"), os.path.join(tmp, "witness.wtns")
            with open(in_path, "w", encoding="utf-8") as f:
                json.dump(normal, f)
            stderr = _Stderr()
            try:
                proc = subprocess.Popen([self._binary, in_path, out_path], stdin=subprocess.DEVNULL,
                                        stdout=stderr.file, stderr=stderr.file)
                try:
                    rc = proc.wait(timeout=self.timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    self._flush_log(stderr.take())
                    raise self._timed_out(source) from None
                text = stderr.take()
            except OSError as exc:
                raise FormatError(self.path, f"cannot run the native witness generator: {exc.strerror or exc}") from None
            finally:
                stderr.close()
            self._flush_log(text)
            if rc != 0 or not os.path.isfile(out_path):
                raise FormatError(source, _death(rc, text))
            try:
                w = read_wtns(out_path)
            except FormatError as exc:
                raise FormatError(self.path, f"wrote a witness that is not one: {exc.problem}") from None
            values = np.array(w.values)
        if self.witness_size == 0:
            self.witness_size = w.n_witness
        self._check_size(w.n_witness)
        return values

    # ---- the interface -------------------------------------------------------------------------

    def calculate(self, inputs: dict[str, Any], source: str = "<input>") -> np.ndarray:
        """The witness of one input (signal name -> value or nested list of values), an
        (witness_size, 8) uint32 array of standard-form limbs. Raises FormatError(source, problem)."""
        if self._binary is not None:
            return self._run_binary(inputs, source)
        return self._drive(inputs, source)

    def calculate_file(self, input_path: str | os.PathLike[str]) -> np.ndarray:
        """:meth:`calculate` on the input file at ``input_path`` (errors name that file)."""
        return self.calculate(read_input(input_path), os.fspath(input_path))

    def _check_size(self, witness_size: int) -> None:
        if self._key_size is not None and witness_size != self._key_size:
            raise FormatError(
                self.path,
                f"the circuit has {witness_size} witness values but the key {self._key_name} expects "
                f"{self._key_size} (nVars): a generator of another circuit",
            )

    def check_key(self, key: Any) -> None:
        """Raise FormatError(generator path, problem) unless this generator's witnesses fit ``key``
        (its ``n_vars``; the prime is BN254's r for every key, and the driver reports the
        circuit's). A plain binary says its size only in a witness: it is checked against the key
        with its first witness, and every later one."""
        self._key_size, self._key_name = int(key.n_vars), os.path.basename(os.fspath(key.path))
        if self.witness_size:
            self._check_size(self.witness_size)

    def close(self) -> None:
        """End the driver process (a later input starts a fresh one)."""
        self._discard()


def main(argv: list[str] | None = None) -> int:
    """``python -m distprove.witness.native FOLDER...``: build each ``circom --c`` folder into the
    cache (as a first use would) and print its build folder, e.g. to fill a cache on a host with
    the compilers and carry it to hosts without them."""
    import sys

    status = 0
    for folder in sys.argv[1:] if argv is None else argv:
        try:
            print(built_driver(folder))
        except FormatError as exc:
            print(exc, file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
