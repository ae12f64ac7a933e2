"""Witness generators by path (distprove.witness.generators): which generator a path names, the
one beside a key (a native one before a .wasm), and that the CLI, the batch options and the
witness pool all go through that dispatch.

The native generator's own behaviour is tested with it; here a stand-in ``NativeGenerator``
(the wasm calculator of a fixture, under the native path) is put where the dispatch imports it
from, so each test shows which class a path reached and that its witness is the one written.
"""

from __future__ import annotations

import shutil
import sys
import threading
import types
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from distprove.cli import main
from distprove.errors import FormatError
from distprove.formats.wtns import read_wtns
from distprove.witness import generators
from distprove.witness.discovery import discover_inputs, generator_beside
from distprove.witness.generators import NOT_A_GENERATOR, calculate, generator, kind
from distprove.witness.wasm import WitnessCalculator

DATA = Path(__file__).parent / "data"
WASM = DATA / "mul_chain_1k" / "circuit.wasm"
INPUT = DATA / "mul_chain_1k" / "inputs" / "input_0.json"
EXPECTED = DATA / "mul_chain_1k" / "witnesses" / "witness_0.wtns"
"""INPUT's witness as snarkjs wrote it."""


class StandIn:
    """A native generator stand-in: mul_chain_1k's wasm calculator, named by the native path."""

    made: list[str] = []

    def __init__(self, path: str) -> None:
        self.path = path
        self.closed = False
        self._wasm = WitnessCalculator(WASM)
        StandIn.made.append(path)

    def calculate_file(self, input_path: str) -> np.ndarray:
        return self._wasm.calculate_file(input_path)

    def check_key(self, key: object) -> None:
        try:
            self._wasm.check_key(key)
        except FormatError as exc:
            raise FormatError(self.path, exc.problem) from None

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def native(monkeypatch: pytest.MonkeyPatch) -> type[StandIn]:
    """``distprove.witness.native.NativeGenerator`` as :class:`StandIn`, this thread's cache empty."""
    module = types.ModuleType("distprove.witness.native")
    module.NativeGenerator = StandIn  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "distprove.witness.native", module)
    monkeypatch.setattr(generators, "_local", threading.local())
    StandIn.made = []
    return StandIn


def _cpp_folder(where: Path, name: str = "circuit") -> Path:
    """A folder as ``circom --c`` writes it (its files' contents do not matter to the dispatch)."""
    folder = where / f"{name}_cpp"
    folder.mkdir()
    for f in ("main.cpp", "Makefile", f"{name}.dat", f"{name}.cpp", "calcwit.cpp"):
        (folder / f).write_text("")
    return folder


def _binary(where: Path, name: str = "circuit") -> Path:
    """A built generator: an executable with ``<name>.dat`` beside it."""
    exe = where / name
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    (where / f"{name}.dat").write_text("")
    return exe


def test_a_wasm_is_the_wasm_calculator_of_this_thread() -> None:
    gen = generator(WASM)
    assert isinstance(gen, WitnessCalculator) and kind(WASM) == generators.WASM
    assert generator(str(WASM)) is gen  # made once per thread
    other: list[object] = []
    t = threading.Thread(target=lambda: other.append(generator(WASM)))
    t.start()
    t.join()
    assert other[0] is not gen and isinstance(other[0], WitnessCalculator)


def test_a_circom_c_folder_and_a_binary_reach_the_native_generator(tmp_path: Path, native: type[StandIn]) -> None:
    folder, exe = _cpp_folder(tmp_path), _binary(tmp_path / "circuit_cpp", "circuit")
    for path in (folder, exe):
        assert kind(path) == generators.NATIVE
        gen = generator(path)
        assert isinstance(gen, StandIn) and gen.path == str(path) and generator(str(path)) is gen
    assert native.made == [str(folder), str(exe)]
    assert np.array_equal(calculate(folder, INPUT), read_wtns(EXPECTED).values)


