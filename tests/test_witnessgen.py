"""Witness calculation from a circuit's wasm and an input.json (distprove.witness.wasm).

The oracle is snarkjs 0.7.6: the fixtures' witnesses are what ``snarkjs wtns calculate`` wrote
for their inputs, and, when snarkjs is installed, fresh random inputs go through both.
``checks/checks.wasm`` (circuits/checks.circom) has a 2x2 input array, a ``log()`` and an assert.
"""

from __future__ import annotations

import json
import shutil
import random
import subprocess
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import SNARKJS_TIMEOUT_S
from distprove import bn254
from distprove.cli import main
from distprove.errors import FormatError
from distprove.formats.wtns import read_wtns
from distprove.prover import prove
from distprove.verifier import verify
from distprove.witness.generators import calculate, calculate_wtns
from distprove.witness.wasm import WitnessCalculator, _compile, calculator, fnv1a64

DATA = Path(__file__).parent / "data"
FIXTURES = ["mul_chain_1k", "poseidon_k4", "bits_k16", "merkle_d20"]
CHECKS = DATA / "checks" / "checks.wasm"


def _wasm(name: str) -> Path:
    return DATA / "mini" / "mini.wasm" if name == "mini" else DATA / name / "circuit.wasm"


def _snarkjs_cases() -> list[tuple[str, Path, Path]]:
    cases = [("mini", DATA / "mini" / "input.json", DATA / "mini" / "witness.wtns")]
    for name in FIXTURES:
        for inp in sorted((DATA / name / "inputs").glob("input_*.json")):
            cases.append((name, inp, DATA / name / "witnesses" / inp.name.replace("input_", "witness_").replace(".json", ".wtns")))
    return cases


def _write(tmp_path: Path, obj: Any, name: str = "input.json") -> Path:
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def test_fnv1a64_known_values() -> None:
    assert fnv1a64("") == 0xCBF29CE484222325
    assert fnv1a64("a") == 0xAF63DC4C8601EC8C
    assert fnv1a64("foobar") == 0x85944171F73967E8


@pytest.mark.parametrize(("name", "inp", "wtns"), _snarkjs_cases(), ids=lambda x: x if isinstance(x, str) else x.stem)
def test_byte_identical_to_snarkjs_fixture(name: str, inp: Path, wtns: Path, tmp_path: Path) -> None:
    out = tmp_path / "w.wtns"
    values = calculate_wtns(_wasm(name), inp, out)
    assert out.read_bytes() == wtns.read_bytes()
    assert np.array_equal(values, read_wtns(wtns).values)


def test_info_matches_the_key() -> None:
    from distprove.keystore import open_key

    info = calculator(_wasm("mul_chain_1k")).info
    key = open_key(DATA / "mul_chain_1k" / "circuit_final.zkey")
    assert (info.witness_size, info.prime, info.n32, info.input_size) == (key.n_vars, bn254.R, 8, 1)
    assert info.version[0] == 2
    calculator(_wasm("mul_chain_1k")).check_key(key)
    with pytest.raises(FormatError, match=r"mini.wasm: the circuit has 6 witness values but the key circuit_final.zkey expects 1023"):
        calculator(_wasm("mini")).check_key(key)


def test_instance_is_reused_and_survives_failures(tmp_path: Path) -> None:
    """Many inputs through one instance, an assertion failure between them: same witnesses as fresh."""
    wc = WitnessCalculator(CHECKS)
    good = [_write(tmp_path, {"a": [[k, 2], [3, 4]], "b": k + 10}, f"g{k}.json") for k in range(3)]
    bad = _write(tmp_path, {"a": [[1, 2], [3, 4]], "b": 7}, "bad.json")
    first = [wc.calculate_file(p) for p in good]
    with pytest.raises(FormatError):
        wc.calculate_file(bad)
    again = [wc.calculate_file(p) for p in reversed(good)][::-1]
    for a, b, p in zip(first, again, good):
        assert np.array_equal(a, b)
        assert np.array_equal(a, WitnessCalculator(CHECKS).calculate_file(p))
    assert bn254.ints_from_limbs(first[2])[1] == 2 * 4 + 12  # c = a[0][0]*a[1][1] + b


