"""The ``distprove`` command line."""

from __future__ import annotations

import functools
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

import click

from .backends import BACKEND_NAMES
from .choices import PLANNER_MODES
from .errors import DistproveError, OutputExists

BACKEND_CHOICE = click.Choice(BACKEND_NAMES)
BACKEND_HELP = "Where the proving runs: cpu (the reference, no GPU needed), gpu, or auto (the GPU when CuPy sees one)."


def config_default(name: str, words: tuple[str, str] = ("on", "off"), template: str = "{}") -> str:
    """The default of an option that falls back to ``distprove.<name>`` in the dask configuration:
    the value in effect and where it is set, e.g. "auto (distprove.backend in the dask config;
    env DASK_DISTPROVE__BACKEND)". A boolean reads as ``words`` (true, false); ``template``
    places the value in what the default means (e.g. "INPUTS/{}" for a folder inside INPUTS)."""
    from . import config

    value = config.get(name, None)
    env = "DASK_DISTPROVE__" + name.upper().replace(".", "__").replace("-", "_")
    if isinstance(value, bool):
        value = words[0] if value else words[1]
    value = template.format(value)
    if env in os.environ:
        return f"{value} (from env {env})"
    return f"{value} (distprove.{name} in the dask config; env {env})"


class ConfigOption(click.Option):
    """An option whose default is a ``distprove`` dask-config setting; help shows its value and
    source (``template``: as :func:`config_default`)."""

    def __init__(self, *args: Any, config_name: str, template: str = "{}", **kwargs: Any) -> None:
        self.config_name = config_name
        self.template = template
        super().__init__(*args, **kwargs)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)  # no "[default: ...]" of its own: the default is None
        if record is None:
            return None
        if self.secondary_opts:  # a --x/--no-x pair: the default reads as the flag it equals
            default = config_default(self.config_name, (self.opts[0].lstrip("-"), self.secondary_opts[0].lstrip("-")))
        else:
            default = config_default(self.config_name, template=self.template)
        return record[0], f"{record[1]}  [default: {default}]"


def _friendly_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn distprove's own errors into one line on stderr and exit status 1, no traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except OutputExists as exc:  # the command line's word for overwrite=True
            click.echo(f"error: {exc.path}: already exists (pass --overwrite to replace it)", err=True)
            sys.exit(1)
        except DistproveError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)

    return wrapper


CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}
"""Every command's help: -h or --help (subcommands inherit the group's context settings)."""


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="distprove")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def main(verbose: int) -> None:
    """Groth16 proofs for circom/snarkjs circuits, on CPUs or a cluster of GPUs."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # distributed logs every scheduler and worker event at INFO; a local cluster's lifecycle is
    # noise on a terminal unless asked for. Through the environment, so spawned workers see it too
    # (dask reads it when it is first imported, which the commands do later).
    if verbose:
        os.environ["DASK_LOGGING__DISTRIBUTED"] = logging.getLevelName(level).lower()
    else:
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")


@main.command("import-key")
@click.argument("zkey", type=click.Path(dir_okay=False))
@click.argument("store", type=click.Path(file_okay=False))
@click.option("--overwrite", is_flag=True, help="Replace an existing store.")
@click.option("--backend", type=BACKEND_CHOICE, default="auto", show_default=True,
              help="Where the point checks run (auto: the GPU when there is one).")
@_friendly_errors
def import_key_cmd(zkey: str, store: str, overwrite: bool, backend: str) -> None:
    """Import a snarkjs Groth16 ZKEY into a zarr key STORE (every point and record checked).

    ZKEY: the .zkey file (snarkjs groth16 setup / zkey contribute). STORE: the key store folder
    to write. Prints the circuit's constraints, signals, public signals and domain."""
    from .keystore import import_key

    key = import_key(zkey, store, overwrite=overwrite, device=backend)
    click.echo(f"imported {zkey} -> {store}: {key.shape}")


@main.command("export-vk")
@click.argument("key", type=click.Path())
@click.argument("vk_json", type=click.Path(dir_okay=False))
@_friendly_errors
def export_vk_cmd(key: str, vk_json: str) -> None:
    """Write the verification key of KEY as snarkjs's verification_key.json.

    KEY: a key store (import-key) or a .zkey. VK_JSON: the file to write (replaced if it exists)."""
    from .formats.jsonio import write_json_atomic
    from .keystore import open_key

    write_json_atomic(vk_json, open_key(key).vk_json())
    click.echo(f"wrote {vk_json}")


