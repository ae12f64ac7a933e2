"""circom's native witness generators (distprove.witness.native): a ``circom --c`` folder built
into the cache and run as a long-lived driver, and a plain binary run once per input.

The folders come packed in the fixtures (``<fixture>/<name>_cpp.tar.xz``, tests/data/README.md)
and are unpacked once per session; every build goes to one session cache, compiled at -O0
(``distprove.witness.build-flags``, in this process and, through the environment, in every process
a test starts: the witnesses are the same, the builds 5x quicker), so each circuit is built once
for all the tests. The builds the selected tests need start together, two at a time, at the first
of them (:func:`prebuilt`). Witnesses are compared byte for byte with snarkjs's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import dask.config
import numpy as np
import pytest

import distprove.config  # noqa: F401  (registers the defaults before any dask.config.set below)
from distprove.errors import FormatError
from distprove.formats.wtns import write_wtns
from distprove.formats.zkey import open_zkey
from distprove.witness import native
from distprove.witness.native import NativeGenerator

QUICK_FLAGS = "-std=c++11 -O0 -I."
CIRCUITS = ("sha256_32", "poseidon_k4", "merkle_d20")
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory, native_toolchain: None) -> Iterator[Path]:
    """One build cache (DISTPROVE_CACHE_DIR) and quick build flags for the whole session."""
    cache = tmp_path_factory.mktemp("native-cache")
    with pytest.MonkeyPatch.context() as mp, dask.config.set({"distprove.witness.build-flags": QUICK_FLAGS}):
        mp.setenv("DISTPROVE_CACHE_DIR", str(cache))
        # the processes a test starts (a local cluster's workers and their witness pools) read
        # dask's configuration from the environment: without this they build at the Makefile's -O3
        mp.setenv("DASK_DISTPROVE__WITNESS__BUILD_FLAGS", QUICK_FLAGS)
        yield cache


@pytest.fixture(scope="session")
def unpacked(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """Every packed ``_cpp`` folder of the fixtures, unpacked into one folder."""
    root = tmp_path_factory.mktemp("cpp")
    for archive in sorted(data_dir.glob("*/*_cpp.tar.xz")):
        with tarfile.open(archive) as tar:
            tar.extractall(root, filter="data")
    return root


def _user_build(unpacked: Path, root: Path, name: str) -> Path:
    """A plain binary built as a user builds it (``make`` in a copy of the folder)."""
    folder = root / f"{name}_cpp"
    shutil.copytree(unpacked / f"{name}_cpp", folder)
    subprocess.run(["make", "-j2", f"CFLAGS={QUICK_FLAGS}"], cwd=folder, check=True, capture_output=True)
    return folder / name


@dataclass
class Builds:
    """The builds started ahead by :func:`prebuilt`, and the folder of the users' builds."""

    root: Path
    started: dict[tuple[str, str], Future[Path]]


@pytest.fixture(scope="session")
def prebuilt(request: pytest.FixtureRequest, session_cache: Path, unpacked: Path,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Builds]:
    """The builds the selected tests of this module name by their ``name`` parameter, started
    together in two threads, in test order: ``("driver", name)`` (into the session cache, for the
    tests using ``drivers``) and ``("user", name)`` (a plain binary, for ``user_binaries``). Most of
    a build is one big translation unit, one core; two at once use both of CI's. A build no test
    names here is made on first use."""
    wanted: list[tuple[str, str]] = []
    for item in request.session.items:
        name = item.callspec.params.get("name") if hasattr(item, "callspec") else None
        if getattr(item, "module", None) is not sys.modules[__name__] or name not in CIRCUITS:
            continue
        for fixture, kind in (("drivers", "driver"), ("user_binaries", "user")):
            if fixture in item.fixturenames and (kind, name) not in wanted:
                wanted.append((kind, name))
    builds = Builds(tmp_path_factory.mktemp("user-builds"), {})
    pool = ThreadPoolExecutor(2, thread_name_prefix="native-build")
    for kind, name in wanted:
        builds.started[(kind, name)] = (pool.submit(native.built_driver, unpacked / f"{name}_cpp") if kind == "driver"
                                        else pool.submit(_user_build, unpacked, builds.root, name))
    yield builds
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def drivers(prebuilt: Builds, unpacked: Path) -> Iterator[dict[str, NativeGenerator]]:
    """A long-lived driver per fixture circuit (built once), closed after the session."""
    made: dict[str, NativeGenerator] = {}
    yield made
    for g in made.values():
        g.close()


