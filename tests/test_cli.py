"""The command line as a user runs it: real processes, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import dask
import numpy as np
import pytest
from click.testing import CliRunner

import distprove
import distprove.config

from conftest import snarkjs_verify

DATA = Path(__file__).parent / "data"
MINI_KEY = DATA / "mini" / "mini_0001.zkey"
MINI_WTNS = DATA / "mini" / "witness.wtns"
BAD = DATA / "bad"


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "distprove.cli", *map(str, args)], capture_output=True, text=True, timeout=600
    )


def assert_one_line_error(res: subprocess.CompletedProcess[str], path: Path, *words: str) -> None:
    assert res.returncode != 0
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ") and path.name in lines[0], lines[0]
    for w in words:
        assert w.lower() in lines[0].lower(), (w, lines[0])


def test_import_export_prove_verify(tmp_path: Path, snarkjs: str) -> None:
    store = tmp_path / "mini.zarr"
    assert run("import-key", MINI_KEY, store).returncode == 0
    vk = tmp_path / "vk.json"
    assert run("export-vk", store, vk).returncode == 0
    assert json.loads(vk.read_text()) == json.loads((DATA / "mini" / "verification_key.json").read_text())
    res = run("prove", store, MINI_WTNS, "--out", tmp_path / "proofs", "--backend", "cpu")
    assert res.returncode == 0, res.stderr
    proof, public = tmp_path / "proofs" / "witness.proof.json", tmp_path / "proofs" / "witness.public.json"
    assert json.loads(public.read_text()) == ["3278", "11"]
    assert run("verify", vk, public, proof).returncode == 0
    assert snarkjs_verify(vk, public, proof, snarkjs)
    public.write_text(json.dumps(["3279", "11"]))
    res = run("verify", vk, public, proof)
    assert res.returncode == 1 and "invalid proof" in res.stderr


ZKEY_BAD = {
    "truncated_header.zkey": ["truncated"],
    "truncated_half.zkey": [],
    "wrong_magic.zkey": ["magic"],
    "section_size_lies.zkey": ["section 5"],
    "protocol_plonk.zkey": ["protocol"],
    "missing_h_section.zkey": ["section 9"],
    "point_off_curve.zkey": ["curve"],
}
WTNS_BAD = {
    "truncated.wtns": [],
    "empty.wtns": [],
    "random_bytes.wtns": [],
    "wrong_prime.wtns": ["prime"],
    "value_ge_r.wtns": [],
}


@pytest.mark.parametrize("name", sorted(ZKEY_BAD))
def test_bad_zkey(name: str, tmp_path: Path) -> None:
    res = run("import-key", BAD / name, tmp_path / "k.zarr")
    assert_one_line_error(res, BAD / name, *ZKEY_BAD[name])
    assert not (tmp_path / "k.zarr").exists()
    res = run("prove", BAD / name, MINI_WTNS, "--out", tmp_path, "--backend", "cpu")
    assert_one_line_error(res, BAD / name, *ZKEY_BAD[name])


@pytest.mark.parametrize("name", sorted(WTNS_BAD))
def test_bad_witness(name: str, tmp_path: Path) -> None:
    res = run("prove", MINI_KEY, BAD / name, "--out", tmp_path, "--backend", "cpu")
    assert_one_line_error(res, BAD / name, *WTNS_BAD[name])
    assert not list(tmp_path.iterdir())


def test_unsatisfied_witness_writes_nothing(tmp_path: Path) -> None:
    res = run("prove", MINI_KEY, BAD / "unsatisfied.wtns", "--out", tmp_path, "--backend", "cpu")
    assert_one_line_error(res, BAD / "unsatisfied.wtns", "does not verify")
    assert not list(tmp_path.iterdir())


def test_witness_of_another_circuit(tmp_path: Path) -> None:
    other = DATA / "mul_chain_1k" / "witnesses" / "witness_0.wtns"
    res = run("prove", MINI_KEY, other, "--out", tmp_path, "--backend", "cpu")
    assert_one_line_error(res, other, "nVars")


def test_example_command(tmp_path: Path) -> None:
    res = run("example", "--out", tmp_path / "ex", "--backend", "cpu")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("verified OK") == 3
    assert res.stdout.count("as snarkjs computes it") == 3
    assert sorted(p.name for p in (tmp_path / "ex").glob("*.proof.json")) == [f"input_{i}.proof.json" for i in range(3)]
    # the witnesses it proved, beside the key as a batch finds them, are snarkjs's files byte for byte
    from distprove import example

    for i in range(3):
        proved = (tmp_path / "ex" / "witnesses" / f"input_{i}.wtns").read_bytes()
        assert proved == (example.WITNESS_DIR / f"witness_{i}.wtns").read_bytes()


def test_batch_fourstep_option_reaches_the_planner(tmp_path: Path) -> None:
    """--fourstep-min-domain puts H of a split-mode proof on the four-step blocks (their tasks
    show in the report); a threshold below 4 is a usage error."""
    wdir = tmp_path / "w"
    wdir.mkdir()
    (wdir / "a.wtns").write_bytes(MINI_WTNS.read_bytes())
    report = tmp_path / "report.json"
    res = run("batch", MINI_KEY, wdir, "--out", tmp_path / "p", "--backend", "cpu", "--workers", "2", "--mode", "split",
              "--fourstep-min-domain", "4", "--report", report)
    assert res.returncode == 0, res.stderr
    assert "ntt-rows-forward" in json.loads(report.read_text())["stage_seconds"]
    res = run("batch", MINI_KEY, wdir, "--fourstep-min-domain", "2")
    assert res.returncode == 2 and "--fourstep-min-domain" in res.stderr


def test_batch_output_is_quiet_and_verbose_on_request(tmp_path: Path) -> None:
    """A local cluster's INFO chatter stays off the terminal unless -v asks for it."""
    wdir = tmp_path / "w"
    wdir.mkdir()
    (wdir / "a.wtns").write_bytes(MINI_WTNS.read_bytes())
    res = run("batch", MINI_KEY, wdir, "--out", tmp_path / "p", "--backend", "cpu", "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert "proved 1, failed 0" in res.stdout + res.stderr
    assert "INFO" not in res.stdout + res.stderr
    res = run("-v", "batch", MINI_KEY, wdir, "--out", tmp_path / "q", "--backend", "cpu", "--workers", "1")
    assert res.returncode == 0 and "INFO distributed" in res.stderr


# --- consistency of the command line ----------------------------------------------------------------


def _commands() -> dict[str, click.Command]:
    """Every command by its full name ("batch", "ptau new", ...)."""
    from distprove.cli import main

    out: dict[str, click.Command] = {}

    def walk(cmd: click.Command, prefix: str) -> None:
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, f"{prefix} {name}".strip())
        else:
            out[prefix] = cmd

    walk(main, "")
    return out