@main.command("prove")
@click.argument("key", type=click.Path())
@click.argument("witness", type=click.Path(dir_okay=False))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=".",
              help="Folder for <name>.proof.json and <name>.public.json.  [default: the current folder]")
@click.option("--backend", type=BACKEND_CHOICE, default="auto", show_default=True, help=BACKEND_HELP)
@click.option("--verify/--no-verify", "check", default=None, cls=ConfigOption, config_name="verify",
              help="Check the proof with a pairing before writing it (--no-verify: written unchecked, with a warning).")
@click.option("--constant-work/--variable-work", "constant_work", default=None, cls=ConfigOption,
              config_name="msm.constant-work",
              help="MSM mode: every scalar in every window (same proof, slower; NOT constant-time, "
                   "see docs/CONSTANT_WORK.md); --variable-work skips zero digits")
@_friendly_errors
def prove_cmd(key: str, witness: str, out_dir: str, backend: str, check: bool | None, constant_work: bool | None) -> None:
    """Prove one WITNESS (.wtns) with KEY (a key store or a .zkey) into OUT."""
    from . import config
    from .errors import InvalidProofError
    from .keystore import open_key
    from .prover import prove
    from .verifier import verify

    if check is None:
        check = config.settings().verify
    k = open_key(key, device=backend)  # a .zkey's point checks run where the proof will
    proof = prove(k, witness, backend=backend, constant_work=constant_work)
    if check and not verify(k.vk_json(), proof.public_json(), proof.to_json()):
        raise InvalidProofError(f"{witness}: the proof does not verify (is the witness satisfying the circuit?); nothing written")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(witness).name.removesuffix(".wtns")
    proof.write(out / f"{stem}.proof.json", out / f"{stem}.public.json")
    click.echo(f"{witness}: proof written to {out / (stem + '.proof.json')} in {proof.timings['total']:.2f} s")
    if not check:
        click.echo(f"warning: {out / (stem + '.proof.json')}: verify off: written without the pairing check (a "
                   "witness that does not satisfy its circuit gives a proof that does not verify)", err=True)


@main.command("verify")
@click.argument("vk_json", type=click.Path(dir_okay=False))
@click.argument("public_json", type=click.Path(dir_okay=False))
@click.argument("proof_json", type=click.Path(dir_okay=False))
@_friendly_errors
def verify_cmd(vk_json: str, public_json: str, proof_json: str) -> None:
    """Check a proof; exit status 0 only when it is valid.

    VK_JSON: the verification key (export-vk, or snarkjs zkey export verificationkey).
    PUBLIC_JSON: the public signals (<name>.public.json). PROOF_JSON: the proof (<name>.proof.json)."""
    from .verifier import verify

    if verify(vk_json, public_json, proof_json):
        click.echo("OK")
        return
    click.echo(f"error: {proof_json}: invalid proof", err=True)
    sys.exit(1)


@main.command("example")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="example-proofs",
              help="Folder for the imported key (key.zarr), verification_key.json and the proofs.  "
                   "[default: example-proofs in the current folder]")
@click.option("--backend", type=BACKEND_CHOICE, default="auto", show_default=True, help=BACKEND_HELP)
@_friendly_errors
def example_cmd(out_dir: str, backend: str) -> None:
    """Import the bundled example key, prove its witnesses into OUT and verify every proof."""
    from .example import run_example

    ok = run_example(Path(out_dir), backend=backend, echo=click.echo)
    sys.exit(0 if ok else 1)


@main.command("synth")
@click.argument("kind", type=click.Choice(["chain", "bits", "random"]))
@click.option("--constraints", "-n", type=click.IntRange(min=1), required=True, help="Number of constraints.")
@click.option("--public", "-k", type=click.IntRange(min=0), default=1, show_default=True, help="Public signals.")
@click.option("--terms", "-t", type=click.IntRange(min=1), default=3, show_default=True,
              help="Terms per A and B row (random only).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True,
              help="Folder for circuit.r1cs, witness_<i>.wtns and circuit.json.")