def driver(drivers: dict[str, NativeGenerator], unpacked: Path, name: str) -> NativeGenerator:
    """The session's driver of a fixture circuit (its build, when still going, waited for:
    :func:`distprove.witness.native.built_driver` builds once under a lock)."""
    if name not in drivers:
        drivers[name] = NativeGenerator(unpacked / f"{name}_cpp")
    return drivers[name]


@pytest.fixture(scope="session")
def user_binaries(prebuilt: Builds, unpacked: Path) -> Callable[[str], Path]:
    """Binaries as a user builds them (``make`` in a copy of the folder): started by
    :func:`prebuilt`, else made on first use."""
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            build = prebuilt.started.get(("user", name))
            made[name] = build.result() if build is not None else _user_build(unpacked, prebuilt.root, name)
        return made[name]

    return get


def snarkjs_witnesses(data_dir: Path, name: str) -> list[tuple[Path, Path]]:
    """(input, snarkjs's .wtns of it) of a fixture."""
    d = data_dir / name
    return [(i, d / "witnesses" / i.name.replace("input_", "witness_").replace(".json", ".wtns"))
            for i in sorted((d / "inputs").glob("input_*.json"))]


def assert_same_wtns(values: np.ndarray, reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "native.wtns"
    write_wtns(out, values, durable=False)
    assert out.read_bytes() == reference.read_bytes(), f"{reference.name}: the native witness differs from snarkjs's"


def write_input(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path


# ---- the witnesses: byte for byte snarkjs's ----------------------------------------------------


@pytest.mark.parametrize("name", CIRCUITS)
def test_driver_matches_snarkjs(name: str, drivers: dict, unpacked: Path, data_dir: Path, tmp_path: Path) -> None:
    g = driver(drivers, unpacked, name)
    pairs = snarkjs_witnesses(data_dir, name)
    assert len(pairs) >= 3
    for inp, ref in pairs + pairs[:1]:  # the first again: the driver's state is reset between inputs
        assert_same_wtns(g.calculate_file(inp), ref, tmp_path)


@pytest.mark.parametrize("name", CIRCUITS)
def test_plain_binary_matches_snarkjs(name: str, user_binaries, data_dir: Path, tmp_path: Path) -> None:
    g = NativeGenerator(user_binaries(name))
    for inp, ref in snarkjs_witnesses(data_dir, name):
        assert_same_wtns(g.calculate_file(inp), ref, tmp_path)


def test_driver_reads_inputs_as_snarkjs(drivers: dict, unpacked: Path, data_dir: Path, tmp_path: Path) -> None:
    """Hex strings, numbers and values beyond r are read as snarkjs reads them."""
    g = driver(drivers, unpacked, "poseidon_k4")
    inp, ref = snarkjs_witnesses(data_dir, "poseidon_k4")[0]
    data = json.loads(inp.read_text())
    data["seed"] = hex(int(data["seed"]) + native.R)  # the same field element, written another way
    data["a"] = [int(v) if int(v) < 2**53 else v for v in data["a"]]
    assert_same_wtns(g.calculate_file(write_input(tmp_path / "other.json", data)), ref, tmp_path)


# ---- failures: one line each, the next input still computed -----------------------------------


def one_line(exc: pytest.ExceptionInfo[FormatError]) -> str:
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_assertion_fails_the_input_alone(session_cache: Path, unpacked: Path, tmp_path: Path) -> None:
    logged: list[str] = []
    g = NativeGenerator(unpacked / "checks_cpp", log_line=logged.append)
    good = write_input(tmp_path / "good.json", {"a": [[2, 0], [0, 5]], "b": 3})
    bad = write_input(tmp_path / "bad.json", {"a": [[2, 0], [0, 5]], "b": 7})
    try:
        assert g.calculate_file(good)[:, 0].tolist() == [1, 13, 2, 5, 3]  # one, c, a[0][0], a[1][1], b
        with pytest.raises(FormatError) as err:
            g.calculate_file(bad)
        assert one_line(err) == f"{bad}: the circuit rejects the input: Assert Failed in template Checks line 9"
        assert g.calculate_file(good)[1, 0] == 13  # a fresh driver
        assert logged == ["a00 2 b 3", "a00 2 b 7", "a00 2 b 3"]
    finally:
        g.close()


def test_bad_inputs_fail_alone(session_cache: Path, unpacked: Path, tmp_path: Path) -> None:
    g = NativeGenerator(unpacked / "checks_cpp")
    cases = {
        "size": ({"a": [[1, 2], [3]], "b": 1}, "input a has 3 values, the circuit's signal has 4"),
        "unknown": ({"a": [[1, 2], [3, 4]], "c": 1}, "'c' is not an input signal of the circuit"),
        "missing": ({"a": [[1, 2], [3, 4]]}, "missing input signals: 4 of the circuit's 5 input values are given"),
        "value": ({"a": [[1, 2], [3, "x"]], "b": 1}, "input a[1][1]: 'x' is not an integer (decimal, or 0x/0o/0b)"),
    }
    good = write_input(tmp_path / "good.json", {"a": [[1, 2], [3, 4]], "b": 1})
    try:
        for case, (data, problem) in cases.items():
            path = write_input(tmp_path / f"{case}.json", data)
            with pytest.raises(FormatError) as err:
                g.calculate_file(path)
            assert one_line(err) == f"{path}: {problem}"
            assert g.calculate_file(good)[1, 0] == 5
    finally:
        g.close()


@pytest.mark.parametrize("case", ["hang", "crash"])
def test_a_hung_or_crashed_input_fails_alone(case: str, session_cache: Path, unpacked: Path, tmp_path: Path) -> None:
    """An input that runs past the time limit, or whose driver is killed by a signal mid-input (as
    a segfault would), fails alone with one line; the next input gets a fresh driver."""
    problem = {
        "hang": "the native witness generator took more than 1 s (distprove.witness.timeout); stopped",
        "crash": "the native witness generator died of SIGSEGV",
    }[case]
    g = NativeGenerator(unpacked / "spin_cpp", timeout=1.0 if case == "hang" else 60)
    quick = write_input(tmp_path / "quick.json", {"n": 3})
    slow = write_input(tmp_path / f"{case}.json", {"n": "1000000000000"})
    try:
        first = g.calculate_file(quick)
        pid = g._proc.pid
        if case == "crash":
            threading.Timer(0.5, os.kill, (pid, signal.SIGSEGV)).start()
        t0 = time.monotonic()
        with pytest.raises(FormatError) as err:
            g.calculate_file(slow)
        if case == "hang":
            assert time.monotonic() - t0 < 10
        assert one_line(err) == f"{slow}: {problem}"
        assert np.array_equal(g.calculate_file(quick), first)
        if case == "crash":
            assert g._proc.pid != pid
    finally:
        g.close()


def fake_binary(folder: Path, body: str) -> Path:
    """An executable shell script with a .dat beside it: a plain binary as far as distprove can tell."""
    exe = folder / "fake"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(0o755)
    (folder / "fake.dat").write_bytes(b"")
    return exe


def test_plain_binary_failures(session_cache: Path, data_dir: Path, tmp_path: Path) -> None:
    """A plain binary's crash, hang and assertion each fail their input alone; the real witness
    (copied by the fake from snarkjs's) still comes through between them."""
    inp, ref = snarkjs_witnesses(data_dir, "poseidon_k4")[0]
    exe = fake_binary(tmp_path, f"""
case "$(cat "$1")" in
  *'"n": ["1"]'*) kill -SEGV $$ ;;
  *'"n": ["2"]'*) exec sleep 30 ;;
  *'"n": ["3"]'*) echo "Failed assert in template/function Foo line 12. Followed trace of components: main"
                  echo "fake: foo.cpp:9: Assertion \\`x' failed." >&2; kill -ABRT $$ ;;
  *) cp "{ref}" "$2" ;;
esac""")
    g = NativeGenerator(exe, timeout=1.0)
    expected = {
        1: "the native witness generator died of SIGSEGV",
        2: "the native witness generator took more than 1 s (distprove.witness.timeout); stopped",
        3: "the circuit rejects the input: Assert Failed in template Foo line 12",
    }
    for n, problem in expected.items():
        path = write_input(tmp_path / f"in{n}.json", {"n": n})
        with pytest.raises(FormatError) as err:
            g.calculate_file(path)
        assert one_line(err) == f"{path}: {problem}"
        assert_same_wtns(g.calculate_file(inp), ref, tmp_path)


# ---- check_key ---------------------------------------------------------------------------------


def test_check_key(drivers: dict, unpacked: Path, data_dir: Path) -> None:
    key = open_zkey(data_dir / "poseidon_k4" / "circuit_final.zkey")
    driver(drivers, unpacked, "poseidon_k4").check_key(key)
    sha = driver(drivers, unpacked, "sha256_32")
    with pytest.raises(FormatError) as err:
        sha.check_key(key)
    assert one_line(err) == (
        f"{sha.path}: the circuit has 29325 witness values but the key circuit_final.zkey expects "
        f"{key.n_vars} (nVars): a generator of another circuit"
    )


def test_check_key_plain_binary(user_binaries, data_dir: Path) -> None:
    """A plain binary's size shows in its first witness: checked there, and every one after."""
    key = open_zkey(data_dir / "merkle_d20" / "circuit_final.zkey")
    g = NativeGenerator(user_binaries("poseidon_k4"))
    g.check_key(key)
    inp, _ = snarkjs_witnesses(data_dir, "poseidon_k4")[0]
    with pytest.raises(FormatError) as err:
        g.calculate_file(inp)
    assert one_line(err).startswith(f"{g.path}: the circuit has ")
    assert f"but the key circuit_final.zkey expects {key.n_vars} (nVars)" in str(err.value)
    with pytest.raises(FormatError):
        g.check_key(key)
    g.check_key(SimpleNamespace(n_vars=g.witness_size, path="right.zarr"))
    assert g.calculate_file(inp).shape == (g.witness_size, 8)


# ---- the build and its cache -------------------------------------------------------------------


def test_second_open_builds_nothing(session_cache: Path, unpacked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    NativeGenerator(unpacked / "checks_cpp").close()

    def no_build(*args: object) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(native, "_compile_into", no_build)
    NativeGenerator(unpacked / "checks_cpp").close()
    assert not list((unpacked / "checks_cpp").glob("*.o")), "built in the user's folder"


def test_built_cache_runs_without_compilers(session_cache: Path, unpacked: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache filled on one host serves a host with no compiler, gmp or make (PATH empty here)."""
    NativeGenerator(unpacked / "checks_cpp").close()
    carried = tmp_path / "carried"
    shutil.copytree(session_cache / "witness", carried / "witness")
    monkeypatch.setenv("DISTPROVE_CACHE_DIR", str(carried))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    g = NativeGenerator(unpacked / "checks_cpp")
    try:
        assert g.calculate_file(write_input(tmp_path / "in.json", {"a": [[1, 2], [3, 4]], "b": 1}))[1, 0] == 5
    finally:
        g.close()


def test_driver_that_cannot_start(session_cache: Path, unpacked: Path, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A build whose .dat was cut short: the driver's own error, one line naming the generator."""
    built = native.built_driver(unpacked / "checks_cpp")
    cache = tmp_path / "cache"
    shutil.copytree(built, cache / "witness" / built.name)
    dat = cache / "witness" / built.name / "checks.dat"
    dat.write_bytes(dat.read_bytes()[:100])
    monkeypatch.setenv("DISTPROVE_CACHE_DIR", str(cache))
    with pytest.raises(FormatError) as err:
        NativeGenerator(unpacked / "checks_cpp")
    assert one_line(err) == (
        f"{unpacked / 'checks_cpp'}: the native witness generator exited with status 2: "
        f"distprove driver: {dat}: the .dat is shorter than the circuit's tables"
    )


def test_content_change_rebuilds(session_cache: Path, unpacked: Path, tmp_path: Path) -> None:
    folder = tmp_path / "checks_cpp"
    shutil.copytree(unpacked / "checks_cpp", folder)
    first = native.built_driver(folder)
    with open(folder / "checks.cpp", "a") as f:
        f.write("\n// changed\n")
    second = native.built_driver(folder)
    assert first != second and (first / "driver").is_file() and (second / "driver").is_file()
    (folder / "checks.o").write_bytes(b"a user's build output")  # not part of the key
    assert native.built_driver(folder) == second


def test_concurrent_opens_build_once(native_toolchain: None, unpacked: Path, tmp_path: Path) -> None:
    """Three processes open one new folder at once: one builds, the others wait for it."""
    cache = tmp_path / "cache"
    log_file = tmp_path / "builds.log"
    code = f"""
import dask.config
from distprove.witness import native
real = native._compile_into
def counted(*args):
    with open({str(log_file)!r}, "a") as f:
        f.write("build\\n")
    return real(*args)
native._compile_into = counted
with dask.config.set({{"distprove.witness.build-flags": {QUICK_FLAGS!r}}}):
    print(native.built_driver({str(unpacked / "checks_cpp")!r}))
"""
    env = {**os.environ, "DISTPROVE_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=600)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(outs)) == 1 and Path(outs[0], "driver").is_file()
    assert log_file.read_text() == "build\n"
    assert [p.name for p in (cache / "witness").iterdir() if not p.name.endswith(".lock")] == [Path(outs[0]).name]


def test_build_failure_names_the_missing_tool(native_toolchain: None, unpacked: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH without nasm: one line naming nasm, and nothing left in the cache."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("make", "g++", "as", "ld", "sh", "uname"):  # all but nasm
        (bin_dir / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("DISTPROVE_CACHE_DIR", str(tmp_path / "cache"))
    folder = unpacked / "checks_cpp"
    with dask.config.set({"distprove.witness.build-flags": QUICK_FLAGS}), pytest.raises(FormatError) as err:
        NativeGenerator(folder)
    assert one_line(err) == f"{folder}: cannot build the native witness generator: nasm is missing (apt-get install nasm)"
    assert [p.name for p in (tmp_path / "cache" / "witness").iterdir() if not p.name.endswith(".lock")] == []


@pytest.mark.parametrize(
    "output, problem",
    [
        ("calcwit.cpp:1: fatal error: gmp.h: No such file or directory", "gmp.h is missing (apt-get install libgmp-dev)"),
        ("main.cpp:9:10: fatal error: nlohmann/json.hpp: No such file or directory",
         "nlohmann/json.hpp is missing (apt-get install nlohmann-json3-dev)"),
        ("make: g++: No such file or directory", "g++ is missing (apt-get install g++)"),
        ("No such file or directory: 'make'", "make is missing (apt-get install make)"),
        ("g++: fatal error: cannot execute ‘as’: execvp: No such file or directory",
         "g++'s assembler or linker is missing (apt-get install binutils)"),
        ("/usr/bin/ld: cannot find -lgmp: No such file or directory", "libgmp is missing (apt-get install libgmp-dev)"),
    ],
)
def test_build_failure_lines(output: str, problem: str) -> None:
    assert str(native._build_failure(Path("/x_cpp"), output)) == f"/x_cpp: cannot build the native witness generator: {problem}"


def test_a_fake_folder_fails_to_build_in_one_line(session_cache: Path, tmp_path: Path) -> None:
    folder = tmp_path / "fake_cpp"
    folder.mkdir()
    (folder / "Makefile").write_text("%.o: %.cpp\n\tg++ -c $< -o $@\nfr_asm.o:\n\ttrue\n")
    for empty in ("calcwit.cpp", "fr.cpp"):
        (folder / empty).write_text("")
    (folder / "fake.cpp").write_text("this is not C++\n")
    (folder / "fake.dat").write_bytes(b"\0" * 8)
    with pytest.raises(FormatError) as err:
        NativeGenerator(folder)
    assert one_line(err).startswith(f"{folder}: cannot build the native witness generator: fake.cpp:1:1: error: ")


def test_build_command(session_cache: Path, unpacked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m distprove.witness.native``: each folder's build folder, or its one line."""
    assert native.main([str(unpacked / "checks_cpp")]) == 0
    assert capsys.readouterr().out == f"{native.built_driver(unpacked / 'checks_cpp')}\n"
    assert native.main([str(tmp_path)]) == 1
    assert capsys.readouterr().err.count("\n") == 1


def test_not_a_generator(tmp_path: Path) -> None:
    with pytest.raises(FormatError) as err:
        NativeGenerator(tmp_path)
    assert "not a folder written by circom --c" in one_line(err)
    exe = tmp_path / "tool"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    with pytest.raises(FormatError) as err:
        NativeGenerator(exe)  # no tool.dat beside it
    assert "not a native witness generator" in one_line(err)


def test_batch_from_inputs_with_a_native_generator(session_cache: Path, unpacked: Path, data_dir: Path,
                                                   tmp_path: Path, snarkjs: str) -> None:
    """``distprove batch KEY INPUTS --witness-gen <name>_cpp`` on a local cluster: the generator is
    checked against the key in the client, the witnesses are computed by the driver in the
    workers' pools (kept, byte for byte snarkjs's), every proof verifies with snarkjs, and an
    input the circuit cannot take fails alone with one line."""
    from click.testing import CliRunner

    from conftest import snarkjs_verify
    from distprove.cli import main

    fixture = data_dir / "poseidon_k4"
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    shutil.copy(fixture / "circuit_final.zkey", tmp_path)
    for p in sorted((fixture / "inputs").glob("input_*.json")):
        shutil.copy(p, inputs)
    (inputs / "wrong_signal.json").write_text(json.dumps({"no_such_signal": "1"}))
    out = tmp_path / "proofs"
    res = CliRunner().invoke(main, [
        "batch", str(tmp_path / "circuit_final.zkey"), str(inputs), "--witness-gen", str(unpacked / "poseidon_k4_cpp"),
        "--backend", "cpu", "--workers", "1", "--out", str(out), "--keep-witnesses", "--report", str(tmp_path / "r.json"),
    ])
    assert res.exit_code == 1, res.output  # the bad input
    report = json.loads((tmp_path / "r.json").read_text())
    by_name = {r["name"]: r for r in report["results"]}
    bad = by_name.pop("wrong_signal")
    assert bad["status"] == "failed" and "no_such_signal" in bad["reason"] and "\n" not in bad["reason"]
    assert {r["status"] for r in by_name.values()} == {"proved"} and len(by_name) == 3
    for k in range(3):
        assert (out / f"input_{k}.wtns").read_bytes() == (fixture / "witnesses" / f"witness_{k}.wtns").read_bytes()
        assert snarkjs_verify(fixture / "verification_key.json", out / f"input_{k}.public.json",
                              out / f"input_{k}.proof.json", snarkjs)
    assert not (out / "wrong_signal.proof.json").exists()