def _help(*args: str) -> str:
    from distprove.cli import main

    res = CliRunner().invoke(main, [*args, "--help"])
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split())


def test_backend_is_one_option_with_one_list_of_names() -> None:
    """Every command that picks where work runs takes --backend with the names of
    distprove.backends.BACKEND_NAMES (which the configuration checks too); none takes --device."""
    from distprove.backends import BACKEND_NAMES

    with_backend = set()
    for name, cmd in _commands().items():
        opts = {o: p for p in cmd.params for o in p.opts + p.secondary_opts}
        assert "--device" not in opts, name
        if "--backend" in opts:
            with_backend.add(name)
            assert tuple(opts["--backend"].type.choices) == BACKEND_NAMES, name
    assert {"prove", "example", "batch", "setup", "ptau new", "ptau prepare"} <= with_backend
    with dask.config.set({"distprove.backend": "moon"}), pytest.raises(distprove.FormatError, match="auto, cpu, gpu"):
        distprove.config.settings()


def test_every_option_has_help_and_scheduler_reads_address() -> None:
    for name, cmd in _commands().items():
        for p in cmd.params:
            if isinstance(p, click.Option) and p.name != "help":
                assert p.help, f"{name} {p.opts[0]} has no help"
                if "--scheduler" in p.opts:
                    assert p.metavar == "ADDRESS", name
    assert "--scheduler ADDRESS" in _help("batch") and "--scheduler TEXT" not in _help("batch")
    assert "points (each worker holds 1/N of the key's points" in _help("batch")
    assert "split for a few proofs of a large key, data otherwise" in _help("batch")