@click.option("--witnesses", "-m", type=click.IntRange(min=0), default=1, show_default=True,
              help="Satisfying witnesses to write (witness_0.wtns, ...).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the circuit's coefficients and witness values (same seed, same files).")
@_friendly_errors
def synth_cmd(kind: str, constraints: int, public: int, terms: int, out_dir: str, witnesses: int, seed: int) -> None:
    """Write a synthetic KIND circuit (chain, bits or random) as .r1cs with satisfying .wtns witnesses."""
    import time

    from .synth import make_circuit, write_circuit

    t0 = time.perf_counter()
    try:
        circuit = make_circuit(kind, constraints, public, terms, seed)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    meta = write_circuit(circuit, out_dir, witnesses)
    click.echo(
        f"wrote {kind} circuit to {out_dir}: {meta['n_constraints']} constraints, {meta['n_wires']} wires, "
        f"{meta['n_public']} public, {witnesses} witnesses in {time.perf_counter() - t0:.1f} s"
    )


@main.command("setup")
@click.option("--dev", is_flag=True, help="Required: an INSECURE setup with known toxic waste, for tests/benchmarks.")
@click.argument("circuit", type=click.Path(dir_okay=False))
@click.argument("store", type=click.Path(file_okay=False))
@click.option("--zkey", type=click.Path(dir_okay=False), help="Also write a snarkjs .zkey.")
@click.option("--vk", type=click.Path(dir_okay=False), help="Also write verification_key.json.")
@click.option("--seed", type=int, default=None, help="Derive the secrets from SEED (default: random).")
@click.option("--backend", type=BACKEND_CHOICE, default="auto", show_default=True,
              help="Where the fixed-base scalar multiplications run: cpu, gpu, or auto (the GPU when CuPy sees one).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Processes for the scalar work (default: all cores).")
@click.option("--overwrite", is_flag=True, help="Replace an existing store.")
@_friendly_errors
def setup_cmd(dev: bool, circuit: str, store: str, zkey: str | None, vk: str | None, seed: int | None,
              backend: str, workers: int | None, overwrite: bool) -> None:
    """Make a Groth16 key STORE for CIRCUIT (.r1cs). Only --dev (insecure, for testing) is supported."""
    import time

    from .devsetup import dev_setup

    if not dev:
        raise click.UsageError("only the insecure --dev setup is implemented; real keys come from a snarkjs ceremony")
    t0 = time.perf_counter()
    key = dev_setup(circuit, store, zkey=zkey, vk=vk, seed=seed, device=backend, workers=workers, overwrite=overwrite)
    click.echo(f"dev key {store}: {key.shape} in {time.perf_counter() - t0:.1f} s (INSECURE: testing only)")


@main.command("compile")
@click.argument("modules", nargs=-1)
@click.option("--arch", default=None, metavar="sm_XY",
              help="Target architecture (default: this machine's GPU); with it no GPU is needed.")