def test_run_is_calculate_without_the_readout(tmp_path: Path) -> None:
    """run() executes the circuit (its log line, its assertion) and leaves the instance as calculate() needs it."""
    lines: list[str] = []
    wc = WitnessCalculator(CHECKS, log_line=lines.append)
    assert wc.run({"a": [[16, 0], [0, 0]], "b": 5}) is None
    assert lines == ["a00 16 b 5"]
    with pytest.raises(FormatError, match=r"^x.json: the circuit rejects the input: Assert Failed"):
        wc.run({"a": [[1, 2], [3, 4]], "b": 7}, "x.json")
    with pytest.raises(FormatError, match=r"^y.json: input a has 3 values, the circuit's signal has 4$"):
        wc.run({"a": [1, 2, 3], "b": 1}, "y.json")  # a's size is known from the first input: still checked
    with pytest.raises(FormatError, match=r"^z.json: 'x' is not an input signal of the circuit$"):
        WitnessCalculator(CHECKS).run({"a": [[1, 2], [3, 4]], "b": 1, "x": 1}, "z.json")  # on a fresh instance too
    inp = {"a": [[3, 2], [3, 4]], "b": 9}
    assert np.array_equal(wc.calculate(inp), WitnessCalculator(CHECKS).calculate(inp))


def test_calculator_is_per_thread() -> None:
    wasm = _wasm("mul_chain_1k")
    inp = DATA / "mul_chain_1k" / "inputs" / "input_0.json"
    expected = read_wtns(DATA / "mul_chain_1k" / "witnesses" / "witness_0.wtns").values
    assert calculator(wasm) is calculator(wasm)
    seen: dict[int, Any] = {}

    def work(i: int) -> None:
        seen[i] = (calculator(wasm), [calculate(wasm, inp) for _ in range(3)])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen[0][0] is not seen[1][0]
    assert all(np.array_equal(v, expected) for _, vs in seen.values() for v in vs)


def test_log_lines_reach_the_caller(tmp_path: Path) -> None:
    lines: list[str] = []
    WitnessCalculator(CHECKS, log_line=lines.append).calculate_file(_write(tmp_path, {"a": [[16, 0], [0, 0]], "b": 5}))
    assert lines == ["a00 16 b 5"]


def test_value_encodings_are_read_as_snarkjs_reads_them(tmp_path: Path) -> None:
    """Hex/octal/binary strings, signs, spaces, numbers with a zero fraction, booleans, values >= p."""
    p = bn254.R
    cases = [
        ([["0x10", "-2"], [" 3 ", "0b101"]], 16, 5),
        ([[1.0, True], ["0o17", str(p + 4)]], 1, 4),
        ([[-3, False], [0, 2**53]], p - 3, 2**53),
    ]
    for a, a00, a11 in cases:
        w = bn254.ints_from_limbs(calculate(CHECKS, _write(tmp_path, {"a": a, "b": 1})))
        assert w[1] == (a00 * a11 + 1) % p


BAD_INPUTS = [
    ({"a": [[1, 2], [3, 4]]}, "missing input signals: 4 of the circuit's 5"),
    ({"a": [[1, 2], [3, 4]], "b": 1, "x": 1}, "'x' is not an input signal"),
    ({"a": [[1, 2], [3, 4], [5, 6]], "b": 1}, "input a has 6 values, the circuit's signal has 4"),
    ({"a": [1, 2, 3], "b": 1}, "input a has 3 values, the circuit's signal has 4"),
    ({"a": [[1, 2], [3, 4]], "b": [1, 2]}, "input b has 2 values, the circuit's signal has 1"),
    ({"a": [[1, 2], [3, 4]], "b": 1.5}, "input b: 1.5 is not an integer"),
    ({"a": [[1, 2], [3, "x1"]], "b": 1}, "input a[1][1]: 'x1' is not an integer"),
    ({"a": [[1, 2], [3, 4]], "b": ""}, "input b: '' is not an integer"),
    ({"a": [[1, 2], [3, 4]], "b": "1e3"}, "input b: '1e3' is not an integer"),
    ({"a": [[1, 2], [3, None]], "b": 1}, "input a[1][1]: null is not a field element"),
    ({"a": [[1, 2], [3, {"v": 1}]], "b": 1}, "is not a field element"),
    ({"a": [[1, 2], [3, 4]], "b": 2**60}, "beyond 2^53"),
    ({"a": [[1, 2], [3, 4]], "b": 7}, "the circuit rejects the input: Assert Failed. Error in template Checks_0 line: 9"),
    ("[1, 2]", "expected a JSON object of input signals, found list"),
    ('{"a": ', "not valid JSON"),
]