def test_config_defaults_show_their_value_and_where_it_is_set() -> None:
    with dask.config.set({"distprove.backend": "cpu", "distprove.planner.mode": "split"}):
        text = _help("batch")
    assert "[default: cpu (distprove.backend in the dask config; env DASK_DISTPROVE__BACKEND)]" in text
    assert "[default: split (distprove.planner.mode in the dask config; env DASK_DISTPROVE__PLANNER__MODE)]" in text
    assert "[default: no-incremental (distprove.incremental.enabled in the dask config;" in text
    assert "[default: workers (distprove.verify-in in the dask config; env DASK_DISTPROVE__VERIFY_IN)]" in text
    assert "[default: variable-work (distprove.msm.constant-work" in _help("prove")
    for args in (("batch",), ("prove",)):
        assert "default: distprove." not in _help(*args)
    res = subprocess.run([sys.executable, "-m", "distprove.cli", "batch", "--help"], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "DASK_DISTPROVE__BACKEND": "gpu"})
    assert "[default: gpu (from env DASK_DISTPROVE__BACKEND)]" in " ".join(res.stdout.split())


def test_batch_local_cluster_shape_options(tmp_path: Path) -> None:
    """--workers-per-gpu shows its config default, and neither it, --workers nor --witness-workers goes with --scheduler
    (they shape a local cluster, which --scheduler replaces)."""
    from distprove.cli import main

    text = " ".join(_help("batch").split())
    assert "--workers-per-gpu" in text and "[default: None (distprove.cluster.workers-per-" in text and "2 when every key of the batch has fewer than 2^14 domain points" in text
    for extra in (["--workers-per-gpu", "2"], ["--workers", "2"], ["--witness-workers", "2"]):
        res = CliRunner().invoke(main, ["batch", str(tmp_path / "k.zarr"), str(tmp_path), "--scheduler", "tcp://127.0.0.1:1",
                                        *extra])
        assert res.exit_code == 2 and "--scheduler excludes --workers, --workers-per-gpu and --witness-workers" in res.output, res.output


def test_example_with_an_unusable_backend_writes_nothing(tmp_path: Path) -> None:
    from distprove.backends import gpu

    if gpu.available():
        pytest.skip("a GPU is visible: --backend gpu works here")
    res = run("example", "--out", tmp_path / "ex", "--backend", "gpu")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert [ln for ln in res.stderr.splitlines() if ln.strip()] == ["error: backend 'gpu' requested but no CUDA device is visible to CuPy"]
    assert not (tmp_path / "ex").exists()