@click.option("--option", "options", multiple=True, metavar="OPT", help="Extra NVRTC option, e.g. -DDP_PTX_MUL.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Parallel compiles (default: CPUs).")
@_friendly_errors
def compile_cmd(modules: tuple[str, ...], arch: str | None, options: tuple[str, ...], jobs: int | None) -> None:
    """Compile the GPU kernel MODULES (default: all) into the disk cache ($DISTPROVE_CACHE_DIR).

    A first proof otherwise compiles them on demand (about half a minute for the set); run this
    once per machine or container image so workers start warm. Without MODULES and --option it
    also fills the other on-disk JIT caches a first batch would fill: numba's (the CPU's point
    checks, with or without CuPy) and, on a machine whose GPU the build is for, CuPy's own kernels
    (one grouped proof of the bundled example on the GPU).
    """
    import time

    from . import warmup

    warm = not modules and not options
    try:
        import cupy  # noqa: F401
    except ImportError:
        if not warm or arch:
            raise DistproveError("compile: CuPy is not installed (pip install 'distprove[gpu]')") from None
        _echo_warmed(warmup.warm_numba())
        click.echo("GPU kernels: none compiled, CuPy is not installed (pip install 'distprove[gpu]')")
        return
    from .backends import gpu
    from .backends.gpu.compile import build, cache_dir, device_arch

    t0 = time.perf_counter()
    try:
        timings = build(modules or None, options, arch=arch, jobs=jobs)
    except ValueError as exc:  # an unknown module name
        raise DistproveError(str(exc)) from None
    except RuntimeError as exc:  # NVRTC's log: the whole of it is what one needs to fix the kernel
        click.echo(str(exc), err=True)
        sys.exit(1)
    for t in timings:
        click.echo(f"{t.name:10} {t.source:8} {t.seconds:7.1f} s")
    click.echo(f"{len(timings)} module(s) in {cache_dir()} ({time.perf_counter() - t0:.1f} s)")
    if warm:
        _echo_warmed(warmup.warm_numba())
        if gpu.available() and (arch is None or arch == device_arch()):
            try:
                _echo_warmed(warmup.warm_gpu())
            except RuntimeError as exc:
                raise DistproveError(str(exc)) from None
            except Exception as exc:  # the kernels are compiled: say what the warm-up met, in one line
                from .errors import one_line

                raise DistproveError(f"compile: the kernels are cached, warming CuPy's own failed: {one_line(exc)}") from None


def _echo_warmed(w: Any) -> None:
    """One line for a filled JIT cache (:class:`distprove.warmup.Warmed`)."""
    click.echo(f"{w.name}: warm in {w.seconds:.1f} s ({w.cache})")


def _package_versions() -> dict[str, str]:
    """Versions of distprove and the packages a cluster must agree on ("-" when not installed)."""
    import importlib

    out = {}
    for name in ("distprove", "dask", "distributed", "zarr", "cupy"):
        try:
            out[name] = str(importlib.import_module(name).__version__)
        except ImportError:
            out[name] = "-"
    return out


def _gpu_summary() -> str:
    """This process's GPU: CuPy device 0 (a dask-cuda worker's own GPU) with its memory, or why none."""
    try:
        import cupy
    except ImportError:
        return "no CuPy"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        if count == 0:
            return "no GPU"
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        free, total = cupy.cuda.Device(0).mem_info
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        return f"no GPU ({exc})"
    return f"{name}, {free / 2**30:.1f} of {total / 2**30:.1f} GiB free ({count} visible)"


def _worker_report(dask_worker: Any) -> dict[str, Any]:
    """What ``distprove info`` shows for one worker (runs on the worker through ``Client.run``)."""
    report: dict[str, Any] = {"gpu": _gpu_summary(), "versions": _package_versions(), "backend": None, "keys": None}
    from .cluster.state import PLUGIN_NAME

    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    if plugin is not None:
        report["backend"] = plugin.backend.name
        report["keys"] = []
        for h, path in plugin.resident_paths.items():
            held = plugin.backend.resident_bytes(h)
            report["keys"].append(f"{path} ({h[:12]}{f', {held / 2**30:.2f} GiB on the device' if held else ''})")
    return report


def _memory_plan_text(key: str, memory_limit: str, group: int | None) -> str:
    """The GPU memory plan (:func:`distprove.memplan.plan_memory`) of KEY for ``memory_limit``
    bytes, as ``distprove info`` shows it, or the plan's error (the smallest plan's size)."""
    from dask.utils import parse_bytes

    from . import config
    from .backends.gpu.backend import group_cap
    from .keystore import open_header
    from .memplan import GPU_OVERHEAD, KeyDims, MemoryBudgetError, plan_memory

    try:
        budget = parse_bytes(memory_limit)
    except ValueError:
        raise click.BadParameter(f"{memory_limit!r} is not a size like '24GiB'", param_hint="--memory-limit") from None
    header = open_header(key)
    want = group or config.group_proofs() or group_cap(int(header.domain_size))
    try:
        plan = plan_memory(KeyDims.of(header), budget, want, in_flight=config.groups_in_flight(), overhead=GPU_OVERHEAD)
    except MemoryBudgetError as exc:
        return f"memory plan: {exc}"
    return plan.describe()


