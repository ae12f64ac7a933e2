"""The insecure dev setup: every key point against brute-force definitions, the §7.8 identity,
proofs that distprove and snarkjs verify, a .zkey snarkjs proves with, and the fixed-base code."""

from __future__ import annotations

import ctypes
import json
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import snarkjs_verify
from distprove import bn254, devsetup
from distprove.bn254 import G1, G2, R
from distprove.devsetup import (
    WARNING,
    Toxic,
    batch_inverse,
    build_key,
    coefficient_records,
    dev_setup,
    domain_power,
    fixed_base_cpu,
    key_scalars,
    lagrange_at,
    lagrange_odd_coset,
)
from distprove.formats.r1cs import R1CS, read_r1cs
from distprove.formats.wtns import read_wtns
from distprove.formats.zkey import read_zkey
from distprove.keystore import KeyStore, import_key, write_store
from distprove.prover import msm, prove
from distprove.stages.fixedbase import window_table_limbs
from distprove.synth import make_circuit, write_circuit
from distprove.verifier import verify

DATA = Path(__file__).parent / "data"
MINI_R1CS = DATA / "mini" / "mini.r1cs"
MINI_WTNS = DATA / "mini" / "witness.wtns"


def rand_toxic(seed: int) -> Toxic:
    rng = random.Random(seed)
    return Toxic(*(rng.randrange(1, R) for _ in range(4)))


def brute_lagrange(points: list[int], i: int, x: int) -> int:
    """L_i(x) of the interpolation nodes ``points`` by the product definition."""
    num = den = 1
    for j, p in enumerate(points):
        if j != i:
            num = num * (x - p) % R
            den = den * (points[i] - p) % R
    return num * pow(den, -1, R) % R


def scalar_points(g: bn254.Group, scalars: list[int]) -> np.ndarray:
    return bn254.points_to_limbs(g, [bn254.mul(g, g.generator, s) for s in scalars])


# --- field helpers ---------------------------------------------------------------------


def test_batch_inverse_and_powers_of_nothing() -> None:
    assert batch_inverse(np.array([], dtype=object)).shape == (0,) and bn254.powers(5, 0).shape == (0,)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 100])
def test_batch_inverse_and_powers(n: int) -> None:
    rng = random.Random(n)
    vals = [rng.randrange(1, R) for _ in range(n)]
    vals[0] = 1
    inv = batch_inverse(np.array(vals, dtype=object))
    assert [int(v) for v in inv] == [pow(v, -1, R) for v in vals]
    base = rng.randrange(R)
    assert [int(v) for v in bn254.powers(base, n)] == [pow(base, i, R) for i in range(n)]
    with pytest.raises(ZeroDivisionError):
        batch_inverse(np.array(vals + [0], dtype=object))


@pytest.mark.parametrize("k", [0, 1, 2, 3, 4])
def test_lagrange_against_definition(k: int) -> None:
    tau = random.Random(k).randrange(R)
    n = 1 << k
    dom = [pow(bn254.root_of_unity(k), i, R) for i in range(n)]
    assert [int(v) for v in lagrange_at(tau, k)] == [brute_lagrange(dom, i, tau) for i in range(n)]
    dom2 = [pow(bn254.root_of_unity(k + 1), i, R) for i in range(2 * n)]
    assert [int(v) for v in lagrange_odd_coset(tau, k)] == [brute_lagrange(dom2, 2 * i + 1, tau) for i in range(n)]