@pytest.mark.parametrize("what", ["text file", "plain folder", "executable without .dat", "missing"])
def test_anything_else_is_one_line_naming_the_path(tmp_path: Path, native: type[StandIn], what: str) -> None:
    path = tmp_path / "gen"
    if what == "text file":
        path.write_text("hello")
    elif what == "plain folder":
        path.mkdir()
        (path / "main.cpp").write_text("")  # no Makefile, no .dat: not circom --c's
    elif what == "executable without .dat":
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    with pytest.raises(FormatError) as err:
        generator(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: ")
    assert (NOT_A_GENERATOR in text) if what != "missing" else ("no such witness generator" in text)
    assert native.made == []


def test_the_generator_beside_a_key_prefers_a_native_one(tmp_path: Path) -> None:
    key = tmp_path / "circuit_final.zkey"
    shutil.copy(DATA / "mul_chain_1k" / "circuit_final.zkey", key)
    shutil.copy(WASM, tmp_path)
    assert generator_beside(str(key)) == (str(tmp_path / "circuit.wasm"), "")
    (tmp_path / "notes_cpp").mkdir()  # named like one, but not written by circom --c
    assert generator_beside(str(key)) == (str(tmp_path / "circuit.wasm"), "")
    folder = _cpp_folder(tmp_path)
    assert generator_beside(str(key)) == (str(folder), "")
    exe = _binary(tmp_path)
    assert generator_beside(str(key)) == (str(exe), "")
    _binary(tmp_path, "other")
    found, why = generator_beside(str(key))
    assert found == "" and why == f"2 generator binaries (with a .dat) beside the key in {tmp_path}; pass --witness-gen"


def test_an_input_folder_takes_the_cpp_folder_beside_its_key(tmp_path: Path, native: type[StandIn]) -> None:
    shutil.copy(DATA / "mul_chain_1k" / "circuit_final.zkey", tmp_path)
    shutil.copy(WASM, tmp_path)
    shutil.copy(INPUT, tmp_path)
    folder = _cpp_folder(tmp_path)
    assert [(j.generator, j.error) for j in discover_inputs(tmp_path)] == [(str(folder), "")]
    given = [(j.generator, j.error) for j in discover_inputs(tmp_path, generator=tmp_path / "circuit.wasm")]
    assert given == [(str(tmp_path / "circuit.wasm"), "")]  # a generator given wins
    with pytest.raises(FormatError, match=f"{tmp_path / 'input_0.json'}: {NOT_A_GENERATOR}"):
        discover_inputs(tmp_path, generator=tmp_path / "input_0.json")


def test_wtns_calculate_takes_any_generator(tmp_path: Path, native: type[StandIn]) -> None:
    folder = _cpp_folder(tmp_path)
    out = tmp_path / "out.wtns"
    res = CliRunner().invoke(main, ["wtns", "calculate", str(folder), str(INPUT), str(out)])
    assert res.exit_code == 0, res.output
    assert native.made == [str(folder)]
    assert out.read_bytes() == (EXPECTED).read_bytes()
    res = CliRunner().invoke(main, ["wtns", "calculate", str(INPUT), str(INPUT), str(tmp_path / "no.wtns")])
    assert res.exit_code != 0 and res.output.strip() == f"error: {INPUT}: {NOT_A_GENERATOR}"
    assert not (tmp_path / "no.wtns").exists()


def test_wtns_calculate_on_a_folder_takes_a_native_generator(tmp_path: Path, native: type[StandIn]) -> None:
    folder = _cpp_folder(tmp_path)
    res = CliRunner().invoke(main, ["wtns", "calculate", "-j", "1", str(folder), str(INPUT.parent), str(tmp_path / "w")])
    assert res.exit_code == 0, res.output
    for wtns in sorted((tmp_path / "w").iterdir()):
        i = wtns.stem.removeprefix("input_")
        assert wtns.read_bytes() == (DATA / "mul_chain_1k" / "witnesses" / f"witness_{i}.wtns").read_bytes()
    assert len(list((tmp_path / "w").iterdir())) == len(list(INPUT.parent.glob("*.json")))


def test_batch_options_wasm_is_witness_gen_for_a_wasm(tmp_path: Path) -> None:
    from distprove.cluster.batching import BatchOptions

    assert BatchOptions(wasm=str(WASM)).witness_gen == str(WASM)
    assert BatchOptions(witness_gen=str(tmp_path)).witness_gen == str(tmp_path)
    with pytest.raises(FormatError, match="not a .wasm file"):
        BatchOptions(wasm=str(tmp_path))
    with pytest.raises(ValueError, match="pass one of them"):
        BatchOptions(wasm=str(WASM), witness_gen=str(tmp_path))
    res = CliRunner().invoke(main, ["batch", str(tmp_path), str(tmp_path), "--wasm", str(WASM), "--witness-gen", str(tmp_path)])
    assert res.exit_code == 2 and "--wasm is --witness-gen for a .wasm" in res.output


def test_the_witness_pool_computes_with_the_generator_named(tmp_path: Path, native: type[StandIn]) -> None:
    """Off a worker the pool's task computes in turn here, through the same dispatch as its processes."""
    from distprove.cluster.inputbatch import compute_witnesses
    from distprove.witness.pool import check_circuit, forget_batch

    folder = _cpp_folder(tmp_path)
    out = tmp_path / "scratch" / "a.wtns"
    try:
        assert compute_witnesses(str(folder), [(str(INPUT), str(out))], batch="generator-test") == [""]
    finally:
        forget_batch("generator-test")
    assert native.made == [str(folder)]
    assert np.array_equal(read_wtns(out).values, read_wtns(EXPECTED).values)
    n_vars = read_wtns(out).values.shape[0]
    check_circuit(str(folder), n_vars, "k.zkey")
    with pytest.raises(FormatError, match=f"{folder}: the circuit has {n_vars} witness values but the key k.zkey expects"):
        check_circuit(str(folder), n_vars + 1, "k.zkey")


def test_a_batch_with_no_generator_is_one_line_before_any_cluster(tmp_path: Path) -> None:
    shutil.copy(DATA / "mul_chain_1k" / "circuit_final.zkey", tmp_path)
    shutil.copy(INPUT, tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("not a circuit")
    res = CliRunner().invoke(main, ["batch", str(tmp_path / "circuit_final.zkey"), str(tmp_path), "--witness-gen", str(notes)])
    assert res.exit_code == 1 and res.output.strip() == f"error: {notes}: {NOT_A_GENERATOR}"
    assert not (tmp_path / "proofs").exists()