@main.command("info")
@click.argument("key", type=click.Path(), required=False)
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Scheduler to ask (default: DASK_SCHEDULER_ADDRESS / dask's scheduler-address; none: this machine only).")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds to wait for the scheduler.")
@click.option("--memory-limit", default=None, metavar="SIZE",
              help="With KEY: also show its GPU memory plan for this budget (a size like '24GiB'): the "
                   "resident and streamed base arrays, the chunk size and the most proofs a group holds.")
@click.option("--group", "group", type=click.IntRange(min=1), default=None,
              help="With --memory-limit: the group size wanted  [default: distprove.msm.group-proofs, else "
                   "the GPU's cap for the key's domain]")
@_friendly_errors
def info_cmd(key: str | None, scheduler: str | None, timeout: float, memory_limit: str | None,
             group: int | None) -> None:
    """Show KEY's circuit or, without KEY, the versions here and, with a scheduler, its workers:
    GPU, backend, resident keys, versions.

    KEY: a key store or .zkey; shows its circuit's R1CS constraints (the circuit's own, as
    circom counts them: the nPublic + 1 rows the setup adds for the public signals left out),
    signals, public signals and domain size, reading no point; with --memory-limit, the GPU
    memory plan a worker with that budget follows (distprove.gpu.memory-limit)."""
    import dask.config

    if memory_limit is not None and key is None:
        raise click.UsageError("--memory-limit plans a KEY: give one")
    if key is not None:
        if scheduler is not None:
            raise click.UsageError("KEY is read here: it excludes --scheduler")
        from .keystore import key_shape

        click.echo(f"{key}: {key_shape(key)}")
        if memory_limit is not None:
            click.echo(_memory_plan_text(key, memory_limit, group))
        return

    versions = _package_versions()
    click.echo("here: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + f"; GPU: {_gpu_summary()}")
    address = scheduler or dask.config.get("scheduler-address", None)
    if not address:
        click.echo("no scheduler given (--scheduler ADDRESS or DASK_SCHEDULER_ADDRESS): nothing more to show")
        return
    from distributed import Client

    from .witness.pool import WITNESS_RESOURCE

    try:
        client = Client(address, timeout=timeout)
    except (OSError, TimeoutError) as exc:
        raise DistproveError(f"{address}: cannot reach the scheduler ({exc.__class__.__name__}: {exc})") from None
    with client:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        reports = client.run(_worker_report) if workers else {}
        click.echo(f"scheduler {address}, dashboard {client.dashboard_link}, {len(workers)} worker(s)")
        for addr in sorted(workers):
            w, r = workers[addr], reports.get(addr, {})
            click.echo(f"  {addr}  name {w.get('name')}  threads {w.get('nthreads')}  memory {w.get('memory_limit', 0) / 2**30:.1f} GiB")
            witness = w.get("resources", {}).get(WITNESS_RESOURCE, 0)
            if witness:
                click.echo(f"    witness worker: computes witnesses in {int(witness)} processes, proves nothing")
            click.echo(f"    GPU: {r.get('gpu', '?')}")
            if r.get("backend") is None and r.get("keys") is None:
                click.echo("    distprove state: not registered yet (no batch has run on this worker)")
            else:
                click.echo(f"    backend {r.get('backend')}; resident keys: {', '.join(r['keys']) or 'none'}")
            diff = {k: v for k, v in r.get("versions", {}).items() if v != versions.get(k)}
            click.echo("    versions: " + (", ".join(f"{k} {v} (here {versions[k]})" for k, v in diff.items()) or "same as here"))


@main.command("batch")
@click.argument("key", type=click.Path())
@click.argument("inputs", type=click.Path(file_okay=False))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None, cls=ConfigOption,
              config_name="output.dir", template="INPUTS/{}",
              help="Folder for <name>.proof.json and <name>.public.json (subfolders of INPUTS kept).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Dask scheduler address (default: DASK_SCHEDULER_ADDRESS, else a local cluster).")
@click.option("--backend", type=BACKEND_CHOICE, default=None, cls=ConfigOption, config_name="backend",
              help="Backend on the workers: cpu, gpu, or auto (the GPU when CuPy sees one).")
@click.option("--mode", type=click.Choice(PLANNER_MODES), default=None, cls=ConfigOption,
              config_name="planner.mode",
              help="Planner: data (whole proofs, one per worker at a time: throughput), split (each proof's MSMs "
                   "spread over all workers: latency), points (each worker holds 1/N of the key's points and "
                   "computes every proof's partial MSMs: a key larger than one worker), or auto (points for a key "
                   "over a worker's memory budget, distprove.gpu.memory-limit or distprove.planner.worker-memory; "
                   "split for a few proofs of a large key, data otherwise; the thresholds are distprove.planner's "
                   "split-min-domain and split-max-proofs-per-worker).")
@click.option("--workers", "n_workers", type=click.IntRange(min=1), default=None,
              help="A local cluster's GPUs (or, without one, its worker processes)  [default: every GPU, else one "
                   "per CPU core]")
@click.option("--workers-per-gpu", type=click.IntRange(min=1), default=None, cls=ConfigOption,
              config_name="cluster.workers-per-gpu",
              help="Worker processes sharing each GPU of a local cluster: more for small circuits, whose proofs "
                   "wait on one process's host work; each holds its own copy of the key on the GPU. None (null): "
                   "2 when every key of the batch has fewer than 2^14 domain points, else 1.")
@click.option("--witness-workers", type=click.IntRange(min=0), default=0, show_default=True,
              help="Inputs: CPU-only worker processes a local cluster starts beside its provers; they compute the "
                   "witnesses (each with the 'witness' resource) and prove nothing.")
@click.option("--report", "report_json", type=click.Path(dir_okay=False), default=None,
              help="Also write the report as JSON here.")
@click.option("--verify/--no-verify", "check", default=None, cls=ConfigOption, config_name="verify",
              help="Check each proof with a pairing before writing it (--no-verify: written unchecked, said once "
                   "in the summary).")
@click.option("--incremental/--no-incremental", default=None, cls=ConfigOption, config_name="incremental.enabled",
              help="Scheduled runs: prove only witnesses without a verified proof, keep a state file.")
@click.option("--retry-failed", is_flag=True, help="With --incremental: try witnesses that failed before again.")
@click.option("--verify-in", type=click.Choice(["workers", "client"]), default=None, cls=ConfigOption,
              config_name="verify-in",
              help="Where proofs are assembled, checked and written: on the workers, or in a process pool here "
                   "(faster on GPUs; needs the witness and output folders here).")
@click.option("--fourstep-min-domain", type=click.IntRange(min=4), default=None,
              help="Split mode: compute H as four-step NTT blocks across the workers for domains of at least this "
                   "size  [default: 65536 on CPU workers, never on GPU workers]")
@click.option("--witness-gen", type=click.Path(), default=None,
              help="Inputs: the circuit's witness generator: a .wasm (circom --wasm), a folder written by circom --c "
                   "or the binary built from it; INPUTS' *.json inputs become witnesses on the workers' CPU cores  "
                   "[default: the one beside KEY, a <name>_cpp folder or its binary before a .wasm, for a folder of *.json]")
@click.option("--wasm", type=click.Path(dir_okay=False), default=None,
              help="Inputs: the same as --witness-gen, for a circuit's .wasm.")
@click.option("--keep-witnesses", is_flag=True, help="Inputs: keep each computed witness as <name>.wtns beside its proof.")
@_friendly_errors
def batch_cmd(
    key: str, inputs: str, out_dir: str | None, scheduler: str | None, backend: str | None,
    mode: str | None, n_workers: int | None, workers_per_gpu: int | None, witness_workers: int, report_json: str | None,
    check: bool | None, incremental: bool | None, retry_failed: bool,
    verify_in: str | None, fourstep_min_domain: int | None, witness_gen: str | None, wasm: str | None,
    keep_witnesses: bool,
) -> None:
    """Prove every witness under INPUTS with KEY on a Dask cluster; exit status 1 if any failed.

    KEY: a key store or .zkey. INPUTS: a folder (searched recursively) of .wtns witnesses, or of
    circom input .json files whose witnesses the workers compute first with the circuit's wasm
    (--witness-gen: a .wasm, a circom --c folder or its binary). Proofs go to --out, by default INPUTS/proofs (distprove.output.dir). The progress
    bar counts the failed items; the summary at the end names each with its reason."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from . import config
    from .cluster.batching import batch

    if scheduler and (n_workers or workers_per_gpu or witness_workers):
        raise click.UsageError("--scheduler excludes --workers, --workers-per-gpu and --witness-workers (they shape a local cluster)")
    if witness_gen and wasm:
        raise click.UsageError("--wasm is --witness-gen for a .wasm: pass one of them")
    from .cluster.tasks import Status
    from .formats.jsonio import write_json_atomic

    extra: dict[str, Any] = {}
    run = batch
    if incremental if incremental is not None else config.settings().incremental:
        from .cluster.incremental import batch as run  # same arguments; skips what is already proved

        extra["retry_failed"] = retry_failed

    progress = Progress(
        TextColumn("proving"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(), console=Console(stderr=True),
    )
    task = progress.add_task("batch", total=None, failed=0)
    failed = 0

    def on_start(n: int) -> None:  # the bar appears once the witnesses and the cluster are there
        progress.update(task, total=n)
        progress.start()

    def on_result(res: Any) -> None:  # failures are counted here and named once, in the summary
        nonlocal failed
        failed += res.status == Status.FAILED
        progress.update(task, advance=1, failed=failed)

    try:
        report = run(
            inputs, key, out_dir, scheduler=scheduler, backend=backend, mode=mode, n_workers=n_workers,
            workers_per_gpu=workers_per_gpu, witness_workers=witness_workers, verify=check, verify_in=verify_in, fourstep_min_domain=fourstep_min_domain,
            witness_gen=witness_gen, wasm=wasm, keep_witnesses=keep_witnesses,
            on_start=on_start, on_result=on_result, echo=None, **extra,
        )
    finally:
        if progress.live.is_started:  # stopping a bar never shown would print an empty line
            progress.stop()
    click.echo(report.summary())
    if report_json:
        write_json_atomic(report_json, report.to_json())
    sys.exit(0 if report.ok else 1)


@main.group("ptau")
def ptau_group() -> None:
    """Powers-of-tau files: prepare for phase 2, or make an insecure one for tests."""


@ptau_group.command("prepare")
@click.argument("in_ptau", type=click.Path(dir_okay=False))
@click.argument("out_ptau", type=click.Path(dir_okay=False))
@click.option("--backend", type=BACKEND_CHOICE, default="auto", show_default=True,
              help="Where the Lagrange levels are computed: cpu, gpu, or auto (the GPU when CuPy sees one).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Compute the levels on this Dask scheduler's workers (they must see IN_PTAU under the same path).")
@click.option("--workers", "n_workers", type=click.IntRange(min=1), default=None,
              help="Compute the levels on a local cluster of N workers (one per GPU, else CPU processes)  [default: in this process]")
@_friendly_errors
def ptau_prepare_cmd(in_ptau: str, out_ptau: str, backend: str, scheduler: str | None, n_workers: int | None) -> None:
    """Write OUT_PTAU = IN_PTAU with the Lagrange sections 12-15 (as `snarkjs powersoftau prepare phase2`)."""
    import time

    from .ptau import prepare

    if scheduler and n_workers:
        raise click.UsageError("--scheduler and --workers exclude each other (--workers starts a local cluster)")
    t0 = time.perf_counter()
    prepare(in_ptau, out_ptau, backend=backend, scheduler=scheduler, n_workers=n_workers)
    click.echo(f"prepared {in_ptau} -> {out_ptau} in {time.perf_counter() - t0:.1f} s")


@ptau_group.command("new")
@click.option("--dev", is_flag=True, help="Required: INSECURE random tau, alpha, beta (no ceremony), for tests/benchmarks.")
@click.option("--power", type=click.IntRange(1, 28), required=True, help="log2 of the number of powers.")
@click.argument("out_ptau", type=click.Path(dir_okay=False))
@click.option("--seed", type=int, default=None, help="Derive tau, alpha, beta from SEED (default: random).")
@click.option("--backend", type=BACKEND_CHOICE, default="auto", show_default=True,
              help="Where the fixed-base scalar multiplications run: cpu, gpu, or auto (the GPU when CuPy sees one).")
@_friendly_errors
def ptau_new_cmd(dev: bool, power: int, out_ptau: str, seed: int | None, backend: str) -> None:
    """Write an unprepared OUT_PTAU of 2^POWER powers. Only --dev (insecure, for testing) is supported."""
    from .ptau import new_dev

    if not dev:
        raise click.UsageError("only --dev is implemented (for tests and benchmarks only); real files come from a ceremony")
    new_dev(out_ptau, power, seed=seed, device=backend)
    click.echo(f"wrote {out_ptau}: power {power} (INSECURE: for tests and benchmarks only)")


# ---- wtns: witnesses from a circuit's witness generator and inputs ------------------------------


@main.group("wtns")
def wtns_group() -> None:
    """Circom witnesses (.wtns)."""


@wtns_group.command("calculate")
@click.argument("gen", type=click.Path())
@click.argument("input_json", type=click.Path())
@click.argument("out_wtns", type=click.Path())
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Processes for a folder of inputs (default: one per core).")
@_friendly_errors
def wtns_calculate_cmd(gen: str, input_json: str, out_wtns: str, jobs: int | None) -> None:
    """Compute the witness of INPUT_JSON with the circuit's witness generator GEN into OUT_WTNS,
    byte for byte what `snarkjs wtns calculate` writes. GEN is a .wasm (circom --wasm), a folder
    written by circom --c (<name>_cpp/) or the binary built from it. The circuit's log() lines go
    to stdout.

    INPUT_JSON may be a folder: every *.json in it becomes OUT_WTNS/<name>.wtns, computed in --jobs
    processes at once; an input that fails is reported on one line and the others are written
    (exit status 1 if any failed)."""
    import time

    from .formats.wtns import write_wtns
    from .witness.generators import calculate_folder, open_generator

    t0 = time.perf_counter()
    if os.path.isdir(input_json):
        done = calculate_folder(gen, input_json, out_wtns, jobs)
        if not done:
            click.echo(f"error: {input_json}: no *.json inputs in the folder", err=True)
            sys.exit(1)
        failed = [reason for _, reason in done if reason]
        for reason in failed:
            click.echo(f"error: {reason}", err=True)
        seconds = time.perf_counter() - t0
        click.echo(f"wrote {len(done) - len(failed)} of {len(done)} witnesses into {out_wtns} in {seconds:.2f} s "
                   f"({len(done) / seconds if seconds > 0 else 0:.1f} inputs/s)", err=True)
        sys.exit(1 if failed else 0)
    generator = open_generator(gen, log_line=click.echo)
    try:
        values = generator.calculate_file(input_json)
    finally:
        generator.close()
    write_wtns(out_wtns, values)
    click.echo(f"wrote {out_wtns}: {len(values)} values in {time.perf_counter() - t0:.2f} s", err=True)


@main.command("serve")
@click.argument("keys", nargs=-1, required=True, metavar="KEY")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (a non-local one needs --token-file).")
@click.option("--port", type=click.IntRange(0, 65535), default=8717, show_default=True, help="Port to listen on.")
@click.option("--scheduler", default=None, metavar="ADDRESS", help="An existing cluster's scheduler (default: a local cluster).")
@click.option("--backend", type=BACKEND_CHOICE, default=None, help=BACKEND_HELP)
@click.option("--workers", "n_workers", type=click.IntRange(min=1), default=None, help="Workers of a local cluster.")
@click.option("--token-file", type=click.Path(dir_okay=False), default=None,
              help="Every request but /healthz needs 'Authorization: Bearer <the file's first line>'.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Journal, accepted witnesses and results (default: distprove.serve.state-dir).")
@_friendly_errors
def serve_cmd(keys: tuple[str, ...], host: str, port: int, scheduler: str | None, backend: str | None,
              n_workers: int | None, token_file: str | None, state_dir: str | None) -> None:
    """Serve proofs over HTTP for each KEY (one or more: a key store or .zkey named by its stem,
    or NAME=PATH), resident on the cluster's workers, until interrupted (README.md, "A proving
    service")."""
    from .service.run import serve

    serve(keys, host=host, port=port, scheduler=scheduler, backend=backend, n_workers=n_workers,
          token_file=token_file, state_dir=state_dir, announce=lambda line: click.echo(line, err=True))


if __name__ == "__main__":
    main()