@pytest.mark.parametrize(("obj", "problem"), BAD_INPUTS, ids=[p.split(":")[0][:30] for _, p in BAD_INPUTS])
def test_bad_input_is_one_line_naming_the_file(obj: Any, problem: str, tmp_path: Path) -> None:
    path = _write(tmp_path, obj)
    with pytest.raises(FormatError) as info:
        calculate(CHECKS, path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg
    assert problem in msg


def test_missing_input_file_and_bad_wasm(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="nope.json: cannot read"):
        calculate(CHECKS, tmp_path / "nope.json")
    junk = tmp_path / "junk.wasm"
    junk.write_bytes(b"\0asm" + bytes(range(64)))
    with pytest.raises(FormatError, match="junk.wasm: not a WebAssembly module"):
        WitnessCalculator(junk)


def test_cli_writes_the_witness_and_reports_bad_input_on_one_line(tmp_path: Path) -> None:
    out = tmp_path / "w.wtns"
    wasm, inp = _wasm("poseidon_k4"), DATA / "poseidon_k4" / "inputs" / "input_1.json"
    res = CliRunner().invoke(main, ["wtns", "calculate", str(wasm), str(inp), str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes() == (DATA / "poseidon_k4" / "witnesses" / "witness_1.wtns").read_bytes()

    bad = _write(tmp_path, {"a": [[1, 2], [3, 4]], "b": 7}, "bad.json")
    res = CliRunner().invoke(main, ["wtns", "calculate", str(CHECKS), str(bad), str(tmp_path / "b.wtns")])
    assert res.exit_code == 1
    assert res.output.strip().splitlines()[-1] == (
        f"error: {bad}: the circuit rejects the input: Assert Failed. Error in template Checks_0 line: 9"
    )
    assert not (tmp_path / "b.wtns").exists()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_cli_computes_a_folder_of_inputs_and_a_bad_one_fails_alone(jobs: str, tmp_path: Path) -> None:
    """A folder of inputs: every good one written as snarkjs writes it, in one process or several,
    the bad one reported on one line (exit status 1), a subfolder and other files left alone."""
    inputs, out = tmp_path / "inputs", tmp_path / "out"
    inputs.mkdir()
    for inp in (DATA / "poseidon_k4" / "inputs").glob("input_*.json"):
        shutil.copy(inp, inputs / inp.name)
    _write(inputs, {"nope": 1}, "input_9.json")
    (inputs / "notes.txt").write_text("not an input")
    (inputs / "sub").mkdir()
    _write(inputs / "sub", {"nope": 1}, "deeper.json")
    res = CliRunner().invoke(main, ["wtns", "calculate", str(_wasm("poseidon_k4")), str(inputs), str(out), "--jobs", jobs])
    assert res.exit_code == 1, res.output
    errors = [line for line in res.output.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {inputs / 'input_9.json'}: 'nope' is not an input signal of the circuit"], res.output
    assert "wrote 3 of 4 witnesses" in res.output
    assert sorted(p.name for p in out.iterdir()) == ["input_0.wtns", "input_1.wtns", "input_2.wtns"]
    for k in range(3):
        assert (out / f"input_{k}.wtns").read_bytes() == (DATA / "poseidon_k4" / "witnesses" / f"witness_{k}.wtns").read_bytes()

    (inputs / "input_9.json").unlink()
    res = CliRunner().invoke(main, ["wtns", "calculate", str(_wasm("poseidon_k4")), str(inputs), str(out), "--jobs", jobs])
    assert res.exit_code == 0 and "wrote 3 of 3 witnesses" in res.output, res.output


def test_cli_folder_without_inputs_and_a_bad_wasm_are_one_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    res = CliRunner().invoke(main, ["wtns", "calculate", str(_wasm("mul_chain_1k")), str(empty), str(tmp_path / "out")])
    assert res.exit_code == 1 and res.output.strip() == f"error: {empty}: no *.json inputs in the folder", res.output
    junk = tmp_path / "junk.wasm"
    junk.write_bytes(b"\0asm" + bytes(range(64)))
    shutil.copy(DATA / "mul_chain_1k" / "inputs" / "input_0.json", empty / "a.json")
    res = CliRunner().invoke(main, ["wtns", "calculate", str(junk), str(empty), str(tmp_path / "out")])
    assert res.exit_code == 1, res.output
    assert [line.split(" (")[0] for line in res.output.strip().splitlines()] == [f"error: {junk}: not a WebAssembly module"]
    assert not (tmp_path / "out").exists()
    taken = tmp_path / "a-file"
    taken.write_text("")
    res = CliRunner().invoke(main, ["wtns", "calculate", str(_wasm("mul_chain_1k")), str(empty), str(taken)])
    assert res.exit_code == 1 and res.output.strip() == f"error: {taken}: cannot make the output folder: File exists", res.output


def test_proof_from_computed_witness_verifies(tmp_path: Path) -> None:
    """A fresh input of mul_chain_1k: computed witness -> CPU proof -> distprove's pairing check."""
    from distprove.keystore import open_key

    key = open_key(DATA / "mul_chain_1k" / "circuit_final.zkey")
    values = calculate(_wasm("mul_chain_1k"), _write(tmp_path, {"x0": str(random.randrange(bn254.R))}))
    proof = prove(key, values, backend="cpu")
    assert verify(DATA / "mul_chain_1k" / "verification_key.json", proof.public_json(), proof.to_json())


def _random_inputs(name: str, rng: random.Random) -> dict[str, Any]:
    """Fresh inputs any value of which the circuit accepts (merkle_d20 needs a matching root: none)."""
    field = lambda: str(rng.randrange(bn254.R))  # noqa: E731
    if name == "mini":
        return {"a": field(), "b": rng.randrange(-(2**40), 2**40)}
    if name == "mul_chain_1k":
        return {"x0": hex(rng.randrange(bn254.R))}
    if name == "poseidon_k4":
        return {"seed": field(), "a": [field() for _ in range(4)], "b": [field() for _ in range(4)]}
    if name == "bits_k16":
        return {"v": [str(rng.randrange(2**63)) for _ in range(16)]}
    return {"a": [[field(), rng.randrange(-(2**53), 2**53)], [field(), field()]], "b": field()}


@pytest.mark.parametrize("name", ["mini", "mul_chain_1k", "poseidon_k4", "bits_k16", "checks"])
def test_random_inputs_match_snarkjs(name: str, snarkjs: str, tmp_path: Path) -> None:
    rng = random.Random(name)
    wasm = CHECKS if name == "checks" else _wasm(name)
    for k in range(2):
        inp = _write(tmp_path, _random_inputs(name, rng), f"in{k}.json")
        ours, theirs = tmp_path / f"ours{k}.wtns", tmp_path / f"snarkjs{k}.wtns"
        calculate_wtns(wasm, inp, ours)
        subprocess.run([snarkjs, "wtns", "calculate", str(wasm), str(inp), str(theirs)], check=True,
                       capture_output=True, timeout=SNARKJS_TIMEOUT_S)
        assert ours.read_bytes() == theirs.read_bytes()


def test_module_is_compiled_once_per_process() -> None:
    wasm = _wasm("mini")
    a, b = WitnessCalculator(wasm), WitnessCalculator(wasm)
    assert a._module is b._module and a._store is not b._store
    assert _compile(str(wasm))[0] is a._module