def test_empty_witness_folder_is_an_error_before_any_progress_bar(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    res = run("batch", MINI_KEY, tmp_path / "w", "--backend", "cpu", "--workers", "1")
    assert_one_line_error(res, tmp_path / "w", "no *.wtns witnesses or *.json inputs found")
    assert "proving" not in res.stdout + res.stderr and not res.stdout


def test_h_is_help_everywhere_and_every_argument_is_described() -> None:
    """-h works as --help on the group and every command; each command's help (beyond its usage
    line) names each of its arguments."""
    from distprove.cli import main

    for args in ([], ["ptau"], ["wtns"]):
        res = CliRunner().invoke(main, [*args, "-h"])
        assert res.exit_code == 0 and "Show this message and exit" in res.output, (args, res.output)
    for name, cmd in _commands().items():
        res = CliRunner().invoke(main, [*name.split(), "-h"])
        assert res.exit_code == 0 and res.output.startswith("Usage:"), (name, res.output)
        text = res.output.split("\n", 1)[1]
        for p in cmd.params:
            if isinstance(p, click.Argument):
                assert p.human_readable_name in text, f"{name}: {p.human_readable_name} is not described"
    assert "-h" in run("-h").stdout and run("batch", "-h").returncode == 0


def test_each_command_states_its_default_output_folder() -> None:
    assert "[default: the current folder]" in _help("prove")
    assert "[default: example-proofs in the current folder]" in _help("example")
    with dask.config.set({"distprove.output.dir": "made"}):
        assert "[default: INPUTS/made (distprove.output.dir in the dask config" in _help("batch")
    text = _help("batch")
    assert "INPUTS: a folder (searched recursively) of .wtns witnesses, or of circom input .json files" in text
    assert "WITNESS_DIR" not in text and "[default: INPUTS/proofs (" in text


def test_batch_verify_option_reads_the_config() -> None:
    """batch and prove take --verify/--no-verify, defaulting to distprove.verify."""
    for cmd in ("batch", "prove"):
        text = _help(cmd)
        assert "--verify / --no-verify" in text
        assert "[default: verify (distprove.verify in the dask config; env DASK_DISTPROVE__VERIFY)]" in text
        with dask.config.set({"distprove.verify": False}):
            assert "[default: no-verify (distprove.verify" in _help(cmd)


def test_prove_unchecked_says_so_on_one_line(tmp_path: Path) -> None:
    """--no-verify writes the proof of an unsatisfied witness (it does not verify) and says once,
    on stderr, that it was not checked; a checked proof says nothing of the kind."""
    vk = DATA / "mini" / "verification_key.json"
    res = run("prove", MINI_KEY, BAD / "unsatisfied.wtns", "--out", tmp_path, "--backend", "cpu", "--no-verify")
    assert res.returncode == 0, res.stderr
    proof = tmp_path / "unsatisfied.proof.json"
    assert [ln for ln in res.stderr.splitlines() if ln.strip()] == [
        f"warning: {proof}: verify off: written without the pairing check (a witness that does not satisfy its "
        "circuit gives a proof that does not verify)"]
    assert run("verify", vk, tmp_path / "unsatisfied.public.json", proof).returncode == 1
    res = run("prove", MINI_KEY, MINI_WTNS, "--out", tmp_path, "--backend", "cpu")
    assert res.returncode == 0 and not res.stderr.strip(), res.stderr


def test_batch_names_each_failure_once_unwrapped_and_says_when_unchecked(tmp_path: Path) -> None:
    """A failed item is one line of the summary (stdout), named nowhere else, whatever its length;
    with --no-verify the summary says once that the proofs were not checked."""
    wdir = tmp_path / ("w" * 90)  # every reason names the witness path: longer than a terminal line
    wdir.mkdir()
    shutil.copy(MINI_WTNS, wdir / "good.wtns")
    shutil.copy(BAD / "truncated.wtns", wdir / "broken.wtns")
    shutil.copy(BAD / "unsatisfied.wtns", wdir / "unsat.wtns")
    res = run("batch", MINI_KEY, wdir, "--out", tmp_path / "p", "--backend", "cpu", "--workers", "1")
    assert res.returncode == 1, res.stderr
    both = res.stdout + res.stderr
    assert "proved 1, failed 2, skipped 0" in res.stdout and "verify off" not in both
    for name in ("broken", "unsat"):
        lines = [ln for ln in both.splitlines() if name in ln]
        assert len(lines) == 1 and lines[0].startswith(f"FAILED {name}: ") and lines[0] in res.stdout.splitlines(), both
    assert f"FAILED broken: {wdir / 'broken.wtns'}: truncated" in res.stdout  # one line, longer than 100 columns
    assert "does not verify" in both and "truncated" in both
    res = run("batch", MINI_KEY, wdir, "--out", tmp_path / "q", "--backend", "cpu", "--workers", "1", "--no-verify")
    assert res.returncode == 1, res.stderr
    assert "proved 2, failed 1, skipped 0" in res.stdout and (tmp_path / "q" / "unsat.proof.json").exists()
    assert res.stdout.count("verify off: no proof was checked before it was written") == 1, res.stdout


def _r1cs_counts(path: Path) -> tuple[int, int, int]:
    """(nConstraints, nWires, nPubOut + nPubIn) of an .r1cs header."""
    from distprove.formats.r1cs import read_r1cs

    r = read_r1cs(path)
    return r.n_constraints, r.n_wires, r.n_pub_out + r.n_pub_in


def test_info_key_shows_the_circuits_constraints_as_its_r1cs_header(tmp_path: Path) -> None:
    """`info KEY` and import-key's summary give the circuit's own R1CS constraints (not the
    nPublic + 1 more rows of the key), its signals and public signals as the .r1cs header has
    them, for a .zkey, its imported store and a dev key of a synthetic circuit."""
    for zkey, r1cs in ((MINI_KEY, DATA / "mini" / "mini.r1cs"),
                       (DATA / "mul_chain_1k" / "circuit_final.zkey", DATA / "mul_chain_1k" / "circuit.r1cs")):
        n, wires, public = _r1cs_counts(r1cs)
        power = (n + public).bit_length()
        want = f"{n} constraints, {wires} signals, {public} public, domain 2^{power}"
        store = tmp_path / f"{zkey.stem}.zarr"
        res = run("import-key", zkey, store)
        assert res.returncode == 0 and res.stdout.strip().endswith(f": {want}"), res.stdout
        for key in (zkey, store):
            res = run("info", key)
            assert res.returncode == 0 and res.stdout.strip() == f"{key}: {want}", res.stdout
    assert "1021 constraints" in run("info", DATA / "mul_chain_1k" / "circuit_final.zkey").stdout  # circuits/mul_chain_1k.circom: N = 1021
    assert run("synth", "chain", "-n", "100", "-k", "3", "--out", tmp_path / "syn").returncode == 0
    res = run("setup", "--dev", tmp_path / "syn" / "circuit.r1cs", tmp_path / "syn.zarr", "--seed", "1", "--backend", "cpu")
    n, wires, public = _r1cs_counts(tmp_path / "syn" / "circuit.r1cs")
    assert n == 100 and f": {n} constraints, {wires} signals, {public} public, domain 2^7 in " in res.stdout, res.stdout
    assert run("info", tmp_path / "syn.zarr").stdout.strip().endswith(f": {n} constraints, {wires} signals, {public} public, domain 2^7")
    res = run("info", BAD / "truncated_half.zkey")
    assert_one_line_error(res, BAD / "truncated_half.zkey", "truncated")


def test_a_key_without_the_public_rows_has_no_constraint_count() -> None:
    from distprove.keystore import circuit_constraints

    assert circuit_constraints("k", 12, np.arange(3), 2) == 10
    for last, tail in ((1, np.arange(3)), (12, np.array([0, 2, 1])), (12, np.arange(2)), (-1, np.zeros(0))):
        with pytest.raises(distprove.FormatError, match="k: the A matrix does not end with the 3 rows"):
            circuit_constraints("k", last, tail, 2)


def test_overwrite_is_said_in_the_words_of_the_caller(tmp_path: Path) -> None:
    store = tmp_path / "mini.zarr"
    assert run("import-key", MINI_KEY, store).returncode == 0
    res = run("import-key", MINI_KEY, store)
    assert_one_line_error(res, store, "already exists (pass --overwrite to replace it)")
    assert "overwrite=True" not in res.stderr
    with pytest.raises(distprove.FormatError) as err:
        distprove.import_key(MINI_KEY, store)
    assert str(err.value) == f"{store}: already exists (pass overwrite=True to replace it)"
    assert run("import-key", MINI_KEY, store, "--overwrite").returncode == 0