@pytest.mark.parametrize("k", [1, 3])
def test_odd_coset_formula_with_the_k28_shift(k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """At k = 28 the coset is 25·⟨ω⟩ (no 2^29-th root); check that general case at small k by brute force."""
    monkeypatch.setattr(bn254, "coset_generator", lambda _k: bn254.FR_SHIFT)
    tau, n = random.Random(k + 28).randrange(R), 1 << k
    dom = [pow(bn254.root_of_unity(k), i, R) for i in range(n)]
    both = dom + [bn254.FR_SHIFT * x % R for x in dom]
    assert [int(v) for v in lagrange_odd_coset(tau, k)] == [brute_lagrange(both, n + i, tau) for i in range(n)]


def test_domain_power_matches_snarkjs_keys() -> None:
    for r1cs_path, zkey_path in ((MINI_R1CS, DATA / "mini" / "mini_0001.zkey"),
                                 (DATA / "mul_chain_1k" / "circuit.r1cs", DATA / "mul_chain_1k" / "circuit_final.zkey")):
        r, z = read_r1cs(r1cs_path), read_zkey(zkey_path, check_points=False)
        assert 1 << domain_power(r.n_constraints, r.n_pub_out + r.n_pub_in) == z.domain_size


@pytest.mark.parametrize("name", ["mini", "mul_chain_1k"])
def test_coefficient_records_equal_snarkjs_setup(name: str) -> None:
    r1cs = MINI_R1CS if name == "mini" else DATA / name / "circuit.r1cs"
    zkey = DATA / "mini" / "mini_0001.zkey" if name == "mini" else DATA / name / "circuit_final.zkey"
    rec, z = coefficient_records(read_r1cs(r1cs)), read_zkey(zkey, check_points=False)
    for field, theirs in (("matrix", z.coef_matrix), ("row", z.coef_row), ("signal", z.coef_signal), ("value", z.coef_value)):
        assert np.array_equal(rec[field], theirs), field


@pytest.mark.parametrize("kind", ["bits", "random"])
def test_workers_give_the_same_key_scalars(kind: str) -> None:
    r1cs = make_circuit(kind, 400, 3, terms=3, seed=2).r1cs
    t = rand_toxic(9)
    one, many = key_scalars(r1cs, t, workers=1), key_scalars(r1cs, t, workers=3)
    assert one.keys() == many.keys()
    for name in one:
        assert np.array_equal(one[name], many[name]), name
    assert np.array_equal(coefficient_records(r1cs, workers=1), coefficient_records(r1cs, workers=3))


# --- the key against brute-force definitions -----------------------------------------------


def brute_key_scalars(r1cs: R1CS, t: Toxic, product_form: bool = True) -> dict[str, list[int]]:
    """§6.3 scalars by explicit loops over the constraints and product-form Lagrange polynomials
    (``product_form``), or the closed-form ones of lagrange_at / lagrange_odd_coset (Python ints)."""
    n_pub = r1cs.n_pub_out + r1cs.n_pub_in
    k = (r1cs.n_constraints + n_pub).bit_length()
    n = 1 << k
    dom = [pow(bn254.root_of_unity(k), i, R) for i in range(n)]
    if product_form:
        lag = [brute_lagrange(dom, i, t.tau) for i in range(n)]
    else:
        lag = [int(v) for v in lagrange_at(t.tau, k)]
    polys = []
    for m in (r1cs.A, r1cs.B, r1cs.C):
        acc = [0] * r1cs.n_wires
        for row in range(r1cs.n_constraints):
            lo, hi = int(m.row_ptr[row]), int(m.row_ptr[row + 1])
            for s, c in zip(m.wire[lo:hi], bn254.ints_from_limbs(m.coef[lo:hi]) if hi > lo else []):
                acc[int(s)] = (acc[int(s)] + c * lag[row]) % R
        polys.append(acc)
    a, b, c = polys
    for s in range(n_pub + 1):
        a[s] = (a[s] + lag[r1cs.n_constraints + s]) % R
    kk = [(t.beta * a[s] + t.alpha * b[s] + c[s]) % R for s in range(r1cs.n_wires)]
    di = pow(t.delta, -1, R)
    if product_form:
        dom2 = [pow(bn254.root_of_unity(k + 1), i, R) for i in range(2 * n)]
        h = [brute_lagrange(dom2, 2 * i + 1, t.tau) for i in range(n)]
    else:
        h = [int(v) for v in lagrange_odd_coset(t.tau, k)]
    return {"a": a, "b": b, "ic": kk[: n_pub + 1], "c": [v * di % R for v in kk[n_pub + 1 :]], "h": [v * di % R for v in h]}


@pytest.mark.parametrize(
    "kind, constraints, public",
    [("chain", 1, 1), ("chain", 5, 1), ("chain", 61, 2), ("chain", 100, 3), ("bits", 297, 2), ("random", 45, 3)],
)
@pytest.mark.parametrize("workers", [1, 3])
def test_compiled_key_scalars_equal_the_straightforward_ones(
    kind: str, constraints: int, public: int, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Fr kernels' scalars against Python-int loops, for domains of exactly 2^k rows (chain 61 + 2
    public + 1 = 64) and not, sliced into many odd-sized tasks so every slice edge is crossed."""
    monkeypatch.setattr(devsetup, "_TASK_SIZE", 7)
    r1cs = make_circuit(kind, constraints, public, terms=3, seed=5).r1cs
    t = rand_toxic(constraints + workers)
    got = key_scalars(r1cs, t, workers=workers)
    ref = brute_key_scalars(r1cs, t, product_form=False)
    for name, values in ref.items():
        assert bn254.ints_from_limbs(got[name]) == values, name


def test_key_scalars_refuse_tau_in_the_domain() -> None:
    r1cs = make_circuit("chain", 10, 1).r1cs
    tau = pow(bn254.root_of_unity(domain_power(10, 1)), 3, R)
    with pytest.raises(ZeroDivisionError):
        key_scalars(r1cs, Toxic(tau, 2, 3, 5))


@pytest.mark.parametrize("start", [0, 1, 2, 0xDEADBEEF, R - 1])
@pytest.mark.parametrize("workers", [1, 3])
def test_square_chain_slices(start: int, workers: int) -> None:
    from distprove.frlimbs import square_chain

    want, v = [], start
    for _ in range(30):
        v = v * v % R
        want.append(v)
    assert bn254.ints_from_limbs(square_chain(start, 30, workers=workers, chunk=7)) == want


_SEEN: np.ndarray | None = None


def _record_sigterm_action(i: int) -> None:
    assert _SEEN is not None
    _SEEN[i] = signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_forked_workers_exit_on_sigterm_whatever_the_parent_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM handler in the parent (a Dask scheduler in-process installs one) must not reach the
    pool's workers: the pool ends them with SIGTERM, and a worker that ran the handler instead of
    exiting would leave the pool waiting for it forever."""
    global _SEEN
    _SEEN = devsetup._shared((4,), np.uint8)
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        devsetup._run(_record_sigterm_action, [(i,) for i in range(4)], workers=2)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert _SEEN.tolist() == [1, 1, 1, 1]


@pytest.mark.parametrize("which", ["mini", "random", "bits"])
def test_key_points_against_definition(which: str) -> None:
    if which == "mini":
        r1cs = read_r1cs(MINI_R1CS)
    else:
        r1cs = make_circuit(which, 12 if which == "random" else 100, 2 if which == "random" else 1, seed=4).r1cs
    t = rand_toxic(len(which))
    key = build_key(r1cs, t, device="cpu")
    ref = brute_key_scalars(r1cs, t)
    assert key.domain_size == len(ref["h"]) and key.n_vars == r1cs.n_wires
    assert np.array_equal(key.a, scalar_points(G1, ref["a"]))
    assert np.array_equal(key.b1, scalar_points(G1, ref["b"]))
    assert np.array_equal(key.b2, scalar_points(G2, ref["b"]))
    assert np.array_equal(key.ic, scalar_points(G1, ref["ic"]))
    assert np.array_equal(key.c, scalar_points(G1, ref["c"]))
    assert np.array_equal(key.h, scalar_points(G1, ref["h"]))
    p = key.points
    assert p["alpha1"] == bn254.mul(G1, G1.generator, t.alpha) and p["beta2"] == bn254.mul(G2, G2.generator, t.beta)
    assert p["delta1"] == bn254.mul(G1, G1.generator, t.delta) and p["gamma2"] == G2.generator


def test_h_points_satisfy_7_8_identity(tmp_path: Path) -> None:
    """Σ hs[i]·H[i] = [P(τ)/δ]₁ with hs from the CPU prover and P = A·B − C built from the witness."""
    from distprove.backends.cpu import CpuBackend

    t = rand_toxic(78)
    key = build_key(read_r1cs(MINI_R1CS), t, device="cpu")
    store = write_store(tmp_path / "t.zarr", key, {"file": "t", "size": 0, "sha256": key.content_hash}, int(key.records.shape[0]))
    w = read_wtns(MINI_WTNS).values
    be = CpuBackend()
    hvec = be.h_scalars(store, be.gather(store, be.load_witness(store, w)))
    hs = be.to_host(hvec)
    got = msm(be, store, "H", hvec, store.domain_size)
    # Domain evaluations a_i, b_i by brute force from the r1cs and witness, then P(τ) by Lagrange.
    r1cs, wi = read_r1cs(MINI_R1CS), bn254.ints_from_limbs(w)
    n, nc = store.domain_size, r1cs.n_constraints
    a, b = [0] * n, [0] * n
    for m, ev in ((r1cs.A, a), (r1cs.B, b)):
        for row in range(nc):
            lo, hi = int(m.row_ptr[row]), int(m.row_ptr[row + 1])
            ev[row] = sum(c * wi[int(s)] for s, c in zip(m.wire[lo:hi], bn254.ints_from_limbs(m.coef[lo:hi]))) % R
    for s in range(store.n_public + 1):
        a[nc + s] = wi[s]
    lag = [int(v) for v in lagrange_at(t.tau, store.power)]
    at = sum(x * l for x, l in zip(a, lag)) % R
    bt = sum(x * l for x, l in zip(b, lag)) % R
    ct = sum(x * y % R * l for x, y, l in zip(a, b, lag)) % R
    p_over_delta = (at * bt - ct) * pow(t.delta, -1, R) % R
    assert got == bn254.mul(G1, G1.generator, p_over_delta)
    h_pts = bn254.points_from_limbs(G1, store.h[:])
    acc = None
    for s, pt in zip(bn254.ints_from_limbs(hs), h_pts):
        acc = bn254.add(G1, acc, bn254.mul(G1, pt, s))
    assert acc == got


# --- end to end: distprove and snarkjs ---------------------------------------------------------


@pytest.fixture(scope="module")
def dev_keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Dev keys (store, .zkey, vk) for mini and one circuit of each synth kind, with witnesses."""
    root = tmp_path_factory.mktemp("dev")
    out = {}
    for name in ("mini", "chain", "bits", "random"):
        d = root / name
        d.mkdir()
        if name == "mini":
            shutil.copy(MINI_R1CS, d / "circuit.r1cs")
            shutil.copy(MINI_WTNS, d / "witness_0.wtns")
        else:
            write_circuit(make_circuit(name, 220, 2, terms=4, seed=6), d, witnesses=2)
        dev_setup(d / "circuit.r1cs", d / "key.zarr", zkey=d / "key.zkey", vk=d / "vk.json", seed=17, device="cpu", quiet=True)
        out[name] = d
    return out


@pytest.mark.parametrize("name", ["mini", "chain", "bits", "random"])
def test_distprove_proofs_verify_with_snarkjs(dev_keys: dict[str, Path], name: str, snarkjs: str, tmp_path: Path) -> None:
    d = dev_keys[name]
    vk = json.loads((d / "vk.json").read_text())
    for wtns in sorted(d.glob("witness_*.wtns")):
        proof = prove(d / "key.zarr", wtns, backend="cpu")
        assert verify(vk, proof.public_json(), proof.to_json())
        proof.write(tmp_path / "proof.json", tmp_path / "public.json")
        assert snarkjs_verify(d / "vk.json", tmp_path / "public.json", tmp_path / "proof.json", snarkjs)
        wrong = [str((int(proof.public[0]) + 1) % R)] + proof.public_json()[1:]
        assert not verify(vk, wrong, proof.to_json())


@pytest.mark.parametrize("name", ["mini", "chain", "bits"])
def test_zkey_works_with_snarkjs_prove(dev_keys: dict[str, Path], name: str, snarkjs: str, tmp_path: Path) -> None:
    d = dev_keys[name]
    res = subprocess.run([snarkjs, "groth16", "prove", str(d / "key.zkey"), str(d / "witness_0.wtns"),
                          str(tmp_path / "proof.json"), str(tmp_path / "public.json")], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert snarkjs_verify(d / "vk.json", tmp_path / "public.json", tmp_path / "proof.json", snarkjs)
    assert verify(d / "vk.json", tmp_path / "public.json", tmp_path / "proof.json")
    res = subprocess.run([snarkjs, "zkey", "export", "verificationkey", str(d / "key.zkey"), str(tmp_path / "vk.json")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads((tmp_path / "vk.json").read_text()) == json.loads((d / "vk.json").read_text())


def test_store_equals_imported_zkey(dev_keys: dict[str, Path], tmp_path: Path) -> None:
    d = dev_keys["chain"]
    ours = KeyStore(d / "key.zarr")
    theirs = import_key(d / "key.zkey", tmp_path / "imported.zarr")  # also validates every point
    for name in ("a", "b1", "b2", "c", "h", "ic", "a_row_ptr", "a_signal", "a_value", "b_row_ptr", "b_signal", "b_value"):
        assert np.array_equal(getattr(ours, name)[:], getattr(theirs, name)[:]), name
    assert ours.points == theirs.points and ours.vk_json() == theirs.vk_json()
    assert ours.attrs["header"] == theirs.attrs["header"]
    assert ours.attrs["dev_setup"]["insecure"] is True and "toxic waste" in ours.attrs["dev_setup"]["warning"]


def test_warning_and_reproducibility(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = dev_setup(MINI_R1CS, tmp_path / "a.zarr", seed=5, device="cpu")
    assert WARNING in capsys.readouterr().err
    b = dev_setup(MINI_R1CS, tmp_path / "b.zarr", seed=5, device="cpu", quiet=True)
    c = dev_setup(MINI_R1CS, tmp_path / "c.zarr", seed=6, device="cpu", quiet=True)
    assert capsys.readouterr().err == ""
    assert np.array_equal(a.h[:], b.h[:]) and a.content_hash == b.content_hash
    assert not np.array_equal(a.h[:], c.h[:]) and a.content_hash != c.content_hash


def test_cli_setup(tmp_path: Path) -> None:
    def run(*args: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "distprove.cli", *map(str, args)], capture_output=True, text=True, timeout=600)

    res = run("setup", "--dev", MINI_R1CS, tmp_path / "k.zarr", "--vk", tmp_path / "vk.json", "--seed", "3", "--backend", "cpu",
              "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert "INSECURE" in res.stderr and "INSECURE" in res.stdout
    proof = prove(tmp_path / "k.zarr", MINI_WTNS, backend="cpu")
    assert verify(tmp_path / "vk.json", proof.public_json(), proof.to_json())
    assert run("setup", MINI_R1CS, tmp_path / "k2.zarr").returncode != 0  # --dev is required
    bad = DATA / "bad" / "wrong_magic.zkey"
    res = run("setup", "--dev", bad, tmp_path / "k3.zarr")
    assert res.returncode == 1 and res.stderr.strip().splitlines() == [res.stderr.strip()]
    assert res.stderr.startswith("error: ") and bad.name in res.stderr
    assert run("setup", "--dev", MINI_R1CS, tmp_path / "k.zarr").returncode == 1  # exists, no --overwrite


# --- fixed-base scalar multiplication ------------------------------------------------------


def edge_scalars(n: int, seed: int) -> np.ndarray:
    rng = random.Random(seed)
    vals = [0, 1, 2, R - 1, R - 2, 255, 256, 1 << 248] + [rng.randrange(R) for _ in range(n)]
    return bn254.limbs_from_ints(np.array(vals, dtype=object))


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
def test_fixed_base_cpu_equals_mul(group: bn254.Group, workers: int) -> None:
    s = edge_scalars(12, seed=1)
    want = scalar_points(group, bn254.ints_from_limbs(s))
    assert np.array_equal(fixed_base_cpu(group, s, chunk=5, workers=workers), want)
    assert not want[0].any()


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    """kernels/fixedbase.cu (with field.cuh, curve.cuh) built as host C++ with g++."""
    from distprove.backends.gpu.compile import MODULES, module_source


    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found")
    d = tmp_path_factory.mktemp("fbhost")
    (d / "fb.cpp").write_text(module_source(MODULES["fixedbase"]))
    res = subprocess.run([gxx, "-x", "c++", "-std=c++17", "-O2", "-shared", "-fPIC", "-o", str(d / "fb.so"), str(d / "fb.cpp")],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return ctypes.CDLL(str(d / "fb.so"))


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
def test_kernel_logic_on_host(host_kernel: ctypes.CDLL, group: bn254.Group) -> None:
    s = np.ascontiguousarray(edge_scalars(33 if group is G1 else 17, seed=2))  # batches of 16 plus a tail
    table = np.ascontiguousarray(window_table_limbs(group))
    n, w = s.shape[0], group.limbs
    want = fixed_base_cpu(group, s)
    ptr = ctypes.c_void_p
    fused = np.zeros((n, w), np.uint32)
    getattr(host_kernel, f"fixedbase_{group.name.lower()}_host")(
        table.ctypes.data_as(ptr), s.ctypes.data_as(ptr), fused.ctypes.data_as(ptr), ctypes.c_uint32(n))
    assert np.array_equal(fused, want)
    batched, xyzz = np.zeros((n, w), np.uint32), np.zeros((n, 2 * w), np.uint32)
    getattr(host_kernel, f"fixedbase_batch_{group.name.lower()}_host")(
        table.ctypes.data_as(ptr), s.ctypes.data_as(ptr), xyzz.ctypes.data_as(ptr), batched.ctypes.data_as(ptr), ctypes.c_uint32(n))
    assert np.array_equal(batched, want)


